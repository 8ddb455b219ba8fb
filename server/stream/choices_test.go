package stream_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// choiceRec is one choice's emitter. All of a request's share inside, which
// counts calls in progress: PumpChoices must never let two overlap.
type choiceRec struct {
	text     strings.Builder
	inside   *atomic.Int32
	overlaps *atomic.Int32
	failing  bool
}

func (c *choiceRec) enter() func() {
	if c.inside.Add(1) > 1 {
		c.overlaps.Add(1)
	}
	// Hold the call open so an overlap would show. Not with a sleep: a
	// goroutine waiting on a mutex stops synctest's clock.
	for range 3 {
		runtime.Gosched()
	}
	return func() { c.inside.Add(-1) }
}

func (c *choiceRec) Text(s string, _ []int32) error {
	defer c.enter()()
	c.text.WriteString(s)
	return nil
}
func (c *choiceRec) KeepAlive() error              { defer c.enter()(); return nil }
func (c *choiceRec) ToolCall(ToolCallDelta) error  { defer c.enter()(); return nil }
func (c *choiceRec) Logprobs(lps []engine.Logprob) {}
func (c *choiceRec) Flush() error {
	defer c.enter()()
	if c.failing {
		return errors.New("broken pipe")
	}
	return nil
}

func choicesBackend(t *testing.T, m engine.Model) (*Backend, *engine.Engine) {
	t.Helper()
	e, err := engine.New(m, engine.Config{Blocks: 64, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return &Backend{Engine: FromEngine(e), Tokenizer: streamtest.NewPieceVocab(), ContextLen: 1024}, e
}

// sampledChoices asks for n sampled choices of "hello" that end on any of 16
// stop bytes, so each stops at a point of its own.
func sampledChoices(n int) *GenRequest {
	g := &GenRequest{Prompt: "hello there, a prompt longer than one block", N: n}
	temp, seed, maxTok := 1.0, uint64(5), 40
	stops := make([]string, 16)
	for i := range stops {
		stops[i] = string(rune('a' + i))
	}
	if err := g.SetParams(Params{Temperature: &temp, Seed: &seed, MaxTokens: &maxTok, Stop: stops}); err != nil {
		panic(err)
	}
	return g
}

func pumpChoices(t *testing.T, b *Backend, reqs []engine.Request, n int, recs []*choiceRec) []Outcome {
	t.Helper()
	gens, err := SubmitChoices(t.Context(), b.Engine, reqs, n, true)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]ChoiceStream, len(gens))
	for i, gen := range gens {
		cs[i] = ChoiceStream{Gen: gen, Out: recs[i], Text: NewTextStream(b.Tokenizer.NewDetokenizer(), []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"})}
	}
	return PumpChoices(cs, PumpConfig{}, nil)
}

func newRecs(n int) []*choiceRec {
	var inside, overlaps atomic.Int32
	recs := make([]*choiceRec, n)
	for i := range recs {
		recs[i] = &choiceRec{inside: &inside, overlaps: &overlaps}
	}
	return recs
}

// Every choice of a group streams, stops and finishes exactly as a request
// alone with its seed (the request's + its index) would; the choices'
// emitter calls never overlap; all blocks are back at the end.
func TestPumpChoicesMatchLoneRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, e := choicesBackend(t, &streamtest.SlowModel{Step: time.Millisecond})
		g := sampledChoices(4)
		reqs, err := PrepareChoices(b, g)
		if err != nil {
			t.Fatal(err)
		}
		recs := newRecs(4)
		outs := pumpChoices(t, b, reqs, 4, recs)
		if n := recs[0].overlaps.Load(); n > 0 {
			t.Fatalf("%d emitter calls overlapped another choice's", n)
		}
		texts := map[string]bool{}
		for j, out := range outs {
			if *reqs[j].Sampling.Seed != 5+uint64(j) {
				t.Fatalf("choice %d seed %d, want %d", j, *reqs[j].Sampling.Seed, 5+j)
			}
			lone := newRecs(1)
			want := pumpChoices(t, b, reqs[j:j+1], 1, lone)[0]
			if got := recs[j].text.String(); got != lone[0].text.String() || out.Finish != want.Finish {
				t.Fatalf("choice %d: %q (%s), alone %q (%s)", j, got, out.Finish, lone[0].text.String(), want.Finish)
			}
			texts[recs[j].text.String()] = true
		}
		if len(texts) < 3 {
			t.Fatalf("choices with 4 seeds wrote only %d distinct texts", len(texts))
		}
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 || st.Running+st.Waiting != 0 {
			t.Fatalf("after the choices: %+v", st.KV)
		}
	})
}

