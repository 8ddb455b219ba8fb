package stream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/sluicehq/sluice/server/stream"
)

// scriptSource is an upstream that sends one event per step of its script,
// Every apart, then ends with End (nil: a proper [DONE]). Silence models an
// upstream that goes quiet after the script without ending. It records when
// it was closed, as a real upstream sees the TCP close.
type scriptSource struct {
	script  []string
	every   time.Duration
	end     error
	silence bool

	events   chan TextEvent
	stop     chan struct{}
	once     sync.Once
	start    time.Time
	closedAt time.Duration
	sent     int // events sent; read after Events closed
	err      error
}

func newScriptSource(script []string, every time.Duration) *scriptSource {
	return &scriptSource{script: script, every: every, events: make(chan TextEvent), stop: make(chan struct{}), closedAt: -1}
}

func (s *scriptSource) run() {
	s.start = time.Now()
	go func() {
		defer close(s.events)
		for i, text := range s.script {
			select {
			case <-time.After(s.every):
			case <-s.stop:
				return
			}
			select {
			case s.events <- TextEvent{Text: text, Seq: int64(i + 1)}:
				s.sent++
			case <-s.stop:
				return
			}
		}
		if s.silence {
			<-s.stop
			return
		}
		s.err = s.end
	}()
}

func (s *scriptSource) Events() <-chan TextEvent { return s.events }
func (s *scriptSource) Err() error               { return s.err }
func (s *scriptSource) Close() {
	s.once.Do(func() { s.closedAt = time.Since(s.start); close(s.stop) })
}

func TestPumpText(t *testing.T) {
	tests := []struct {
		name     string
		script   []string
		every    time.Duration
		end      error
		silence  bool
		cfg      PumpConfig
		stops    []string
		cancelAt time.Duration
		shutAt   time.Duration
		failFrom int
		check    func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource)
	}{
		{
			name: "keep-alive while the upstream pauses, the stream survives", script: []string{"a", "b"},
			every: 40 * time.Second, cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: time.Minute},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				// 15, 30 before "a" at 40; 55, 70 before "b" at 80.
				want := []time.Duration{15 * time.Second, 30 * time.Second, 55 * time.Second, 70 * time.Second}
				if !slices.Equal(e.keepAlives, want) || out.Finish != "stop" || e.text.String() != "ab" {
					t.Errorf("keep-alives %v text %q outcome %+v; want %v, \"ab\", stop", e.keepAlives, e.text.String(), out, want)
				}
			},
		},
		{
			name: "an upstream silent before its first chunk stalls", script: []string{"a"},
			every: time.Hour, cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !errors.Is(out.Err, ErrStall) || src.closedAt != 30*time.Second || e.text.String() != "" {
					t.Errorf("outcome %+v closed at %v; want a stall at 30s", out, src.closedAt)
				}
			},
		},
		{
			name: "an upstream silent mid-stream stalls and is closed", script: []string{"a", "b"},
			every: time.Second, silence: true, cfg: PumpConfig{StallTimeout: 30 * time.Second},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !errors.Is(out.Err, ErrStall) || e.text.String() != "ab" || src.closedAt != 32*time.Second {
					t.Errorf("outcome %+v text %q closed at %v; want a stall 30s after \"b\"", out, e.text.String(), src.closedAt)
				}
			},
		},
		{
			name:   "a stop string split across chunks is held back, never sent, and closes the upstream",
			script: []string{"x", "ST", "O", "P", "y", "z"}, every: time.Second, stops: []string{"STOP"},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if out.Finish != "stop" || e.text.String() != "x" || src.closedAt != 4*time.Second || src.sent != 4 {
					t.Errorf("outcome %+v text %q closed at %v after %d events", out, e.text.String(), src.closedAt, src.sent)
				}
			},
		},
		{
			name:   "held text that never became a stop string is sent at the end",
			script: []string{"x", "ST"}, every: time.Second, stops: []string{"STOP"},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if out.Finish != "stop" || e.text.String() != "xST" {
					t.Errorf("outcome %+v text %q", out, e.text.String())
				}
			},
		},
		{
			name: "client gone closes the upstream at once", script: strings.Split("abcdefghij", ""),
			every: time.Second, cancelAt: 3500 * time.Millisecond,
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !out.ClientGone || out.Err != nil || src.closedAt != 3500*time.Millisecond || e.text.String() != "abc" {
					t.Errorf("outcome %+v closed at %v text %q", out, src.closedAt, e.text.String())
				}
			},
		},
		{
			name: "a failed write closes the upstream", script: strings.Split("abcdefghij", ""),
			every: time.Second, failFrom: 3,
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !out.ClientGone || src.closedAt != 3*time.Second {
					t.Errorf("outcome %+v closed at %v", out, src.closedAt)
				}
			},
		},
		{
			name: "shutdown ends the stream in-band", script: strings.Split("abcdef", ""),
			every: time.Second, shutAt: 2500 * time.Millisecond,
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !errors.Is(out.Err, ErrShutdown) || src.closedAt != 2500*time.Millisecond {
					t.Errorf("outcome %+v closed at %v", out, src.closedAt)
				}
			},
		},
		{
			name: "the source's error is the outcome, after the text so far", script: []string{"a", "b"},
			every: time.Second, end: ErrUpstreamTruncated,
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				if !errors.Is(out.Err, ErrUpstreamTruncated) || out.Finish != "" || e.text.String() != "ab" || out.LastSeq != 2 {
					t.Errorf("outcome %+v text %q", out, e.text.String())
				}
			},
		},
		{
			name: "flush interval groups chunks into fewer writes", script: strings.Split("abcdefghijklmnopqrst", ""),
			every: 5 * time.Millisecond, cfg: PumpConfig{FlushInterval: 25 * time.Millisecond},
			check: func(t *testing.T, out TextOutcome, e *recEmitter, src *scriptSource) {
				// 20 chunks from 5 ms to 100 ms: a write 25 ms after the first
				// chunk of each window; the last window's text is left for the
				// caller's final flush.
				if want := []time.Duration{30 * time.Millisecond, 55 * time.Millisecond, 80 * time.Millisecond}; !slices.Equal(e.flushes, want) || e.text.String() != "abcdefghijklmnopqrst" {
					t.Errorf("flushes at %v, text %q", e.flushes, e.text.String())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				shutdown := make(chan struct{})
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				if tt.shutAt > 0 {
					time.AfterFunc(tt.shutAt, func() { close(shutdown) })
				}
				src := newScriptSource(tt.script, tt.every)
				src.end, src.silence = tt.end, tt.silence
				e := &recEmitter{start: time.Now(), failFrom: tt.failFrom}
				src.run()
				out := PumpText(ctx, src, NewTextOnlyStream(tt.stops), e, tt.cfg, shutdown)
				synctest.Wait()
				tt.check(t, out, e, src)
			})
		})
	}
}

