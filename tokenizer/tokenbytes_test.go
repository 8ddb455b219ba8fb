package tokenizer_test

import (
	"bytes"
	"testing"
)

// TestTokenBytesConcatenate: the bytes of a text's tokens, joined, are the
// text's bytes, whatever characters the tokens split (the vocabulary of the
// test model: byte-level BPE).
func TestTokenBytesConcatenate(t *testing.T) {
	tok := smolTokenizer(t)
	for _, text := range []string{"Hello, world!", "Héllo — 東京 🚀", "  spaces\tand\nnewlines", "ÿ\u00a0x"} {
		var got []byte
		for _, id := range tok.Encode(text, false) {
			got = append(got, tok.TokenBytes(id)...)
		}
		if !bytes.Equal(got, []byte(text)) {
			t.Errorf("%q: token bytes join to %q", text, got)
		}
	}
	if tok.TokenBytes(-1) != nil || tok.TokenBytes(int32(tok.VocabSize())) != nil {
		t.Error("an out-of-range id has bytes")
	}
}
