//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// The ops of modelops.go against the CPU backend, as ops_test.go does for
// the Llama ones.

func TestHeadRMSNormGeGLUScale(t *testing.T) {
	p := newPair(t)
	for _, sh := range []struct{ heads, hd int }{{4, 256}, {9, 64}, {2, 40}} {
		const rows, n = 7, 5
		cols := sh.heads * sh.hd
		x := p.scratch(p.randn(rows*cols, 3), rows, cols)
		w := p.upload(kernels.F32, p.randn(sh.hd, 1), sh.hd)
		must(t, p.gpu.HeadRMSNorm(x.g, w.g, n, sh.heads, 1e-6), p.cpu.HeadRMSNorm(x.c, w.c, n, sh.heads, 1e-6))
		p.check(fmt.Sprintf("HeadRMSNorm %dx%d", sh.heads, sh.hd), x, rows*cols, 1e-6)
	}
	const n, cols = 5, 1536
	// ±12 reaches both of GeGLU's cut-offs (±10) as well as its F16 table.
	g := p.scratch(p.randn(n*cols, 4), n, cols)
	u := p.scratch(p.randn(n*cols, 1), n, cols)
	d := p.scratch(nil, n, cols)
	must(t, p.gpu.GeGLU(d.g, g.g, u.g, 4), p.cpu.GeGLU(d.c, g.c, u.c, 4))
	p.check("GeGLU", d, n*cols, 1e-6)
	must(t, p.gpu.GeGLU(g.g, g.g, u.g, 5), p.cpu.GeGLU(g.c, g.c, u.c, 5))
	p.check("GeGLU in place", g, n*cols, 1e-6)
	must(t, p.gpu.Scale(u.g, 3, float32(math.Sqrt(640))), p.cpu.Scale(u.c, 3, float32(math.Sqrt(640))))
	p.check("Scale", u, n*cols, 0)
	// ±60 saturates a cap of 30 (Gemma 2's final soft-cap) and spans tanh's
	// linear part; the last two rows stay as they are.
	l := p.scratch(p.randn(n*cols, 20), n, cols)
	must(t, p.gpu.SoftCap(l.g, 3, 30), p.cpu.SoftCap(l.c, 3, 30))
	p.check("SoftCap", l, n*cols, 1e-6)
	if err := p.gpu.SoftCap(l.g, 3, 0); err == nil {
		t.Error("SoftCap accepted a cap of 0")
	}
}

// TestSlidingAttention runs windowed attention over three steps (prompts in
// chunks that cross the window, decodes) on shuffled block tables whose
// blocks below every row's window are −1, as the window group leaves them.
func TestSlidingAttention(t *testing.T) {
	for _, sh := range []struct {
		heads, kvHeads, hd int
		windows            []int
	}{{4, 1, 256, []int{7, 45}}, {9, 3, 64, []int{1, 7, 16, 45}}} { // Gemma 3 270M's heads, and GQA
		for _, window := range sh.windows {
			t.Run(fmt.Sprintf("%dq%dkv%dd/w%d", sh.heads, sh.kvHeads, sh.hd, window), func(t *testing.T) {
				testSlidingAttention(t, sh.heads, sh.kvHeads, sh.hd, window, 0)
			})
		}
	}
}

// TestCappedAttention is TestSlidingAttention through CappedAttention
// (capped_attention, Gemma 2's scores capped before the softmax), with and
// without a window; a cap of 1.5 bends most of these scores (about N(0, 1)).
func TestCappedAttention(t *testing.T) {
	for _, sh := range []struct {
		heads, kvHeads, hd int
		windows            []int
	}{{8, 4, 256, []int{0, 45}}, {9, 3, 64, []int{0, 1, 7, 45}}} { // Gemma 2 2B's heads, and GQA
		for _, window := range sh.windows {
			t.Run(fmt.Sprintf("%dq%dkv%dd/w%d", sh.heads, sh.kvHeads, sh.hd, window), func(t *testing.T) {
				testSlidingAttention(t, sh.heads, sh.kvHeads, sh.hd, window, 1.5)
			})
		}
	}
}

