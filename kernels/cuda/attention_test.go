//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// seqSpec is one sequence of a test step: rows [from, to) of its positions.
type seqSpec struct{ from, to int }

// buildBatch lays the sequences' rows out one after another; sequence i owns
// the blocks tables[i] (a shuffled share of the pool, as kvcache hands out).
func buildBatch(specs []seqSpec, tables [][]int32, bs int) *kernels.Batch {
	b := &kernels.Batch{}
	for i, s := range specs {
		start := len(b.Tokens)
		for p := s.from; p < s.to; p++ {
			b.Tokens = append(b.Tokens, 0)
			b.Positions = append(b.Positions, int32(p))
			b.Slots = append(b.Slots, tables[i][p/bs]*int32(bs)+int32(p%bs))
		}
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: start, End: len(b.Tokens), ContextLen: s.to, Blocks: tables[i]})
	}
	return b
}

func TestAttention(t *testing.T) {
	for _, sh := range []struct{ heads, kvHeads, hd int }{{9, 3, 64}, {32, 8, 128}, {4, 4, 64}} {
		t.Run(fmt.Sprintf("%dq%dkv%dd", sh.heads, sh.kvHeads, sh.hd), func(t *testing.T) { testAttention(t, sh.heads, sh.kvHeads, sh.hd) })
	}
}

func testAttention(t *testing.T, heads, kvHeads, hd int) {
	p := newPair(t)
	const layers, blocks, bs, rows = 2, 256, 16, 1024
	cfg := kernels.KVConfig{Layers: layers, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	perm := p.rand.Perm(blocks)
	tables := make([][]int32, 3)
	for i := range tables {
		for _, b := range perm[i*80 : i*80+80] {
			tables[i] = append(tables[i], int32(b))
		}
	}
	qCols, kvCols := heads*hd, kvHeads*hd
	out := p.scratch(nil, rows, qCols)
	scale := float32(1 / math.Sqrt(float64(hd)))
	// step 1 fills prefixes; step 2 mixes a prefill from 0, a decode row
	// and a chunk continuing a prefix; step 3 grows one context to 1000 (300 emulated);
	// step 4 decodes three rows, few enough that the contexts are split
	// across blocks (merged by the last split to finish).
	long := 1000
	if emulated {
		long = 300
	}
	steps := [][]seqSpec{
		{{0, 0}, {0, 60}, {0, 50}},
		{{0, 37}, {60, 61}, {50, 70}},
		{{37, 37}, {61, 61}, {70, long}},
		{{37, 38}, {61, 62}, {long, long + 1}},
	}
	for si, st := range steps {
		b := buildBatch(st, tables, bs)
		n := len(b.Tokens)
		q := p.scratch(p.randn(n*qCols, 1), n, qCols)
		k := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		v := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		for l := range layers {
			must(t, p.gpu.Attention(out.g, q.g, k.g, v.g, kg, l, b, scale), p.cpu.Attention(out.c, q.c, k.c, v.c, kc, l, b, scale))
		}
		// F16 cache against the CPU's F32 one
		p.check(fmt.Sprintf("step %d", si), out, n*qCols, 2e-3)
	}
}
