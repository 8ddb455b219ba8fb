package models

import (
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// soloRunner drives one sequence through a model without the engine: its KV
// lives in blocks 0, 1, 2, ... and the prompt is prefilled in chunks of the
// model's batch limit. It is how the model tests check the forward pass on its
// own, so that an engine bug cannot hide (or fake) a model bug. The first
// feed is the prompt (SeqRows.Prompt), as the engine's first step is.
type soloRunner struct {
	m      *Llama
	tokens []int32
	blocks []int32
	prompt int
}

func newSoloRunner(m *Llama) *soloRunner { return &soloRunner{m: m} }

// feed runs toks through the model and returns the logits after the last one.
func (r *soloRunner) feed(t testing.TB, toks []int32) []float32 {
	t.Helper()
	bs := r.m.opts.BlockSize
	if len(r.tokens) == 0 {
		r.prompt = len(toks)
	}
	var logits []float32
	for len(toks) > 0 {
		n := min(len(toks), r.m.opts.MaxBatchTokens)
		b := &kernels.Batch{}
		for i, tok := range toks[:n] {
			pos := len(r.tokens) + i
			for len(r.blocks) <= pos/bs {
				r.blocks = append(r.blocks, int32(len(r.blocks)))
			}
			b.Tokens = append(b.Tokens, tok)
			b.Positions = append(b.Positions, int32(pos))
			b.Slots = append(b.Slots, int32(pos))
		}
		r.tokens = append(r.tokens, toks[:n]...)
		b.Seqs = []kernels.SeqRows{{Start: 0, End: n, ContextLen: len(r.tokens), Blocks: r.blocks, Prompt: r.prompt}}
		b.LogitRows = []int32{int32(n - 1)}
		out, err := r.m.Forward(b)
		if err != nil {
			t.Fatalf("forward at position %d: %v", len(r.tokens)-n, err)
		}
		logits = append(logits[:0], out...)
		toks = toks[n:]
	}
	return logits
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// top2Margin is the gap between the two largest logits: below a tolerance,
// greedy decoding may fairly pick either.
func top2Margin(v []float32) float32 {
	a, b := float32(-1e30), float32(-1e30)
	for _, x := range v {
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}
