package tokenizer

// DecodeLibrary exposes the library's decoding to the external tests, which
// check the Go decoders against it on real vocabularies.
func DecodeLibrary(t *Tokenizer, ids []int32, skipSpecial bool) string {
	return t.decodeLibrary(ids, skipSpecial)
}
