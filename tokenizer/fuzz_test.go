package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Run longer with: go test ./tokenizer -run '^$' -fuzz FuzzDecoderText -fuzztime 30s

// FuzzDecoderText streams the encoding of arbitrary text through the Decoder
// of a byte-level and a SentencePiece vocabulary: the chunks must concatenate
// to Decode's text and never hold a partial character.
func FuzzDecoderText(f *testing.F) {
	for _, s := range decoderTexts {
		f.Add(s)
	}
	f.Add("\xe6\x97")       // truncated character
	f.Add("a\x00b\x80c")    // NUL and a stray continuation byte
	f.Add("<|im_start|>日本") // a control token before multi-byte text
	byteLevel := newTiny(f, nil)
	spm := newSPM(f, nil)
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range []*Tokenizer{byteLevel, spm} {
			ids := tok.Encode(text, true)
			checkStream(t, tok, ids)
			if tok == byteLevel && utf8.ValidString(text) && !strings.ContainsRune(text, 0) {
				if got := tok.Decode(ids, false); got != text {
					t.Fatalf("Decode(Encode(%q)) = %q", text, got)
				}
			}
		}
	})
}

// FuzzDecoderIDs streams arbitrary id sequences, which may split characters,
// leave them unfinished or interleave control tokens with byte tokens.
func FuzzDecoderIDs(f *testing.F) {
	f.Add([]byte{0, 3, 0, 4, 1, 9, 0, 40})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0xE6, 0x97, 0xA5, 0, 2, 0x41})
	byteLevel := newTiny(f, nil)
	spm := newSPM(f, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tok := range []*Tokenizer{byteLevel, spm} {
			ids := make([]int32, 0, len(data)/2)
			for i := 0; i+1 < len(data); i += 2 {
				ids = append(ids, int32(int(data[i])<<8|int(data[i+1]))%int32(tok.VocabSize()))
			}
			checkStream(t, tok, ids)
		}
	})
}
