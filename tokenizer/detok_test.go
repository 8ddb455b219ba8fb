package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Expected values are what Rust's String::from_utf8_lossy returns (the
// library's ByteLevel decoder), one U+FFFD per maximal ill-formed subpart.
func TestLossyUTF8(t *testing.T) {
	const r = "\uFFFD"
	tests := []struct{ in, want string }{
		{"plain ascii", "plain ascii"},
		{"日本", "日本"},
		{"\xE3\x81", r},        // truncated 3-byte sequence
		{"\xE3\x81a", r + "a"}, // one replacement for the whole subpart
		{"\xF0\x9F\x98", r},    // truncated 4-byte sequence
		{"\xF0\x9F\x98\x80\xF0\x9F", "😀" + r},
		{"\xED\xA0\x80", r + r + r},         // surrogate: ED allows only 80..9F next
		{"\xC0\x80", r + r},                 // overlong
		{"\xF4\x90\x80\x80", r + r + r + r}, // above U+10FFFF
		{"a\x80b", "a" + r + "b"},
		{"\xE0\x80", r + r}, // E0 needs A0..BF
		{"\xEF\xBF\xBD", r}, // a real U+FFFD passes through
	}
	for _, tt := range tests {
		if got := lossyUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFallbackByte(t *testing.T) {
	tests := []struct {
		in   string
		want byte
		ok   bool
	}{
		{"<0x00>", 0, true}, {"<0x0A>", '\n', true}, {"<0xff>", 0xFF, true}, {"<0xE3>", 0xE3, true},
		{"<0x0G>", 0, false}, {"<0x0A", 0, false}, {"0x0A>>", 0, false}, {"▁a", 0, false},
	}
	for _, tt := range tests {
		got, ok := fallbackByte(tt.in)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("fallbackByte(%q) = %#x, %v; want %#x, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// nulFree reports whether id's text holds no NUL byte, the one case the
// library cannot return.
func nulFree(tok *Tokenizer, id int32) bool {
	switch tok.kind {
	case decodeByteLevel:
		return !strings.ContainsRune(string(tok.bytes[id]), 0)
	case decodeSPM:
		return tok.pieces[id] != "<0x00>"
	}
	return true
}

// checkDecodeAgainstLibrary decodes random id sequences both in Go and through
// the library and requires the same text.
func checkDecodeAgainstLibrary(t *testing.T, tok *Tokenizer, seqs int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for range seqs {
		ids := make([]int32, 1+rng.IntN(12))
		for i := range ids {
			for {
				ids[i] = int32(rng.IntN(tok.VocabSize()))
				if nulFree(tok, ids[i]) {
					break
				}
			}
		}
		for _, skip := range []bool{false, true} {
			if got, want := tok.decodeGo(ids, skip), tok.decodeLibrary(ids, skip); got != want {
				t.Fatalf("ids %v skipSpecial=%v: Go decodes %q, library %q", ids, skip, got, want)
			}
		}
	}
}

func TestDecodeByteLevelMatchesLibrary(t *testing.T) {
	checkDecodeAgainstLibrary(t, newTiny(t, nil), 2000)
}

// A NUL byte, which the library's C interface cannot return, decodes.
func TestDecodeNUL(t *testing.T) {
	tok := newTiny(t, nil)
	nul, _ := tok.TokenID(string(byteChars()[0]))
	a, _ := tok.TokenID("a")
	if got := tok.Decode([]int32{a, nul, a}, false); got != "a\x00a" {
		t.Errorf("Decode = %q, want %q", got, "a\x00a")
	}
}
