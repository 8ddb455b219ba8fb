package tokenizer_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/tokenizer"
)

// Every C0 control character and DEL, NUL included, is encoded and decodes
// back intact, or Unencodable names it (the vocabulary has no token for
// it), and nothing after it is lost: the library's C interface
// takes C strings, so a NUL used to end the text there (a chat's later
// turns and its generation prompt silently dropped).
func TestSmolControlCharsIntact(t *testing.T) {
	tok := smolTokenizer(t)
	for c := range 0x20 + 1 {
		if c == 0x20 {
			c = 0x7f
		}
		text := "a" + string(rune(c)) + "b, and after: <|im_start|>assistant\n" + string(rune(c))
		if r, at, ok := tok.Unencodable(text); ok {
			// SmolLM2's vocabulary has no token for six of these bytes:
			// the library would drop them, so a caller is told first.
			if r != rune(c) || at != 1 || !strings.ContainsRune("\x04\x06\x13\x14\x16\x1d", r) {
				t.Errorf("%#x: Unencodable(%q) = %q at %d", c, text, r, at)
			}
			continue
		}
		ids := tok.Encode(text, false)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("%#x: Decode(Encode(%q)) = %q", c, text, got)
		}
		plain, err := tok.EncodePlain(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Decode(plain, false); got != text {
			t.Errorf("%#x: Decode(EncodePlain(%q)) = %q", c, text, got)
		}
	}
	// The chat case of the report: a NUL in the first message keeps the
	// second one and the generation prompt.
	prompt, err := tok.ApplyChatTemplate([]tokenizer.Message{
		{Role: "user", Content: "one\x00two"}, {Role: "assistant", Content: "three"}, {Role: "user", Content: "four"},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := tok.Decode(tok.Encode(prompt, false), false)
	if got != prompt || !strings.HasSuffix(got, "four<|im_end|>\n<|im_start|>assistant\n") {
		t.Errorf("rendered %q, tokenized and decoded %q", prompt, got)
	}
	// Text without a NUL is encoded whole, as before; with one, the NUL is
	// the byte token and the pieces around it are their own encodings.
	nul, _ := tok.TokenID("Ā")
	want := append(append(tok.Encode("Hello", false), nul), tok.Encode(" world", false)...)
	if got := tok.Encode("Hello\x00 world", false); !slices.Equal(got, want) {
		t.Errorf("Encode(Hello\\x00 world) = %v, want %v", got, want)
	}
}

func TestSmolUnencodable(t *testing.T) {
	tok := smolTokenizer(t)
	for _, tc := range []struct {
		text string
		r    rune
		at   int
	}{{"héllo\x04", 4, 6}, {"\x1d", 0x1d, 0}} {
		if r, at, ok := tok.Unencodable(tc.text); !ok || r != tc.r || at != tc.at {
			t.Errorf("Unencodable(%q) = %q, %d, %v", tc.text, r, at, ok)
		}
	}
	if _, _, ok := tok.Unencodable("plain text, \x00 \t\n and ünïcödé 🙂"); ok {
		t.Error("encodable text reported")
	}
}
