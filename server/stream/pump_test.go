package stream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// recEmitter records what the pump asks of an emitter, with the (fake) time
// of each flush. Flushes numbered failFrom and later fail, as a write to a
// vanished client does.
type recEmitter struct {
	start      time.Time
	text       strings.Builder
	flushes    []time.Duration // time of each flush that wrote something
	keepAlives []time.Duration
	ended      time.Duration // when Pump returned
	dirty      bool
	failFrom   int
	n          int
}

func (e *recEmitter) Text(s string, _ []int32) error {
	e.text.WriteString(s)
	e.dirty = e.dirty || s != ""
	return nil
}
func (e *recEmitter) KeepAlive() error {
	e.keepAlives = append(e.keepAlives, time.Since(e.start))
	return nil
}
func (e *recEmitter) Flush() error {
	e.n++
	if e.failFrom > 0 && e.n >= e.failFrom {
		return errors.New("broken pipe")
	}
	if e.dirty {
		e.flushes = append(e.flushes, time.Since(e.start))
		e.dirty = false
	}
	return nil
}

func TestPump(t *testing.T) {
	tests := []struct {
		name     string
		script   []string
		queued   time.Duration
		prefill  time.Duration
		interval time.Duration
		cfg      PumpConfig
		naive    bool // Submit hides the client's leaving from the engine (AbortOnDisconnect off)
		stops    []string
		cancelAt time.Duration // cancel the request context (client gone)
		shutAt   time.Duration // close the shutdown channel
		failFrom int
		finish   engine.FinishReason
		check    func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine)
	}{
		{
			name: "keep-alive while queued, none once tokens flow", script: []string{"a", "b", "c"},
			queued: 40 * time.Second, interval: time.Second,
			cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: time.Minute},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if want := []time.Duration{15 * time.Second, 30 * time.Second}; !slices.Equal(e.keepAlives, want) {
					t.Errorf("keep-alives at %v, want %v", e.keepAlives, want)
				}
				if out.Finish != "stop" || e.text.String() != "abc" {
					t.Errorf("finish %q text %q", out.Finish, e.text.String())
				}
			},
		},
		{
			name: "stall timeout aborts a running sequence that stops producing", script: []string{"a", "b"},
			queued: time.Minute, interval: time.Hour,
			cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !errors.Is(out.Err, ErrStall) || out.ClientGone || e.text.String() != "a" {
					t.Errorf("outcome %+v text %q, want a stall error after \"a\"", out, e.text.String())
				}
				if !slices.Equal(eng.Aborts(), []engine.AbortCause{engine.CauseStall}) {
					t.Errorf("aborts %v", eng.Aborts())
				}
				if want := time.Minute + 30*time.Second; e.ended != want {
					t.Errorf("stalled at %v, want %v (the last token + the timeout)", e.ended, want)
				}
			},
		},
		{
			name: "waiting in the queue longer than the stall timeout is not a stall", script: []string{"a", "b", "c"},
			queued: 5 * time.Minute, interval: time.Second,
			cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if out.Err != nil || out.Finish != "stop" || e.text.String() != "abc" || len(eng.Aborts()) != 0 {
					t.Errorf("outcome %+v text %q aborts %v, want the whole stream", out, e.text.String(), eng.Aborts())
				}
				if len(e.keepAlives) != 20 { // every 15 s of the 5 minutes in the queue
					t.Errorf("%d keep-alives while queued, want 20", len(e.keepAlives))
				}
			},
		},
		{
			name: "the stall clock starts at admission: a prefill longer than the timeout stalls", script: []string{"a"},
			queued: 5 * time.Minute, prefill: time.Hour,
			cfg: PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !errors.Is(out.Err, ErrStall) || !slices.Equal(eng.Aborts(), []engine.AbortCause{engine.CauseStall}) {
					t.Errorf("outcome %+v aborts %v, want a stall", out, eng.Aborts())
				}
				if want := 5*time.Minute + 30*time.Second; e.ended != want {
					t.Errorf("stalled at %v, want %v (admission + the timeout)", e.ended, want)
				}
			},
		},
		{
			name: "client gone mid-stream aborts at once", script: strings.Split("abcdefghij", ""),
			interval: time.Second, cfg: PumpConfig{StallTimeout: time.Minute},
			cancelAt: 3500 * time.Millisecond,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !out.ClientGone || !out.CutShort || out.Err != nil {
					t.Errorf("outcome %+v, want client gone, cut short", out)
				}
				if !slices.Equal(eng.Aborts(), []engine.AbortCause{engine.CauseClientDisconnect}) {
					t.Errorf("aborts %v", eng.Aborts())
				}
				if e.text.String() != "abcd" {
					t.Errorf("text %q, want the 4 tokens produced before the cancel", e.text.String())
				}
			},
		},
		{
			name: "a failed write is a client gone", script: strings.Split("abcdefghij", ""),
			interval: time.Second, cfg: PumpConfig{}, failFrom: 3,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !out.ClientGone || !out.CutShort {
					t.Errorf("outcome %+v", out)
				}
				if len(eng.Aborts()) != 1 {
					t.Errorf("aborts %v", eng.Aborts())
				}
			},
		},
		{
			name: "without abort-on-disconnect the sequence runs into the void", script: strings.Split("abcdef", ""),
			interval: time.Second, cfg: PumpConfig{}, naive: true, cancelAt: 1500 * time.Millisecond,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !out.ClientGone || out.CutShort || out.Finish != "stop" || len(eng.Aborts()) != 0 {
					t.Errorf("outcome %+v aborts %v", out, eng.Aborts())
				}
			},
		},
		{
			name: "without abort-on-disconnect a failed write leaves the sequence running", script: strings.Split("abcdef", ""),
			interval: time.Second, cfg: PumpConfig{}, naive: true, failFrom: 2,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !out.ClientGone || out.CutShort || out.Finish != "stop" || len(eng.Aborts()) != 0 || eng.Produced() != 6 {
					t.Errorf("outcome %+v aborts %v produced %d", out, eng.Aborts(), eng.Produced())
				}
			},
		},
		{
			name: "shutdown ends the stream in-band", script: strings.Split("abcdef", ""),
			interval: time.Second, cfg: PumpConfig{}, shutAt: 2500 * time.Millisecond,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if !errors.Is(out.Err, ErrShutdown) || !slices.Equal(eng.Aborts(), []engine.AbortCause{engine.CauseShutdown}) {
					t.Errorf("outcome %+v aborts %v", out, eng.Aborts())
				}
			},
		},
		{
			name: "stop string aborts the sequence", script: []string{"x", "S", "T", "O", "P", "y", "z"},
			interval: time.Second, cfg: PumpConfig{}, stops: []string{"STOP"},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if out.Finish != "stop" || out.Err != nil || e.text.String() != "x" {
					t.Errorf("outcome %+v text %q", out, e.text.String())
				}
				if !slices.Equal(eng.Aborts(), []engine.AbortCause{engine.CauseStopString}) {
					t.Errorf("aborts %v", eng.Aborts())
				}
			},
		},
		{
			name: "an engine failure is an in-band error after the text so far", script: []string{"a", "b"},
			interval: time.Second, finish: engine.FinishError,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if out.Err == nil || out.Finish != "" || e.text.String() != "ab" {
					t.Errorf("outcome %+v text %q", out, e.text.String())
				}
			},
		},
		{
			name: "length limit", script: []string{"a", "b"}, finish: engine.FinishLength,
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if out.Finish != "length" || out.Err != nil {
					t.Errorf("outcome %+v", out)
				}
			},
		},
		{
			name: "flush interval 0 writes every token", script: strings.Split("abcdefghij", ""),
			interval: 5 * time.Millisecond, cfg: PumpConfig{},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				if len(e.flushes) != 10 {
					t.Errorf("%d flushes, want 10", len(e.flushes))
				}
			},
		},
		{
			name: "flush interval groups tokens into fewer writes", script: strings.Split("abcdefghijklmnopqrst", ""),
			interval: 5 * time.Millisecond, cfg: PumpConfig{FlushInterval: 25 * time.Millisecond},
			check: func(t *testing.T, out Outcome, e *recEmitter, eng *streamtest.ScriptEngine) {
				// 20 tokens over 95ms: one write per 25ms window (the last
				// window's text goes out at the end of the stream).
				if len(e.flushes) != 3 || e.text.String() != "abcdefghijklmnopqrst" {
					t.Errorf("flushes at %v, text %q", e.flushes, e.text.String())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := streamtest.NewPieceVocab()
				eng := &streamtest.ScriptEngine{Script: v.IDs(tt.script...), Queued: tt.queued, Prefill: tt.prefill, Interval: tt.interval, Finish: tt.finish}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				shutdown := make(chan struct{})
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				if tt.shutAt > 0 {
					time.AfterFunc(tt.shutAt, func() { close(shutdown) })
				}
				gen, err := Submit(ctx, eng, engine.Request{}, !tt.naive)
				if err != nil {
					t.Fatal(err)
				}
				e := &recEmitter{start: time.Now(), failFrom: tt.failFrom}
				out := Pump(gen, NewTextStream(v.NewDetokenizer(), tt.stops), e, tt.cfg, shutdown)
				e.ended = time.Since(e.start)
				if eng.Live() != 0 {
					t.Errorf("Pump returned with %d live sequences", eng.Live())
				}
				tt.check(t, out, e, eng)
			})
		})
	}
}
