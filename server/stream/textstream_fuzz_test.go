package stream_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// FuzzTextStream splits a text into tokens at arbitrary byte boundaries
// (inside characters too) and streams it against up to two stop strings. The
// matcher must never release a byte of a stop string, never lose text: what
// Push and Finish return, concatenated, is the text cut before the first
// stop string to complete (all of it when none occurs), every release keeps the output a
// prefix of that, and Sent counts exactly what was released. Where the text
// ends does not depend on the token boundaries.
func FuzzTextStream(f *testing.F) {
	f.Add("The END is near", []byte{3, 2, 1}, "END", "")
	f.Add("say ENDING now", []byte{5, 1, 1, 7}, "END", "ENDING")
	f.Add("aaab", []byte{1, 1, 1, 1}, "aab", "b")
	f.Add("0ENDING", []byte{0, 0, 0, 0, 0, 0}, "N", "END")
	f.Add("0ENDING", []byte{7}, "N", "END")
	f.Add("héllo wörld", []byte{2, 1, 3}, "ö", "llo w")
	f.Add("<tool_call>{}", []byte{1}, "<tool", "<tool_call>")
	f.Fuzz(func(t *testing.T, text string, splits []byte, stop1, stop2 string) {
		if !utf8.ValidString(text) || !utf8.ValidString(stop1) || !utf8.ValidString(stop2) {
			return // the decoder's UTF-8 hold-back has tests of its own
		}
		stops := []string{stop1, stop2}
		// The reference scans the text as a reader would, byte by byte: the
		// first stop string to complete ends it (the longest, if several
		// complete at the same byte).
		cut := -1
		for e := 1; e <= len(text) && cut < 0; e++ {
			for _, s := range stops {
				if s != "" && strings.HasSuffix(text[:e], s) && (cut < 0 || e-len(s) < cut) {
					cut = e - len(s)
				}
			}
		}
		want := text
		if cut >= 0 {
			want = text[:cut]
		}
		var pieces []string
		rest := text
		for i := 0; rest != ""; i++ {
			n := 1
			if i < len(splits) {
				n = 1 + int(splits[i])%8
			}
			n = min(n, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		v := streamtest.NewPieceVocab()
		ts := NewTextStream(v.NewDetokenizer(), stops)
		var got string
		for _, id := range v.IDs(pieces...) {
			d, stopped := ts.Push(id)
			got += d
			if !strings.HasPrefix(want, got) {
				t.Fatalf("pieces %q stops %q: released %q, not a prefix of %q", pieces, stops, got, want)
			}
			if stopped != ts.Stopped() || (stopped && cut < 0) {
				t.Fatalf("pieces %q stops %q: stopped=%v with no stop string in the text", pieces, stops, stopped)
			}
		}
		got += ts.Finish()
		if got != want {
			t.Fatalf("pieces %q stops %q: got %q, want %q", pieces, stops, got, want)
		}
		if ts.Sent() != len(got) {
			t.Fatalf("Sent() = %d, released %d bytes", ts.Sent(), len(got))
		}
		if cut >= 0 && (!ts.Stopped() || !strings.HasPrefix(text[len(want):], ts.Matched())) {
			t.Fatalf("pieces %q stops %q: Stopped=%v Matched=%q, want a stop at %d", pieces, stops, ts.Stopped(), ts.Matched(), len(want))
		}
	})
}
