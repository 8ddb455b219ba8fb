package tokenizer

import "testing"

// TestTokenBytesSPM: a SentencePiece piece's ▁ is a space and a byte-fallback
// token is its byte, so the joined bytes are the text with the prefix space
// SentencePiece adds (Decode strips it; logprobs keep it, as each token's own).
func TestTokenBytesSPM(t *testing.T) {
	tok := newSPM(t, nil)
	for _, text := range []string{"hello world", "日本語 and 😀"} {
		var got []byte
		for _, id := range tok.Encode(text, false) {
			got = append(got, tok.TokenBytes(id)...)
		}
		if string(got) != " "+text {
			t.Errorf("%q: token bytes join to %q", text, got)
		}
	}
}