func testSlidingAttention(t *testing.T, heads, kvHeads, hd, window int, softcap float32) {
	p := newPair(t)
	const layers, blocks, bs = 2, 96, 4
	cfg := kernels.KVConfig{Layers: layers, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	perm := p.rand.Perm(blocks)
	tables := make([][]int32, 3)
	for i := range tables {
		for _, b := range perm[i*32 : i*32+32] {
			tables[i] = append(tables[i], int32(b))
		}
	}
	qCols, kvCols := heads*hd, kvHeads*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	steps := [][]seqSpec{
		{{0, 30}, {0, 60}, {0, 3}},
		{{30, 31}, {60, 100}, {3, 50}},
		{{31, 32}, {100, 101}, {50, 51}},
	}
	for si, st := range steps {
		released := make([][]int32, len(tables))
		for i, s := range st {
			released[i] = append([]int32(nil), tables[i]...)
			for j := range max(s.from-window+1, 0) / bs {
				if window > 0 {
					released[i][j] = -1
				}
			}
		}
		b := buildBatch(st, released, bs)
		n := len(b.Tokens)
		out := p.scratch(nil, n, qCols)
		q := p.scratch(p.randn(n*qCols, 1), n, qCols)
		k := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		v := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		for l := range layers {
			if softcap > 0 {
				must(t, p.gpu.CappedAttention(out.g, q.g, k.g, v.g, kg, l, b, scale, window, softcap),
					p.cpu.CappedAttention(out.c, q.c, k.c, v.c, kc, l, b, scale, window, softcap))
			} else {
				must(t, p.gpu.SlidingAttention(out.g, q.g, k.g, v.g, kg, l, b, scale, window),
					p.cpu.SlidingAttention(out.c, q.c, k.c, v.c, kc, l, b, scale, window))
			}
			p.check(fmt.Sprintf("step %d layer %d", si, l), out, n*qCols, 2e-3)
		}
	}
	// A released block inside a row's window is an error, not a read.
	b := buildBatch([]seqSpec{{40, 41}}, [][]int32{append([]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, tables[0][10:]...)}, bs)
	out := p.scratch(nil, 1, qCols)
	q, k, v := p.scratch(nil, 1, qCols), p.scratch(nil, 1, kvCols), p.scratch(nil, 1, kvCols)
	if window > 1 {
		attn := p.gpu.SlidingAttention(out.g, q.g, k.g, v.g, kg, 0, b, scale, window)
		if softcap > 0 {
			attn = p.gpu.CappedAttention(out.g, q.g, k.g, v.g, kg, 0, b, scale, window, softcap)
		}
		if err := attn; err == nil {
			t.Errorf("a window of %d over a released block at position 39 was accepted", window)
		}
	}
}

func TestMoEFFN(t *testing.T) {
	p := newPair(t)
	const experts, hidden, ffn = 8, 64, 96
	for _, dt := range []kernels.DType{kernels.F16, kernels.Q8_0} {
		gate := p.upload(dt, p.randn(experts*ffn*hidden, 0.1), experts, ffn, hidden)
		up := p.upload(dt, p.randn(experts*ffn*hidden, 0.1), experts, ffn, hidden)
		down := p.upload(dt, p.randn(experts*hidden*ffn, 0.1), experts, hidden, ffn)
		for _, n := range []int{1, 3, 20} {
			for _, tc := range []struct {
				k    int
				norm bool
			}{{2, true}, {2, false}, {1, false}, {8, true}} {
				x := p.scratch(p.randn(n*hidden, 1), n, hidden)
				logits := p.scratch(p.randn(n*experts, 2), n, experts)
				dst := p.scratch(p.randn(n*hidden, 1), n, hidden) // overwritten, not added to
				must(t, p.gpu.MoEFFN(dst.g, x.g, logits.g, gate.g, up.g, down.g, n, tc.k, tc.norm),
					p.cpu.MoEFFN(dst.c, x.c, logits.c, gate.c, up.c, down.c, n, tc.k, tc.norm))
				p.check(fmt.Sprintf("MoEFFN %v n=%d k=%d norm=%v", dt, n, tc.k, tc.norm), dst, n*hidden, matmulBound(dt, n))
			}
		}
	}
	x := p.scratch(nil, 1, hidden)
	logits := p.scratch(nil, 1, experts)
	gate := p.upload(kernels.F32, make([]float32, experts*ffn*hidden), experts, ffn, hidden)
	down := p.upload(kernels.F32, make([]float32, experts*ffn*hidden), experts, hidden, ffn)
	if err := p.gpu.MoEFFN(x.g, x.g, logits.g, gate.g, gate.g, down.g, 1, experts+1, false); err == nil {
		t.Error("top 9 of 8 experts was accepted")
	}
}

// TestGatedAdd checks Qwen2-MoE's shared-expert add: gate logits of ±8 run
// the sigmoid from nearly 0 to nearly 1, and rows past n stay as they are.
func TestGatedAdd(t *testing.T) {
	p := newPair(t)
	for _, cols := range []int{64, 2048, 100} {
		const rows, n = 9, 7
		dst := p.scratch(p.randn(rows*cols, 1), rows, cols)
		x := p.scratch(p.randn(rows*cols, 3), rows, cols)
		gate := p.scratch(p.randn(rows, 8), rows, 1)
		must(t, p.gpu.GatedAdd(dst.g, x.g, gate.g, n), p.cpu.GatedAdd(dst.c, x.c, gate.c, n))
		p.check(fmt.Sprintf("GatedAdd %d cols", cols), dst, rows*cols, 1e-6)
	}
	dst := p.scratch(nil, 2, 64)
	if err := p.gpu.GatedAdd(dst.g, dst.g, dst.g, 2); err == nil {
		t.Error("GatedAdd took a 64-column gate")
	}
	gate := p.scratch(nil, 2, 1)
	if err := p.gpu.GatedAdd(dst.g, dst.g, gate.g, 3); err == nil {
		t.Error("GatedAdd took 3 rows of 2")
	}
}

// TestNewArchitecturesMatchCPU runs random-weight Gemma 3 (window layers of
// 5 positions around a global one), Gemma 2, Qwen3 and the mixtures (Qwen3-
// MoE, Mixtral, Qwen2-MoE with its shared expert, OLMoE) (models/modeltest)
// on both backends: a 30-token prompt then teacher-forced decode
// steps, logits within the bound TestForwardMatchesCPU allows and greedy
// choices equal wherever the CPU's lead exceeds the backends' difference.
func TestNewArchitecturesMatchCPU(t *testing.T) {
	base := modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 300, RMSEps: 1e-6}
	gemma, gemma2, qwen3, moe := base, base, base, base
	gemma.Seed, gemma.Gemma, gemma.Window, gemma.WindowPattern, gemma.RopeTheta = 26, true, 5, 3, 1e6
	gemma2.Seed, gemma2.Gemma, gemma2.Gemma2, gemma2.Window, gemma2.KVHeads, gemma2.AttnSoftcap = 33, true, true, 5, 2, 2
	qwen3.Seed, qwen3.QKNorm, qwen3.KVHeads = 22, true, 2
	moe.Seed, moe.QKNorm, moe.KVHeads, moe.Experts, moe.ExpertsUsed, moe.ExpertFFN = 24, true, 2, 8, 2, 64
	mixtral, qwen2moe, olmoe := base, base, base
	mixtral.Seed, mixtral.KVHeads, mixtral.Experts, mixtral.ExpertsUsed = 25, 2, 4, 2
	// Qwen2-MoE's shared expert (GatedAdd) is wider than its routed ones;
	// OLMoE's QK-norm spans the whole projections, its KV heads = heads as
	// llama.cpp reads them.
	qwen2moe.Seed, qwen2moe.QKVBias, qwen2moe.KVHeads, qwen2moe.Experts, qwen2moe.ExpertsUsed, qwen2moe.ExpertFFN, qwen2moe.SharedExpertFFN = 29, true, 2, 8, 2, 64, 96
	olmoe.Seed, olmoe.OLMoE, olmoe.KVHeads, olmoe.FFN, olmoe.Experts, olmoe.ExpertsUsed = 31, true, 4, 64, 8, 4
	for _, tc := range []struct {
		name string
		spec modeltest.Spec
	}{{"gemma3", gemma}, {"gemma2", gemma2}, {"qwen3", qwen3}, {"qwen3moe", moe}, {"mixtral", mixtral}, {"qwen2moe", qwen2moe}, {"olmoe", olmoe}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name+".gguf")
			must(t, modeltest.WriteGGUF(path, tc.spec, kernels.Q8_0))
			src, err := models.Open(path)
			must(t, err)
			t.Cleanup(func() { src.Close() })
			opts := models.Options{MaxBatchTokens: 32, MaxSeqs: 1, BlockSize: 4, KVBlocks: 16}
			cb := cpu.New(2)
			t.Cleanup(func() { cb.Close() })
			mc, err := models.Load(src, cb, opts)
			must(t, err)
			g, err := New(Options{})
			must(t, err)
			t.Cleanup(func() { g.Close() })
			mg, err := models.Load(src, g, opts)
			must(t, err)
			r := rand.New(rand.NewPCG(3, 4))
			toks := make([]int32, 30)
			for i := range toks {
				toks[i] = int32(r.IntN(tc.spec.Vocab))
			}
			var table []int32
			worst := 0.0
			for pos, step := 0, 0; step < 8; step++ {
				b := &kernels.Batch{}
				for i, tok := range toks {
					p := pos + i
					for p/4 >= len(table) {
						table = append(table, int32(len(table)))
					}
					b.Tokens = append(b.Tokens, tok)
					b.Positions = append(b.Positions, int32(p))
					b.Slots = append(b.Slots, table[p/4]*4+int32(p%4))
				}
				pos += len(toks)
				b.Seqs = []kernels.SeqRows{{Start: 0, End: len(toks), ContextLen: pos, Blocks: table}}
				b.LogitRows = []int32{int32(len(toks) - 1)}
				lc, err := mc.Forward(b)
				must(t, err)
				lc = append([]float32(nil), lc...)
				lg, err := mg.Forward(b)
				must(t, err)
				e := relErr(lg, lc)
				worst = max(worst, e)
				best, second := 0, -1
				for i, v := range lc {
					if v > lc[best] {
						best, second = i, best
					} else if i != best && (second < 0 || v > lc[second]) {
						second = i
					}
				}
				gbest := 0
				for i, v := range lg {
					if v > lg[gbest] {
						gbest = i
					}
				}
				if gbest != best && lc[best]-lc[second] > 0.05 {
					t.Errorf("step %d: greedy %d on CUDA, %d on CPU (CPU margin %.3f)", step, gbest, best, lc[best]-lc[second])
				}
				toks = []int32{int32(best)}
			}
			t.Logf("%s: worst ‖cuda−cpu‖/‖cpu‖ of the logits over 8 steps %.2e", tc.name, worst)
			if worst > 5e-2 {
				t.Errorf("logits differ by %.3g relative, bound 5e-2", worst)
			}
		})
	}
}

