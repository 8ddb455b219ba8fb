package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// Prompt logprobs of P+Q equal the logprobs the engine reports for each
// token of Q forced (logit_bias, which logprobs do not see) as the
// continuation of P and of Q's tokens before it: the same distributions,
// read once across a chunked prefill and once per forced token. Q is P's
// greedy continuation. Each forced token's logits come from a prompt row,
// as the prompt logprobs' do: the CPU backend's AMX kernels compute prompt
// rows in another order than decode rows (kernels.PromptRows), which moves
// SmolLM2's logprobs by up to 0.1 between the two, so a decoded Q's own
// logprobs are no exact reference, nor is the KV the decode wrote. The second submission finds P+Q's
// blocks in the prefix cache, which it must not use.
func TestPromptLogprobsMatchDecode(t *testing.T) {
	// Chunks of 7 rows: the prompt spans several steps, and a step's
	// prompt rows outnumber the 4 logit rows a step has. The models run
	// unhooked, so RowLogits shows.
	for _, tc := range []struct {
		name      string
		load      func(*testing.T) Model
		vocab, bs int
	}{
		{"tiny", func(t *testing.T) Model { return loadModel(t, tinyModelPath(t), 2, 64, 8, 7, 4).Model }, tinySpec.Vocab, 8},
		{"SmolLM2", func(t *testing.T) Model { return loadModel(t, smolPath(t), 2, 64, 8, 7, 4).Model }, 49152, 8},
		{"hybrid", func(t *testing.T) Model { return loadHybrid(t, 64, 7, 4).r.(Model) }, hybridSpec.Vocab, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngineOn(t, tc.load(t), Config{Blocks: 64, BlockSize: tc.bs, MaxBatchTokens: 7, MaxSeqs: 4})
			p := prompt(19, 3, tc.vocab)
			gen := submit(t, e, Request{Prompt: p, MaxTokens: 12, Logprobs: true, TopLogprobs: 5, IgnoreEOS: true})
			var q []int32
			var want []*Logprob
			for tok := range gen.Tokens() {
				q, want = append(q, tok.ID), append(want, tok.Logprob)
			}
			if r := gen.Result(); r.Finish != FinishLength || len(q) != 12 {
				t.Fatalf("generation: %d tokens, %+v", len(q), r)
			}
			for j := range q { // Q[j] forced after P+Q[:j]
				ctx := append(append([]int32(nil), p...), q[:j]...)
				s := submit(t, e, Request{Prompt: ctx, MaxTokens: 1, Logprobs: true, TopLogprobs: 5, LogitBias: map[int32]float32{q[j]: MaxLogitBias},
					CacheSalt: fmt.Sprint("forced ", j)}) // no KV the decode wrote: all of it from prompt rows
				tok := <-s.Tokens()
				if collect(t, s, 1); tok.ID != q[j] {
					t.Fatalf("forcing token %d of Q: got %d, want %d", j, tok.ID, q[j])
				}
				want[j] = tok.Logprob
			}
			full := append(append([]int32(nil), p...), q...)
			for run := range 2 { // the second finds the first's blocks cached
				pl := &PromptLogprobs{TopK: 5}
				s := submit(t, e, Request{Prompt: full, MaxTokens: 1, PromptLogprobs: pl})
				_, res := collect(t, s, 0)
				if res.Finish == FinishError || res.CachedTokens != 0 {
					t.Fatalf("run %d: %+v (a prompt-logprobs request must not read the cache)", run, res)
				}
				if len(pl.Logprobs) != len(full) || pl.Logprobs[0] != nil {
					t.Fatalf("run %d: %d entries, first %v; want %d, first nil", run, len(pl.Logprobs), pl.Logprobs[0], len(full))
				}
				for i := 1; i < len(full); i++ {
					lp := pl.Logprobs[i]
					if lp == nil || len(lp.Top) != 5 || lp.Rank < 1 || lp.Rank > tc.vocab {
						t.Fatalf("run %d: position %d: %+v", run, i, lp)
					}
					if lp.Rank == 1 != (lp.Top[0].ID == full[i] || lp.Top[0].Logprob == lp.Logprob) {
						t.Errorf("run %d: position %d: rank %d, token %d, best %d", run, i, lp.Rank, full[i], lp.Top[0].ID)
					}
				}
				for j, w := range want {
					got := pl.Logprobs[len(p)+j]
					if d := math.Abs(float64(got.Logprob - w.Logprob)); d > 1e-4 {
						t.Errorf("run %d: token %d of Q: prompt logprob %g, forced %g", run, j, got.Logprob, w.Logprob)
					}
					for k := range w.Top {
						if got.Top[k].ID != w.Top[k].ID && math.Abs(float64(got.Top[k].Logprob-w.Top[k].Logprob)) > 1e-4 {
							t.Errorf("run %d: token %d of Q: alternative %d is %+v, forced %+v", run, j, k, got.Top[k], w.Top[k])
						}
					}
				}
			}
		})
	}
}

