//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

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

// TestPagedDecode checks paged_decode against the CPU backend at every head
// size it is built for and GQA ratios 1 to 16, over contexts of one
// position, one partition less and more one (255, 257), exactly one (256)
// and many blocks and partitions. The prefixes are filled with one query
// head per KV head (the cache does not depend on q), through whichever
// kernel takes prefill rows of that head size.
func TestPagedDecode(t *testing.T) {
	for _, hd := range []int{64, 80, 96, 128, 256} {
		for _, group := range []int{1, 2, 4, 8, 16} {
			t.Run(fmt.Sprintf("%dd/gqa%d", hd, group), func(t *testing.T) { testPagedDecode(t, hd, group, "") })
		}
	}
	// scratch for two partials per KV head: the long contexts' items go to
	// launches of their own
	t.Run("128d/gqa4/cut", func(t *testing.T) { testPagedDecode(t, 128, 4, "cut") })
	// a GPU of one SM: the items fill it, partitions of 256 (no split-K)
	t.Run("128d/gqa4/nosplit", func(t *testing.T) { testPagedDecode(t, 128, 4, "nosplit") })
	t.Run("80d/gqa2/nosplit", func(t *testing.T) { testPagedDecode(t, 80, 2, "nosplit") })
}

// testPagedDecode: mode "cut" leaves scratch for two partials per KV head,
// "nosplit" makes the backend see one SM (decodeSplits 0); with neither,
// the few items of the test's batches split their contexts (split-K).
func testPagedDecode(t *testing.T, hd, group int, mode string) {
	p := newPair(t)
	cut := mode == "cut"
	if mode == "nosplit" {
		p.gpu.sms = 1
	}
	const kvHeads, blocks, bs = 2, 256, 16
	heads := kvHeads * group
	cfg := kernels.KVConfig{Layers: 2, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	if cut {
		kg.(*kvStore).decParts = 2
	}
	ctxs := []int{1, 255, 257, 256, 600}
	perm := p.rand.Perm(blocks)
	tables := make([][]int32, len(ctxs))
	for i := range tables {
		for _, b := range perm[i*48 : i*48+48] {
			tables[i] = append(tables[i], int32(b))
		}
	}
	kvCols := kvHeads * hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	var fill, decode []seqSpec
	for _, c := range ctxs {
		fill = append(fill, seqSpec{0, c - 1})
		decode = append(decode, seqSpec{c - 1, c})
	}
	// run records a step on both backends: its output, rows and the
	// kernels it launched
	run := func(specs []seqSpec, heads int) (twin, int, []string) {
		b := buildBatch(specs, tables, bs)
		n := len(b.Tokens)
		q := p.scratch(p.randn(n*heads*hd, 1), n, heads*hd)
		k := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		v := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		out := p.scratch(nil, n, heads*hd)
		mark := len(p.gpu.step.launches)
		for l := range cfg.Layers {
			must(t, p.gpu.Attention(out.g, q.g, k.g, v.g, kg, l, b, scale), p.cpu.Attention(out.c, q.c, k.c, v.c, kc, l, b, scale))
		}
		var fns []string
		for _, l := range p.gpu.step.launches[mark:] {
			fns = append(fns, l.fn)
		}
		return out, n, fns
	}
	run(fill, kvHeads)
	// every row a decode row: kv_write is fused into paged_decode
	out, n, fns := run(decode, heads)
	if want := fmt.Sprintf("paged_decode_%d", hd); len(fns) == 0 || fns[0] != want || slices.Contains(fns, "kv_write") || slices.Contains(fns, "paged_attention") {
		t.Errorf("a decode step recorded %v, want %s alone", fns, want)
	}
	if cut && len(fns) < 2*cfg.Layers {
		t.Errorf("with scratch for 2 partials a decode step recorded %v, want launches cut", fns)
	}
	if l := p.gpu.step.launches[len(p.gpu.step.launches)-1]; (mode == "nosplit") != (l.args[l.nargs-1] == 0) {
		t.Errorf("mode %q: paged_decode's split-K argument %d", mode, l.args[l.nargs-1])
	}
	checkRows(t, p, "decode", out, n, heads*hd, 2e-3)
	// the fused write reached the cache: the next position reads it there,
	// beside a prefill chunk of 20 rows (kv_write, then paged_decode and,
	// for head sizes up to 128, paged_prefill on tensor cores)
	var next []seqSpec
	for i, c := range ctxs {
		if i == 1 {
			next = append(next, seqSpec{c, c + 20})
		} else {
			next = append(next, seqSpec{c, c + 1})
		}
	}
	out, n, fns = run(next, heads)
	if want := fmt.Sprintf("paged_prefill_%d", hd); prefillShape(hd) && (!slices.Contains(fns, want) || slices.Contains(fns, "paged_attention")) {
		t.Errorf("a step with a prefill chunk recorded %v, want %s for the chunk", fns, want)
	}
	checkRows(t, p, "next", out, n, heads*hd, 2e-3)
	for _, s := range []*kvStore{kg.(*kvStore)} {
		cnt := make([]int32, decodeCounters)
		must(t, p.gpu.Sync(), p.gpu.do(func() error { return p.gpu.drv.download(unsafe.Pointer(&cnt[0]), s.decCounters, 4*decodeCounters) }))
		if slices.ContainsFunc(cnt, func(c int32) bool { return c != 0 }) {
			t.Errorf("paged_decode left its partition counters nonzero")
		}
	}
}

// checkRows compares each row of out on both backends (a row wrong alone
// should not hide in the whole tensor's error).
func checkRows(t *testing.T, p *pair, what string, out twin, rows, cols int, bound float64) {
	t.Helper()
	g, c := make([]float32, rows*cols), make([]float32, rows*cols)
	must(t, p.gpu.Read(out.g, g), p.cpu.Read(out.c, c))
	for r := range rows {
		if e := relErr(g[r*cols:(r+1)*cols], c[r*cols:(r+1)*cols]); !(e <= bound) {
			t.Errorf("%s row %d: ‖cuda−cpu‖/‖cpu‖ = %.3g, bound %.3g", what, r, e, bound)
		}
	}
}