func TestTextJoiner(t *testing.T) {
	euro := "\u20ac"                         // E2 82 AC
	hi, lo := "\xed\xa0\xbd", "\xed\xb8\x80" // WTF-8 of \ud83d, \ude00
	tests := []struct {
		name   string
		chunks []string
		want   []string // what each Add returns
	}{
		{"ascii passes through", []string{"ab", "c"}, []string{"ab", "c"}},
		{"a character split across chunks waits for its end", []string{"a" + euro[:1], euro[1:2], euro[2:] + "b"}, []string{"a", "", euro + "b"}},
		{"a surrogate pair split across chunks joins", []string{"x" + hi, lo + "y"}, []string{"x", "\U0001F600y"}},
		{"a surrogate pair split inside the low half", []string{hi + lo[:1], lo[1:]}, []string{"", "\U0001F600"}},
		{"a lone low surrogate is U+FFFD", []string{lo + "a"}, []string{"\uFFFDa"}},
		{"a high surrogate without its low half is U+FFFD", []string{hi, "a"}, []string{"", "\uFFFDa"}},
		{"an invalid byte is U+FFFD", []string{"a\xffb"}, []string{"a\uFFFDb"}},
		{"a character never completed is dropped at the end", []string{"a" + euro[:2]}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var j TextJoiner
			for i, c := range tt.chunks {
				if got := j.Add([]byte(c)); got != tt.want[i] {
					t.Errorf("Add(%q) #%d = %q, want %q", c, i, got, tt.want[i])
				}
			}
			if got := j.Flush(); got != "" {
				t.Errorf("Flush = %q, want nothing", got)
			}
		})
	}
}
