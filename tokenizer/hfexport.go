package tokenizer

// HFJSON is the Hugging Face tokenizer.json behind t: the file a directory
// was loaded from, or the one New generated from a GGUF vocabulary. Other
// libraries that must agree with this tokenizer on every token's bytes
// (constrain hands it to llguidance) read it instead of re-deriving the
// byte-level or SentencePiece mapping. The slice is shared: do not modify it.
func (t *Tokenizer) HFJSON() []byte { return t.json }