// TestWindowKVMatchesCPU runs random models with their window layers in
// their own store (models.Options.WindowKV, as the loader sets it) on CUDA,
// fed by a kvcache pool whose 6-block window group recycles its blocks as
// the sequence passes them (8-token chunks, then decode), against the CPU
// with every layer keeping everything: Gemma 3 (one global layer of 3),
// Gemma 2 (alternating, scores capped) and a windowed Phi-3 (every layer a
// window layer: no global store at all).
func TestWindowKVMatchesCPU(t *testing.T) {
	base := modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 300, RMSEps: 1e-6, Window: 5}
	gemma3, gemma2, phi3 := base, base, base
	gemma3.Seed, gemma3.Gemma, gemma3.WindowPattern, gemma3.RopeTheta = 26, true, 3, 1e6
	gemma2.Seed, gemma2.Gemma, gemma2.Gemma2, gemma2.KVHeads, gemma2.AttnSoftcap = 33, true, true, 2, 2
	phi3.Seed, phi3.Phi3, phi3.KVHeads, phi3.RopeDims = 9, true, 2, 12
	for _, tc := range []struct {
		name string
		spec modeltest.Spec
	}{{"gemma3", gemma3}, {"gemma2", gemma2}, {"phi3", phi3}} {
		t.Run(tc.name, func(t *testing.T) { testWindowKVMatchesCPU(t, tc.spec) })
	}
}

