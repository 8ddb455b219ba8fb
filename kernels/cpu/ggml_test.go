package cpu

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestAgainstGGML compares with what llama.cpp's CPU backend computes
// (testdata/gen_ggml_golden.py calls its quantize_row_q8_* and
// ggml_vec_dot_* through ctypes): activation quantization must be
// byte-identical, and each dot product equal up to float summation order.
//
// Both sides add the same per-block f32 terms; only the order of the last
// horizontal additions differs, so the tolerance is a few ulps of the sum of
// the magnitudes of the 8 accumulator lanes, bounded here by
// 8·2⁻²⁴·Σ|d·sumi| ≤ 2⁻²¹·(Σ|w|·|x|) with the dequantized values.
func TestAgainstGGML(t *testing.T) {
	data, err := os.ReadFile("testdata/ggml_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		X     []float64
		Acts  map[string]string
		Cases []struct {
			Type, W string
			Dot     float64
		}
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(g.X))
	for i, v := range g.X {
		x[i] = float32(v)
	}
	actOf := map[int]string{quant.Q8_0BlockBytes: "Q8_0", quant.Q8_1BlockBytes: "Q8_1", quant.Q8_KBlockBytes: "Q8_K"}
	types := map[string]kernels.DType{}
	for _, dt := range quantTypes {
		types[dt.String()] = dt
	}
	for _, c := range g.Cases {
		t.Run(c.Type, func(t *testing.T) {
			dt := types[c.Type]
			k := quantKernels[dt]
			nb := len(x) / dt.BlockElems()
			xq := make([]byte, nb*k.actBlockBytes)
			k.quantize(xq, x)
			want, err := hex.DecodeString(g.Acts[actOf[k.actBlockBytes]])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(xq, want) {
				t.Fatalf("activation quantization differs from ggml's %s", actOf[k.actBlockBytes])
			}
			w, err := hex.DecodeString(c.W)
			if err != nil {
				t.Fatal(err)
			}
			wf := mustDequantize(t, dt, w, len(x))
			var mag float64
			for i := range x {
				mag += math.Abs(float64(wf[i]) * float64(x[i]))
			}
			tol := mag * 0x1p-21
			for name, got := range map[string]float32{"generic": k.generic(w, xq, nb), "rows": rowsOne(k, w, xq, nb)} {
				if d := math.Abs(float64(got) - c.Dot); d > tol {
					t.Errorf("%s: got %v, ggml %v (difference %g, tolerance %g)", name, got, c.Dot, d, tol)
				} else {
					t.Logf("%s: got %v, ggml %v (difference %g)", name, got, c.Dot, d)
				}
			}
		})
	}
}

func rowsOne(k *quantKernel, w, xq []byte, nb int) float32 {
	var d [1]float32
	k.rows(d[:], w, len(w), xq, nb)
	return d[0]
}
