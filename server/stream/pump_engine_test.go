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

// Through the real engine: a running sequence whose step hangs for longer
// than the stall timeout is still aborted as stalled.
func TestPumpEngineRunningStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &streamtest.SlowModel{Step: time.Second, HangAt: 3, Hang: time.Minute}
		cfg := PumpConfig{KeepAlive: 15 * time.Second, StallTimeout: 30 * time.Second}
		out := pumpOnEngine(t, m, cfg, 10)[0]
		// The hung step still delivers its token; the abort lands at the
		// boundary after it.
		if !errors.Is(out.Err, ErrStall) || out.Result.Cause != engine.CauseStall || out.Result.CompletionTokens != 3 {
			t.Errorf("%+v, want a stall abort after 3 tokens", out)
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
