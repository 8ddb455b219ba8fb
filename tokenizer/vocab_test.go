package tokenizer

import "testing"

// byteChars is GPT-2's bytes_to_unicode table: the printable character that
// byte-level BPE vocabularies use to spell each byte.
func byteChars() [256]rune {
	var out [256]rune
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			out[b] = rune(b)
		} else {
			out[b] = rune(256 + n)
			n++
		}
	}
	return out
}

// tinyByteVocab is a small but complete byte-level BPE vocabulary: every byte
// is a token, a handful of merges build "Ġthe", "Ġhello" and "in", and three
// ChatML control tokens come first as in SmolLM2.
func tinyByteVocab(tb testing.TB) *Vocab {
	tb.Helper()
	v := &Vocab{
		Model: "gpt2", Pre: "smollm",
		BOS: 1, EOS: 2, EOT: -1, EOM: -1, Unknown: 0, Pad: -1,
	}
	add := func(s string, typ int32) {
		v.Tokens = append(v.Tokens, s)
		v.TokenTypes = append(v.TokenTypes, typ)
	}
	add("<|endoftext|>", typeControl)
	add("<|im_start|>", typeControl)
	add("<|im_end|>", typeControl)
	for _, r := range byteChars() {
		add(string(r), typeNormal)
	}
	for _, m := range [][2]string{{"Ġ", "t"}, {"Ġ", "h"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"e", "l"}, {"el", "l"}, {"ell", "o"}, {"Ġh", "ello"}} {
		v.Merges = append(v.Merges, m[0]+" "+m[1])
		add(m[0]+m[1], typeNormal)
	}
	return v
}

func newTiny(tb testing.TB, edit func(*Vocab)) *Tokenizer {
	tb.Helper()
	v := tinyByteVocab(tb)
	if edit != nil {
		edit(v)
	}
	tok, err := New(v)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(tok.Close)
	return tok
}