// A model that cannot give a batch's other rows refuses the request at
// Submit, before it queues.
func TestPromptLogprobsRefusedWithoutRowLogits(t *testing.T) {
	m := newHashModel(64, 1024, 64, 8)
	e := newTestEngine(t, m, Config{})
	_, err := e.Submit(bg, Request{Prompt: prompt(9, 1, 64), MaxTokens: 2, PromptLogprobs: &PromptLogprobs{}})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("err %v, want ErrInvalidRequest", err)
	}
	_, err = e.Submit(bg, Request{Prompt: prompt(9, 1, 64), MaxTokens: 2, PromptLogprobs: &PromptLogprobs{TopK: MaxTopLogprobs + 1}})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("top %d: err %v, want ErrInvalidRequest", MaxTopLogprobs+1, err)
	}
}

// Prompt logprobs survive preemption: sequences preempted mid-generation
// (and recomputed, reading their own cached blocks back) report the same
// prompt logprobs as each prompt alone.
func TestPromptLogprobsUnderPreemption(t *testing.T) {
	path := tinyModelPath(t)
	const count, plen, n = 6, 30, 24
	solo := newEngineOn(t, loadModel(t, path, 1, 256, 8, 64, 8).Model, Config{Blocks: 256, BlockSize: 8, MaxBatchTokens: 64, MaxSeqs: 8})
	want := make([]*PromptLogprobs, count)
	for i := range want {
		want[i] = &PromptLogprobs{TopK: 3}
		collect(t, submit(t, solo, Request{Prompt: prompt(plen, int32(i), tinySpec.Vocab), MaxTokens: 1, PromptLogprobs: want[i]}), 0)
	}
	// 20 blocks of 8 hold 160 slots; 6 sequences of 30 + 24 need 324.
	e := newEngineOn(t, loadModel(t, path, 1, 20, 8, 32, 8).Model, Config{Blocks: 20, BlockSize: 8, MaxBatchTokens: 32, MaxSeqs: 8})
	got := make([]*PromptLogprobs, count)
	seqs := make([]*Sequence, count)
	for i := range seqs {
		got[i] = &PromptLogprobs{TopK: 3}
		seqs[i] = submit(t, e, Request{Prompt: prompt(plen, int32(i), tinySpec.Vocab), MaxTokens: n, IgnoreEOS: true, PromptLogprobs: got[i]})
	}
	for i, s := range seqs {
		if _, r := collect(t, s, 0); r.Finish != FinishLength {
			t.Fatalf("sequence %d: %+v", i, r)
		}
	}
	if p := e.Stats().Preemptions; p == 0 {
		t.Fatal("no preemption: the pool is too large for the test")
	}
	for i := range got {
		for j := 1; j < plen; j++ {
			g, w := got[i].Logprobs[j], want[i].Logprobs[j]
			if g == nil || math.Abs(float64(g.Logprob-w.Logprob)) > 1e-4 || g.Rank != w.Rank || g.Top[0].ID != w.Top[0].ID {
				t.Fatalf("sequence %d position %d: %+v, alone %+v", i, j, g, w)
			}
		}
	}
}
