package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// pumpOnEngine submits one request per entry of maxTokens to a real engine
// over m with one running slot, pumps them all concurrently with cfg, and
// returns their outcomes in submission order.
func pumpOnEngine(t *testing.T, m *streamtest.SlowModel, cfg PumpConfig, maxTokens ...int) []Outcome {
	t.Helper()
	e, err := engine.New(m, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	v := streamtest.NewPieceVocab()
	outs := make([]Outcome, len(maxTokens))
	var wg sync.WaitGroup
	for i, n := range maxTokens {
		gen, err := Submit(t.Context(), FromEngine(e), engine.Request{Prompt: []int32{'h', 'i'}, MaxTokens: n}, true)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			em := &recEmitter{start: time.Now()}
			outs[i] = Pump(gen, NewTextStream(v.NewDetokenizer(), nil), em, cfg, nil)
		})
	}
	wg.Wait()
	return outs
}

// Through the real engine: a request queued behind a long generation for
// far longer than the stall timeout runs to its end once admitted.
func TestPumpEngineQueueWaitIsNotAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &streamtest.SlowModel{Step: 10 * time.Second}
		cfg := PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second}
		// The first holds the only slot for 10 steps (100 s); the second waits.
		outs := pumpOnEngine(t, m, cfg, 10, 3)
		for i, out := range outs {
			if out.Err != nil || out.Finish != "length" || out.Result.CompletionTokens != []int{10, 3}[i] {
				t.Errorf("request %d: %+v, want it to run to its length", i, out)
			}
		}
	})
}

// Through the real engine: time inside a step that includes the sequence
// is service, however long the step: a prompt processed in one chunk that
// takes three stall windows, or a decode step that hangs for two, is not a
// stall (issue 30: with --threads 1 --stall-timeout 2s a 1,800-token prompt
// got 504 stall_timeout because its one chunk outlasted the window).
func TestPumpEngineLongStepIsNotAStall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		model  streamtest.SlowModel
		prompt int
	}{
		{"one prompt chunk of three windows", streamtest.SlowModel{Step: 90 * time.Second}, 600},
		{"a decode step of two windows", streamtest.SlowModel{Step: time.Second, HangAt: 3, Hang: time.Minute}, 2},
	} {
		for _, streamed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/streamed=%v", tc.name, streamed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					m := tc.model
					e, err := engine.New(&m, engine.Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 1024})
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close(context.Background())
					cfg := PumpConfig{StallTimeout: 30 * time.Second}
					if streamed {
						cfg.FlushInterval, cfg.KeepAlive = 25*time.Millisecond, 15*time.Second
					}
					prompt := make([]int32, tc.prompt)
					for i := range prompt {
						prompt[i] = 'a' + int32(i%26)
					}
					gen, err := Submit(t.Context(), FromEngine(e), engine.Request{Prompt: prompt, MaxTokens: 5}, true)
					if err != nil {
						t.Fatal(err)
					}
					em := &recEmitter{start: time.Now()}
					out := Pump(gen, NewTextStream(streamtest.NewPieceVocab().NewDetokenizer(), nil), em, cfg, nil)
					if out.Err != nil || out.Finish != "length" || em.text.String() != "xxxxx" {
						t.Errorf("%+v text %q, want all 5 tokens", out, em.text.String())
					}
					if took := time.Since(em.start); took < 2*cfg.StallTimeout {
						t.Errorf("took %v: no step was longer than the stall window", took)
					}
				})
			})
		}
	}
}

// Through the real engine: a running sequence the loop stops stepping is
// still aborted as stalled. Here a request of higher priority preempts it
// (one running slot) and holds the loop for 100 s; the preempted sequence's
// wait for readmission is a pause of a running generation, and ends one
// window after its last token.
func TestPumpEnginePreemptedStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &streamtest.SlowModel{Step: 10 * time.Second}
		e, err := engine.New(m, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(context.Background())
		v := streamtest.NewPieceVocab()
		cfg := PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second}
		submit := func(priority, n int) *Generation {
			gen, err := Submit(t.Context(), FromEngine(e), engine.Request{Prompt: []int32{'h', 'i'}, MaxTokens: n, Priority: priority}, true)
			if err != nil {
				t.Fatal(err)
			}
			return gen
		}
		low := submit(0, 20)
		var outs [2]Outcome
		var ems [2]*recEmitter
		var wg sync.WaitGroup
		pump := func(i int, gen *Generation) {
			ems[i] = &recEmitter{start: time.Now()}
			wg.Go(func() {
				outs[i] = Pump(gen, NewTextStream(v.NewDetokenizer(), nil), ems[i], cfg, nil)
				ems[i].ended = time.Since(ems[i].start)
			})
		}
		pump(0, low)
		time.Sleep(25 * time.Second) // low has its first two tokens (10 s a step)
		synctest.Wait()
		pump(1, submit(1, 10))
		wg.Wait()
		if out := outs[0]; !errors.Is(out.Err, ErrStall) || out.Result.Cause != engine.CauseStall || out.Result.CompletionTokens != 3 {
			t.Errorf("preempted: %+v, want a stall abort after 3 tokens", out)
		}
		// Its third token came at 30 s and the higher-priority request took
		// the slot at that boundary; the stall (at 60 s) lands at the end of
		// the step then in flight.
		if limit := 30*time.Second + cfg.StallTimeout + m.Step; ems[0].ended > limit {
			t.Errorf("preempted one ended at %v, want by %v", ems[0].ended, limit)
		}
		if out := outs[1]; out.Err != nil || out.Finish != "length" {
			t.Errorf("preempting: %+v, want it to run to its length", out)
		}
	})
}

// Through the real engine: a prompt whose processing takes several stall
// windows (600 tokens, 16 a step, 10 s a step: 380 s against a 30 s
// timeout) completes, streamed (coalesced, keep-alives) and not, because
// every prompt chunk is progress. A step that hangs still stalls (above).
func TestPumpEngineLongPromptIsNotAStall(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &streamtest.SlowModel{Step: 10 * time.Second}
				e, err := engine.New(m, engine.Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close(context.Background())
				cfg := PumpConfig{StallTimeout: 30 * time.Second}
				if streamed {
					cfg.FlushInterval, cfg.KeepAlive = 25*time.Millisecond, 15*time.Second
				}
				prompt := make([]int32, 600)
				for i := range prompt {
					prompt[i] = 'a' + int32(i%26)
				}
				gen, err := Submit(t.Context(), FromEngine(e), engine.Request{Prompt: prompt, MaxTokens: 3}, true)
				if err != nil {
					t.Fatal(err)
				}
				v := streamtest.NewPieceVocab()
				em := &recEmitter{start: time.Now()}
				out := Pump(gen, NewTextStream(v.NewDetokenizer(), nil), em, cfg, nil)
				if out.Err != nil || out.Finish != "length" || em.text.String() != "xxx" {
					t.Errorf("%+v text %q, want the prompt processed and 3 tokens", out, em.text.String())
				}
				if took := time.Since(em.start); took < 10*cfg.StallTimeout {
					t.Errorf("took %v: the prompt was not several stall windows long", took)
				}
			})
		})
	}
}
