package tokenizer

import "strings"

// TokenBytes returns the bytes one token stands for, as OpenAI's logprobs
// report them: a byte-level token's bytes (possibly part of one UTF-8
// character), a SentencePiece piece with ▁ as a space, a byte-fallback
// token's single byte, and a special token's own text ("<|im_end|>"). Out of
// range ids have none.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= t.vocabSize {
		return nil
	}
	switch t.kind {
	case decodeByteLevel:
		return t.bytes[id]
	case decodeSPM:
		if b, ok := fallbackByte(t.pieces[id]); ok {
			return []byte{b}
		}
		return []byte(strings.ReplaceAll(t.pieces[id], "▁", " "))
	}
	return []byte(t.Decode([]int32{id}, false))
}
