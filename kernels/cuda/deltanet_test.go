//go:build cuda || cudaemu

package cuda

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestQwen35MatchesCPU runs a tiny Qwen3.5 hybrid (DeltaNet layers with a
// full-attention layer every third, key heads tiled over value heads) on
// this backend and on the CPU's, step by step, and bounds every logit row's
// ‖cuda − cpu‖/‖cpu‖: two sequences prefilled together (one keeping a
// checkpoint at position 4), a decode beside a third sequence seeded from
// that checkpoint (a prefix-cache hit), and a decode from a copied state (a
// fork). It covers deltanet.cu's convolution, norms, recurrence,
// checkpoint, seed and copy, and sigmoid_mul.
func TestQwen35MatchesCPU(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) { testQwen35MatchesCPU(t, dt) })
	}
}

func testQwen35MatchesCPU(t *testing.T, dt kernels.DType) {
	spec := modeltest.Qwen35Spec{Layers: 3, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16, RopeDims: 8,
		Interval: 3, KHeads: 2, VHeads: 4, StateSize: 16, Seed: 45}
	path := filepath.Join(t.TempDir(), "q35.gguf")
	must(t, modeltest.WriteQwen35GGUF(path, spec, dt))
	src, err := models.OpenGGUF(path)
	must(t, err)
	t.Cleanup(func() { src.Close() })
	opts := models.Options{MaxBatchTokens: 32, MaxSeqs: 32, BlockSize: 4, KVBlocks: 16}
	cb := cpu.New(2)
	t.Cleanup(func() { cb.Close() })
	mc, err := models.LoadQwen35(src, cb, opts)
	must(t, err)
	g, err := New(Options{})
	must(t, err)
	t.Cleanup(func() { g.Close() })
	for _, k := range []string{"dn_conv", "dn_l2norm", "dn_recur", "dn_copy", "sigmoid_mul"} {
		if !g.drv.has(k) {
			t.Fatalf("kernel %s is not loaded: deltanet.cu needs its registration (\"deltanet\" in ptx.go's modules; "+
				"#include \"deltanet.cu\" and K(dn_conv) K(dn_l2norm) K(dn_recur) K(dn_copy) K(sigmoid_mul) in emu.cpp)", k)
		}
	}
	mg, err := models.LoadQwen35(src, g, opts)
	must(t, err)

	toks := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5}
	type seq struct {
		start, n      int
		state         int32
		blocks        []int32
		ckAt, ck      int32
		seeded        bool
		seed          int32
		tokens        []int32
		logitsAllRows bool
	}
	a := []int32{0, 1, 2} // A's blocks
	b := []int32{3, 4}    // B's
	c := []int32{3, 5}    // C shares B's first block, then its own
	d := []int32{3, 4, 6} // B's fork: shares B's blocks, writes a fresh third
	bt := toks[2:]        // B's tokens
	steps := [][]seq{{
		{start: 0, n: 10, state: 0, blocks: a, tokens: toks},
		{start: 0, n: 6, state: 1, blocks: b, ckAt: 4, ck: 2, tokens: bt},
	}, {
		{start: 10, n: 1, state: 0, blocks: a, tokens: toks},
		{start: 4, n: 4, state: 3, blocks: c, seeded: true, seed: 2, tokens: bt},
	}, {
		{start: 6, n: 2, state: 4, blocks: d, tokens: bt}, // from slot 1 copied to 4
	}}
	worst := 0.0
	for si, step := range steps {
		if si == 2 {
			must(t, mc.CopyState(4, 1))
			must(t, mg.CopyState(4, 1))
		}
		batch := &kernels.Batch{}
		for _, s := range step {
			first := len(batch.Tokens)
			for p := s.start; p < s.start+s.n; p++ {
				batch.LogitRows = append(batch.LogitRows, int32(len(batch.Tokens)))
				batch.Tokens = append(batch.Tokens, s.tokens[p])
				batch.Positions = append(batch.Positions, int32(p))
				batch.Slots = append(batch.Slots, s.blocks[p/4]*4+int32(p%4))
			}
			batch.Seqs = append(batch.Seqs, kernels.SeqRows{Start: first, End: len(batch.Tokens), ContextLen: s.start + s.n,
				Prompt: len(s.tokens), Blocks: s.blocks, State: s.state, CheckpointAt: s.ckAt, Checkpoint: s.ck, Seeded: s.seeded, Seed: s.seed})
		}
		want, err := mc.Forward(batch)
		must(t, err)
		want = append([]float32(nil), want...)
		got, err := mg.Forward(batch)
		must(t, err)
		for r := range batch.LogitRows {
			e := relErr(got[r*spec.Vocab:(r+1)*spec.Vocab], want[r*spec.Vocab:(r+1)*spec.Vocab])
			worst = math.Max(worst, e)
		}
	}
	bound := 1e-4
	if dt != kernels.F32 {
		bound = 5e-2 // the quantized GEMV's activations differ from the CPU's (TestWindowKVMatchesCPU's bound)
	}
	t.Logf("worst row ‖cuda−cpu‖/‖cpu‖ %.3g (bound %.3g)", worst, bound)
	if !(worst <= bound) {
		t.Fatalf("worst row ‖cuda−cpu‖/‖cpu‖ %.3g exceeds %.3g", worst, bound)
	}
}