func testWindowKVMatchesCPU(t *testing.T, spec modeltest.Spec) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	must(t, modeltest.WriteGGUF(path, spec, kernels.Q8_0))
	src, err := models.Open(path)
	must(t, err)
	t.Cleanup(func() { src.Close() })
	const bs, chunk, winBlocks = 4, 8, 6
	cb := cpu.New(2)
	t.Cleanup(func() { cb.Close() })
	mc, err := models.Load(src, cb, models.Options{MaxBatchTokens: chunk, MaxSeqs: 1, BlockSize: bs, KVBlocks: 16})
	must(t, err)
	g, err := New(Options{})
	must(t, err)
	t.Cleanup(func() { g.Close() })
	mg, err := models.Load(src, g, models.Options{MaxBatchTokens: chunk, MaxSeqs: 1, BlockSize: bs, KVBlocks: 16, WindowKV: true, WindowKVBlocks: winBlocks})
	must(t, err)
	window, blocks := mg.KVWindow()
	if window != 5 || blocks != winBlocks {
		t.Fatalf("KVWindow %d, %d: the window layers do not have a store of their own", window, blocks)
	}
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 16, BlockSize: bs, Window: kvcache.WindowConfig{Window: window, Blocks: winBlocks}})
	must(t, err)
	r := rand.New(rand.NewPCG(5, 6))
	var tokens []int32
	for range 30 {
		tokens = append(tokens, int32(r.IntN(spec.Vocab)))
	}
	var table kvcache.Table
	worst := 0.0
	for computed := 0; computed < len(tokens); {
		n := min(chunk, len(tokens)-computed)
		if !pool.Allocate(&table, nil, computed+n, 0) {
			t.Fatalf("position %d: the pool is out of blocks", computed)
		}
		gt, wt := table.Blocks(), table.WindowBlocks()
		b := &kernels.Batch{}
		for p := computed; p < computed+n; p++ {
			b.Tokens = append(b.Tokens, tokens[p])
			b.Positions = append(b.Positions, int32(p))
			b.Slots = append(b.Slots, gt[p/bs]*bs+int32(p%bs))
			b.WindowSlots = append(b.WindowSlots, wt[p/bs]*bs+int32(p%bs))
		}
		b.Seqs = []kernels.SeqRows{{Start: 0, End: n, ContextLen: computed + n, Blocks: gt, WindowBlocks: wt}}
		b.LogitRows = []int32{int32(n - 1)}
		lc, err := mc.Forward(b)
		must(t, err)
		lc = append([]float32(nil), lc...)
		lg, err := mg.Forward(b)
		must(t, err)
		computed += n
		pool.Commit(&table, tokens, computed)
		worst = max(worst, relErr(lg, lc))
		if computed == len(tokens) && len(tokens) < 46 {
			best := 0
			for i, v := range lc {
				if v > lc[best] {
					best = i
				}
			}
			tokens = append(tokens, int32(best)) // teacher-forced decode
		}
	}
	// More blocks than the window group holds went through it: it reused them.
	if pool.BlocksFor(len(tokens)) <= winBlocks {
		t.Fatalf("%d positions fit the %d window blocks: nothing was recycled", len(tokens), winBlocks)
	}
	t.Logf("%d positions, window store of %d blocks: worst ‖cuda−cpu‖/‖cpu‖ %.2e", len(tokens), winBlocks, worst)
	if worst > 5e-2 {
		t.Errorf("logits differ by %.3g relative, bound 5e-2", worst)
	}
}
