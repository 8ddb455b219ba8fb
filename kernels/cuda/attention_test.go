//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"slices"
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

// refSample is sample.cu's algorithm in float64 on the host.
func refSample(l []float32, sp SampleParams) (tok int, eligible []bool) {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	if sp.Temperature <= 0 || sp.TopK == 1 {
		return best, nil
	}
	order := make([]int, len(l))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return -cmpF(l[a], l[b]) })
	keep := len(l)
	if sp.TopK > 0 && int(sp.TopK) < keep {
		keep = int(sp.TopK)
	}
	e := func(i int) float64 { return math.Exp(float64(l[i]-l[best]) / float64(sp.Temperature)) }
	if sp.TopP > 0 && sp.TopP < 1 {
		var total, run float64
		for _, i := range order[:keep] {
			total += e(i)
		}
		for j, i := range order[:keep] {
			run += e(i)
			if run >= float64(sp.TopP)*total {
				keep = j + 1
				break
			}
		}
	}
	eligible = make([]bool, len(l))
	var total float64
	for _, i := range order[:keep] {
		eligible[i] = true
		total += e(i)
	}
	target, run := float64(sp.U)*total, 0.0
	for i := range l {
		if eligible[i] {
			run += e(i)
			if target < run {
				return i, eligible
			}
		}
	}
	return best, eligible
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestSample(t *testing.T) {
	p := newPair(t)
	const rows, vocab = 64, 49152
	logits := p.randn(rows*vocab, 3)
	lt := p.scratch(logits, rows, vocab)
	params := make([]SampleParams, rows)
	for i := range params {
		params[i] = SampleParams{Temperature: []float32{0, 0.7, 1, 1.3}[i%4], TopK: []int32{0, 40, 1, 200}[i/4%4],
			TopP: []float32{1, 0.9, 0.5, 0.95}[i/16], U: p.rand.Float32()}
	}
	got := make([]int32, rows)
	must(t, p.gpu.Sample(lt.g, params, got))
	agree := 0
	for r, sp := range params {
		want, eligible := refSample(logits[r*vocab:(r+1)*vocab], sp)
		if eligible == nil && int(got[r]) != want {
			t.Errorf("row %d greedy: got %d, want %d", r, got[r], want)
		}
		if eligible != nil && !eligible[got[r]] {
			t.Errorf("row %d (%+v): token %d is outside the top-k/top-p set", r, sp, got[r])
		}
		if int(got[r]) == want {
			agree++
		}
	}
	// Bisection thresholds and F32 sums can move a draw that falls within
	// rounding of a boundary; nearly all must match the host exactly.
	if agree < rows*9/10 {
		t.Errorf("%d of %d rows sampled the host reference's token", agree, rows)
	}
}