// A write that fails for one choice ends them all (one client, one
// connection), and every block is freed.
func TestPumpChoicesWriteFailureEndsAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, e := choicesBackend(t, &streamtest.SlowModel{Step: time.Second})
		g := &GenRequest{Prompt: "hi", N: 3, MaxTokens: 500}
		reqs, err := PrepareChoices(b, g)
		if err != nil {
			t.Fatal(err)
		}
		recs := newRecs(3)
		recs[1].failing = true
		outs := pumpChoices(t, b, reqs, 3, recs)
		for j, out := range outs {
			if !out.ClientGone || out.Result.Finish != engine.FinishAbort || out.Result.CompletionTokens >= 500 {
				t.Fatalf("choice %d: %+v, want it aborted with the client", j, out)
			}
		}
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 || st.Aborted != 3 {
			t.Fatalf("after the failed write: %+v, %d aborted", st.KV, st.Aborted)
		}
	})
}

// A list of prompts gives each its n choices in OpenAI's order (index =
// prompt*n + j), token-id prompts used as given.
func TestPrepareChoicesOrder(t *testing.T) {
	b, _ := choicesBackend(t, &streamtest.SlowModel{})
	g := &GenRequest{N: 2}
	seed := uint64(100)
	if err := g.SetParams(Params{Seed: &seed}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetBatch([]BatchPrompt{{Text: "ab"}, {IDs: []int32{7, 8, 9}}}); err != nil {
		t.Fatal(err)
	}
	reqs, err := PrepareChoices(b, g)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{{'a', 'b'}, {'a', 'b'}, {7, 8, 9}, {7, 8, 9}}
	if len(reqs) != 4 || g.NumChoices() != 4 {
		t.Fatalf("%d requests (%d choices), want 4", len(reqs), g.NumChoices())
	}
	for i, r := range reqs {
		if !slices.Equal(r.Prompt, want[i]) || *r.Sampling.Seed != 100+uint64(i%2) {
			t.Fatalf("request %d: prompt %v seed %d, want %v seed %d", i, r.Prompt, *r.Sampling.Seed, want[i], 100+i%2)
		}
	}
}

func TestChoiceLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		batch int
		param string
	}{
		{"n zero", 0, 0, "n"}, {"n above 16", 17, 0, "n"}, {"n 16", 16, 0, ""},
		{"too many prompts", 1, MaxPrompts + 1, "prompt"}, {"too many choices", 16, 5, "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := choicesBackend(t, &streamtest.SlowModel{})
			g := &GenRequest{Prompt: "x"}
			err := g.SetParams(Params{N: &tc.n})
			if err == nil && tc.batch > 0 {
				batch := make([]BatchPrompt, tc.batch)
				for i := range batch {
					batch[i].Text = "p"
				}
				err = g.SetBatch(batch)
			}
			if err == nil {
				_, err = PrepareChoices(b, g)
			}
			var pe *ParamError
			switch {
			case tc.param == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.param != "" && (!errors.As(err, &pe) || pe.Param != tc.param):
				t.Fatalf("err %v, want a 400 naming %q", err, tc.param)
			}
		})
	}
}
