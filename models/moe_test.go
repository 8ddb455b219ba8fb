package models

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestMoEBatchMatchesSolo runs six sequences through each mixture-of-experts
// architecture in shared batches, a mixed prefill of all their prompts and
// then decode steps of one row each, so every routing call groups rows of
// different sequences per expert and scatters them back, and checks each
// row's logits against the same sequence run alone (invariant 6: batching
// does not change answers).
func TestMoEBatchMatchesSolo(t *testing.T) {
	base := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 51, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64}
	qwen3moe, qwen2moe, olmoe := base, base, base
	qwen3moe.QKNorm = true
	qwen2moe.QKVBias, qwen2moe.SharedExpertFFN = true, 96
	olmoe.OLMoE, olmoe.ExpertFFN = true, 0
	// Gemma 4 26B-A4B: GeGLU experts with output scales beside the dense FFN.
	gemma4moe := base
	gemma4moe.Gemma4, gemma4moe.Window, gemma4moe.WindowPattern, gemma4moe.HeadDimFull, gemma4moe.KEqV = true, 5, 2, 32, true
	gemma4moe.FusedGateUpExps = true
	cases := []struct {
		name  string
		spec  modeltest.Spec
		dtype kernels.DType
	}{
		{"mixtral-f32", base, kernels.F32},
		{"qwen3moe-q8_0", qwen3moe, kernels.Q8_0},
		{"qwen2moe-f32", qwen2moe, kernels.F32},
		{"qwen2moe-q8_0", qwen2moe, kernels.Q8_0},
		{"olmoe-q4_0", olmoe, kernels.Q4_0},
		{"gemma4moe-f32", gemma4moe, kernels.F32},
		{"gemma4moe-q8_0", gemma4moe, kernels.Q8_0},
	}
	const streams, maxLen, decode = 6, 16, 4
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := modeltest.WriteGGUF(path, tc.spec, tc.dtype); err != nil {
				t.Fatal(err)
			}
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			be := cpu.New(2)
			defer be.Close()
			const bs = 4
			per := maxLen / bs
			m, err := Load(src, be, Options{MaxBatchTokens: 64, MaxSeqs: streams, BlockSize: bs, KVBlocks: 2 * streams * per})
			if err != nil {
				t.Fatal(err)
			}
			vocab := tc.spec.Vocab
			batch := newMultiRunner(m, streams, 0, maxLen)
			solo := make([]*multiRunner, streams)
			prompts := make([][]int32, streams)
			for s := range streams {
				solo[s] = newMultiRunner(m, 1, (streams+s)*per, maxLen)
				for i := range 3 + s { // prompts of 3–8 tokens
					prompts[s] = append(prompts[s], int32(3+(s*53+i*29)%(vocab-3)))
				}
			}
			rows, worst := prompts, 0.0
			for step := range decode + 1 {
				got := batch.step(t, rows)
				next := make([][]int32, streams)
				for s := range streams {
					want := solo[s].step(t, rows[s:s+1])
					row := got[s*vocab : (s+1)*vocab]
					wantF64 := make([]float64, vocab)
					for i, v := range want {
						wantF64[i] = float64(v)
					}
					// Each row's arithmetic is its own (activations are quantized
					// row by row); only the kernels' summation order may differ.
					e := relErr(row, wantF64)
					worst = max(worst, e)
					if e > 1e-5 {
						t.Fatalf("step %d, sequence %d: batched logits off by %.3g (relative) from the solo run", step, s, e)
					}
					next[s] = []int32{argmax(want)}
				}
				rows = next
			}
			t.Logf("%d sequences, a prefill of 33 rows and %d decode steps: worst relative difference from solo %.2g", streams, decode, worst)
		})
	}
}
