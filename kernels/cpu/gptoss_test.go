package cpu

import (
	"math"
	"testing"
)

// TestOAISwiGLU: gpt-oss's clamped SwiGLU, as ggml's swiglu_oai: the gate
// capped above at the limit only, the up clamped both ways, then
// x·σ(alpha·x)·(y + 1).
func TestOAISwiGLU(t *testing.T) {
	g := []float32{10, -10, 0.5, 7, -3}
	u := []float32{9, -9, 0.25, -8, 100}
	want := make([]float64, len(g))
	for i := range g {
		x := math.Min(float64(g[i]), 7)
		y := math.Max(math.Min(float64(u[i]), 7), -7)
		want[i] = x / (1 + math.Exp(-1.702*x)) * (y + 1)
	}
	oaiSwiGLU(g, u, 1.702, 7)
	for i := range g {
		if math.Abs(float64(g[i])-want[i]) > 1e-6*math.Max(1, math.Abs(want[i])) {
			t.Errorf("element %d: %g, want %g", i, g[i], want[i])
		}
	}
}
