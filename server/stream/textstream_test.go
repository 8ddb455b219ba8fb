package stream_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

func TestTextStream(t *testing.T) {
	tests := []struct {
		name    string
		pieces  []string
		stops   []string
		deltas  []string // what each Push returns
		final   string   // what Finish returns
		stopped bool
	}{
		{
			name:   "no stop strings: every piece passes at once",
			pieces: []string{"Hel", "lo", " world"},
			deltas: []string{"Hel", "lo", " world"},
		},
		{
			name:    "stop string spanning three tokens never appears",
			pieces:  []string{"The E", "N", "D", " is near"},
			stops:   []string{"END"},
			deltas:  []string{"The ", "", "", ""},
			stopped: true,
		},
		{
			name:    "stop string spanning three tokens after held text",
			pieces:  []string{"abc E", "N", "D", "x"},
			stops:   []string{"END"},
			deltas:  []string{"abc ", "", "", ""},
			stopped: true,
		},
		{
			name:   "partial match at the end is flushed",
			pieces: []string{"abc", " E", "N"},
			stops:  []string{"END"},
			deltas: []string{"abc", " ", ""},
			final:  "EN",
		},
		{
			name:   "held prefix that stops matching is released",
			pieces: []string{"E", "N", "X", "!"},
			stops:  []string{"END"},
			deltas: []string{"", "", "ENX", "!"},
		},
		{
			name:    "earliest of two stop strings wins",
			pieces:  []string{"one two three"},
			stops:   []string{"three", "two"},
			deltas:  []string{"one "},
			stopped: true,
		},
		{
			name:    "stop string at the very start",
			pieces:  []string{"##", "tail"},
			stops:   []string{"##"},
			deltas:  []string{"", ""},
			stopped: true,
		},
		{
			name:    "multibyte stop split inside a character",
			pieces:  []string{"こんにちは", "\xe3\x80", "\x82", "さようなら"},
			stops:   []string{"。"},
			deltas:  []string{"こんにちは", "", "", ""},
			stopped: true,
		},
		{
			name:   "emoji ZWJ sequence split across byte tokens arrives whole",
			pieces: []string{"\xf0\x9f\x91", "\xa9\xe2\x80\x8d", "\xf0\x9f\x92\xbb", "!"},
			stops:  []string{"STOP"},
			deltas: []string{"", "👩\u200d", "💻", "!"},
		},
		{
			name:   "longest held suffix across overlapping stops",
			pieces: []string{"xaab", "aab", "c"},
			stops:  []string{"aabaabd", "bc!"},
			deltas: []string{"x", "", "aabaa"},
			final:  "bc",
		},
		{
			name:   "a character cut by the end of generation is dropped, not sent as U+FFFD",
			pieces: []string{"ok ", "\xf0\x9f"},
			deltas: []string{"ok ", ""},
		},
		{
			name:   "a cut character after held text: the held text is still flushed",
			pieces: []string{"ok E", "\xe3\x81"},
			stops:  []string{"END"},
			deltas: []string{"ok ", ""},
			final:  "E",
		},
		{
			name:    "stop completed by the final flush",
			pieces:  []string{"ok E", "N", "D\xe2"},
			stops:   []string{"END"},
			deltas:  []string{"ok ", "", ""},
			stopped: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := streamtest.NewPieceVocab()
			ids := v.IDs(tt.pieces...)
			ts := NewTextStream(v.NewDetokenizer(), tt.stops)
			var got strings.Builder
			for i, id := range ids {
				d, _ := ts.Push(id)
				if d != tt.deltas[i] {
					t.Errorf("push %d (%q): got %q, want %q", i, tt.pieces[i], d, tt.deltas[i])
				}
				got.WriteString(d)
				if ts.Sent() != got.Len() {
					t.Fatalf("Sent()=%d after push %d, but %d bytes were returned (held %q)", ts.Sent(), i, got.Len(), ts.Held())
				}
			}
			final := ts.Finish()
			if final != tt.final {
				t.Errorf("Finish: got %q, want %q", final, tt.final)
			}
			got.WriteString(final)
			if ts.Stopped() != tt.stopped {
				t.Errorf("Stopped()=%v, want %v", ts.Stopped(), tt.stopped)
			}
			if ts.Sent() != got.Len() {
				t.Errorf("Sent()=%d, returned %d bytes", ts.Sent(), got.Len())
			}
			if len(ts.IDs()) > len(ids) {
				t.Errorf("IDs() has %d tokens, only %d pushed", len(ts.IDs()), len(ids))
			}
			for _, s := range tt.stops {
				if strings.Contains(got.String(), s) {
					t.Errorf("output %q contains stop string %q", got.String(), s)
				}
			}
		})
	}
}

// TestTextStreamNeverLeaksStopPrefix checks invariant 7 exhaustively over
// every split of a text into three tokens: the output is the text cut at the
// first stop string, and no prefix of the stop string is ever released
// before the token that decides it.
func TestTextStreamNeverLeaksStopPrefix(t *testing.T) {
	const text = "say ENDING now"
	stop := "END"
	want := text[:strings.Index(text, stop)]
	for i := 1; i < len(text); i++ {
		for j := i + 1; j < len(text); j++ {
			v := streamtest.NewPieceVocab()
			ids := v.IDs(text[:i], text[i:j], text[j:])
			ts := NewTextStream(v.NewDetokenizer(), []string{stop})
			var got string
			for _, id := range ids {
				d, _ := ts.Push(id)
				got += d
				if !strings.HasPrefix(want, got) {
					t.Fatalf("split %d,%d: released %q, not a prefix of %q", i, j, got, want)
				}
			}
			got += ts.Finish()
			if got != want {
				t.Fatalf("split %d,%d: got %q, want %q", i, j, got, want)
			}
		}
	}
}
