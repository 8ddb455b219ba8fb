package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// stream feeds ids one at a time through a fresh Decoder and returns every
// chunk it produced, Flush's last.
func stream(tok *Tokenizer, context, ids []int32) []string {
	d := tok.NewDecoder(context...)
	out := make([]string, 0, len(ids)+1)
	for _, id := range ids {
		out = append(out, d.Add(id))
	}
	return append(out, d.Flush())
}

// checkStream asserts the decoder's contract for ids: the chunks concatenate
// to Decode(ids, true), and no chunk holds an incomplete character (invalid
// UTF-8, or U+FFFD that the full decoding does not have at that place).
func checkStream(tb testing.TB, tok *Tokenizer, ids []int32) []string {
	tb.Helper()
	chunks := stream(tok, nil, ids)
	want := tok.Decode(ids, true)
	if got := strings.Join(chunks, ""); got != want {
		tb.Fatalf("ids %v: chunks %q concatenate to %q, Decode gives %q", ids, chunks, got, want)
	}
	for i, c := range chunks {
		if !utf8.ValidString(c) {
			tb.Fatalf("ids %v: chunk %d %q is not valid UTF-8", ids, i, c)
		}
	}
	if !strings.Contains(want, "\uFFFD") {
		for i, c := range chunks {
			if strings.Contains(c, "\uFFFD") {
				tb.Fatalf("ids %v: chunk %d %q holds U+FFFD, the text %q does not", ids, i, c, want)
			}
		}
	}
	return chunks
}

func TestDecoderByteTokens(t *testing.T) {
	tok := newTiny(t, nil)
	tests := []struct {
		text  string
		added []string // what each Add returns, then Flush
	}{
		// Every byte of 日 is its own token: nothing until the third.
		{"日x", []string{"", "", "日", "x", ""}},
		{" the hello", []string{" the", " hello", ""}},
		{"é", []string{"", "é", ""}},
	}
	for _, tt := range tests {
		ids := tok.Encode(tt.text, false)
		got := checkStream(t, tok, ids)
		if strings.Join(got, "|") != strings.Join(tt.added, "|") {
			t.Errorf("%q (ids %v): chunks %q, want %q", tt.text, ids, got, tt.added)
		}
	}
}

func TestDecoderProperties(t *testing.T) {
	tok := newTiny(t, nil)
	for _, text := range decoderTexts {
		ids := tok.Encode(text, false)
		checkStream(t, tok, ids)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("round trip %q: got %q", text, got)
		}
	}
}

// A truncated character at the end is flushed as U+FFFD, as Decode gives it.
func TestDecoderFlushIncomplete(t *testing.T) {
	tok := newTiny(t, nil)
	ids := tok.Encode("a日", false)
	chunks := checkStream(t, tok, ids[:len(ids)-1])
	if last := chunks[len(chunks)-1]; last != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", last)
	}
}

// Special tokens are skipped; context tokens are decoded but not emitted.
func TestDecoderSpecialAndContext(t *testing.T) {
	tok := newTiny(t, nil)
	ids := tok.Encode("<|im_start|>hello<|im_end|>", false)
	if got := strings.Join(stream(tok, nil, ids), ""); got != "hello" {
		t.Errorf("got %q, want %q", got, "hello")
	}
	prompt := tok.Encode("say the", false)
	gen := tok.Encode(" hello 日本", false)
	if got := strings.Join(stream(tok, prompt, gen), ""); got != " hello 日本" {
		t.Errorf("after context: got %q", got)
	}
}

// decoderTexts are the streaming test inputs: scripts whose characters span
// several tokens, grapheme clusters of several code points, and code.
var decoderTexts = []string{
	"Hello, world! the hello",
	"日本の首都は東京です。東京には多くの人が住んでいます。",
	"Family: 👨‍👩‍👧 and 👍🏽, flags 🇯🇵🇫🇷, 🏳️‍🌈",
	"e\u0301 n\u0303 a\u0308\u0304 Zalgo: Z\u0351\u0364a\u036Bl\u0303g\u0352o",
	"func main() {\n\tfmt.Println(\"héllo\") // 世界\n}\n",
	"mixed ascii and Ελληνικά and русский and עברית and हिन्दी",
	"   leading and trailing spaces   ",
}
