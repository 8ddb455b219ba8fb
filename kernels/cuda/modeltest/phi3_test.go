//go:build cuda || cudaemu

package modeltest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	mt "github.com/sluicehq/sluice/models/modeltest"
)

// TestPhi3MatchesCPU runs a random Phi-3 on both backends: partial rotary
// (48 of 64 head elements: the rotated rows interleaved at load, RoPE with 24
// frequencies, which CUDA's fused rope_kv must leave the other 16 of each K
// head to store as they are) and LongRoPE's long factors and attention
// factor; and once with a 17-token sliding window on both layers, which the
// 40-token prompt and its decodes cross (CUDA's SlidingAttention over the
// one store; the window store on CUDA is kernels/cuda's
// TestWindowKVMatchesCPU).
func TestPhi3MatchesCPU(t *testing.T) {
	for _, tc := range []struct {
		dt     kernels.DType
		window int
	}{{kernels.BF16, 0}, {kernels.Q8_0, 0}, {kernels.Q8_0, 17}} {
		dt := tc.dt
		t.Run(fmt.Sprintf("%v/w%d", dt, tc.window), func(t *testing.T) {
			spec := mt.Spec{Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 512, Seed: 9, ContextLen: 512,
				Phi3: true, RopeDims: 48, LongRoPE: &mt.LongRoPE{OriginalContext: 64}, Window: tc.window}
			path := filepath.Join(t.TempDir(), "phi3.gguf")
			if err := mt.WriteGGUF(path, spec, dt); err != nil {
				t.Fatal(err)
			}
			src, err := models.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			opts := models.Options{MaxBatchTokens: 64, MaxSeqs: 1, BlockSize: 16, KVBlocks: 8}
			mc, err := models.Load(src, cpu.New(runtime.NumCPU()), opts)
			if err != nil {
				t.Fatal(err)
			}
			mg, err := models.Load(src, newCUDA(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(3 + i*37%500)
			}
			sc, sg := &sequence{}, &sequence{}
			var nc, ng int32
			toks := [][]int32{prompt}
			worst := 0.0
			for i := range 8 {
				lc, err := mc.Forward(step([]*sequence{sc}, toks, 16, &nc))
				if err != nil {
					t.Fatal(err)
				}
				lg, err := mg.Forward(step([]*sequence{sg}, toks, 16, &ng))
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, relErr(lg, lc))
				tc, margin := argmax(lc)
				if tg, _ := argmax(lg); tg != tc && float64(margin) > 6*rmsDiff(lg, lc) {
					t.Errorf("step %d: greedy token %d on CUDA, %d on CPU (CPU margin %.3f)", i, tg, tc, margin)
				}
				toks = [][]int32{{int32(tc)}}
			}
			t.Logf("%v: worst ‖cuda−cpu‖/‖cpu‖ of the logits %.2e", dt, worst)
			// TestForwardMatchesCPU's bound for the same 16-bit roundings.
			if worst > 5e-2 {
				t.Errorf("logits differ by %.3g relative, bound 5e-2", worst)
			}
		})
	}
}
