package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tinySPMVocab is a SentencePiece vocabulary laid out as Llama's: <unk>, <s>,
// </s>, the 256 byte tokens, then pieces with descending scores.
func tinySPMVocab() *Vocab {
	v := &Vocab{Model: "llama", BOS: 1, EOS: 2, EOT: -1, EOM: -1, Unknown: 0, Pad: -1, AddBOS: true, AddSpacePrefix: true}
	add := func(s string, typ int32, score float32) {
		v.Tokens = append(v.Tokens, s)
		v.TokenTypes = append(v.TokenTypes, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", typeUnknown, 0)
	add("<s>", typeControl, 0)
	add("</s>", typeControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), typeByte, 0)
	}
	// Every character is a piece (as SentencePiece guarantees for its
	// alphabet), with scores below every merged piece.
	for _, s := range []string{"▁", "h", "e", "l", "o", "w", "r", "d", "t", "日", "本"} {
		add(s, typeNormal, -100)
	}
	for i, s := range []string{"he", "ll", "▁t", "▁the", "llo", "▁he", "▁hello", "or", "▁w", "▁wor", "ld", "▁world"} {
		add(s, typeNormal, -float32(i+1))
	}
	return v
}

func newSPM(t testing.TB, edit func(*Vocab)) *Tokenizer {
	t.Helper()
	v := tinySPMVocab()
	if edit != nil {
		edit(v)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tok.Close)
	return tok
}

func TestSPMEncode(t *testing.T) {
	tok := newSPM(t, nil)
	tests := []struct {
		text    string
		special bool
		want    []string
	}{
		{"hello world", false, []string{"▁hello", "▁world"}},
		{"hello world", true, []string{"<s>", "▁hello", "▁world"}},
		// Highest score first: he, ll, llo, ▁he, ▁hello.
		{"hello", false, []string{"▁hello"}},
		// The two "he" tie; the left one merges first, then ▁t+he → ▁the.
		{"the  hello", false, []string{"▁the", "▁", "▁hello"}},
		// Characters without a piece fall back to their UTF-8 bytes.
		{"日本語", false, []string{"▁", "日", "本", "<0xE8>", "<0xAA>", "<0x9E>"}},
		// A space is prepended to text after a control token too (llama.cpp's
		// is_prev_special rule).
		{"<s>hello</s>world", false, []string{"<s>", "▁hello", "</s>", "▁world"}},
	}
	for _, tt := range tests {
		var got []string
		for _, id := range tok.Encode(tt.text, tt.special) {
			got = append(got, tok.pieces[id])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q, %v) = %q, want %q", tt.text, tt.special, got, tt.want)
		}
	}
	noPrefix := newSPM(t, func(v *Vocab) { v.AddSpacePrefix = false })
	if got := noPrefix.Encode("hello", false); len(got) != 2 || noPrefix.pieces[got[0]] != "he" || noPrefix.pieces[got[1]] != "llo" {
		t.Errorf("without add_space_prefix: %v", got)
	}
}

func TestSPMDecode(t *testing.T) {
	tok := newSPM(t, nil)
	for _, text := range []string{"hello world", "the  hello", "日本語 and 😀", " leading space"} {
		ids := tok.Encode(text, true)
		if got := tok.Decode(ids, true); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
		checkStream(t, tok, ids)
	}
	checkDecodeAgainstLibrary(t, tok, 3000)
}

// A byte group is held until it ends: <0x41><0x80> decodes as two U+FFFD, so
// "A" must not be emitted after the first byte.
func TestSPMDecoderHoldsByteGroups(t *testing.T) {
	tok := newSPM(t, nil)
	byteID := func(b byte) int32 { return tok.ids[fmt.Sprintf("<0x%02X>", b)] }
	hello := tok.ids["▁hello"]
	chunks := checkStream(t, tok, []int32{hello, byteID('A'), byteID(0x80), hello})
	if got := strings.Join(chunks, "|"); got != "hello|||\uFFFD\uFFFD hello|" {
		t.Errorf("chunks %q", chunks)
	}
}
