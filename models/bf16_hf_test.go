package models

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestNewHFArchsBF16 loads each new safetensors architecture from a BF16
// checkpoint, as they are released, beside the F32 one of the same
// weights: the derived tensors (gpt-oss's split experts and biases,
// Qwen3.5's reordered heads, 1 + w norms, −exp(A_log) and convolution,
// Gemma 4's per-layer inputs) must read two-byte elements as they read
// four. The logits may differ only by the weights' BF16 rounding (2^-9
// relative): measured worst 6.5e-3 (gptoss), 3.4e-3 (gemma4e), 7.2e-3
// (qwen35) of the last position's logit range, tolerance 3e-2; a misread
// element moves them by the order of the range.
func TestNewHFArchsBF16(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44}
	const tol = 3e-2
	share := func(a, b []float32) float64 {
		lo, hi, worst := math.Inf(1), math.Inf(-1), 0.0
		for i := range a {
			lo, hi = math.Min(lo, float64(a[i])), math.Max(hi, float64(a[i]))
			worst = math.Max(worst, math.Abs(float64(a[i]-b[i])))
		}
		return worst / (hi - lo)
	}
	for _, c := range []struct {
		name string
		spec modeltest.Spec
	}{{"gptoss-mxfp4", gptossHFSpec(true)}, {"gemma4e", gemma4ESpec}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var logits [2][]float32
			for i, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
				d := filepath.Join(dir, dt.String())
				if err := modeltest.WriteHF(d, c.spec, dt); err != nil {
					t.Fatal(err)
				}
				logits[i] = newSoloRunner(loadHFRef(t, d, 16, 0)).feed(t, prompt)
			}
			if w := share(logits[0], logits[1]); w > tol {
				t.Errorf("BF16 checkpoint's last logits %.3g of the range from the F32 one's (tolerance %g)", w, tol)
			} else {
				t.Logf("worst %.2g of the range", w)
			}
		})
	}
	t.Run("qwen35", func(t *testing.T) {
		opts := Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16}
		var logits [2][]float32
		for i, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
			m := loadQwen35HF(t, filepath.Join(t.TempDir(), dt.String()), qwen35Tiny, dt, opts)
			rows := runQwen35(t, m, prompt, len(prompt))
			logits[i] = rows[len(rows)-1]
		}
		if w := share(logits[0], logits[1]); w > tol {
			t.Errorf("BF16 checkpoint's last logits %.3g of the range from the F32 one's (tolerance %g)", w, tol)
		} else {
			t.Logf("worst %.2g of the range", w)
		}
	})
}
