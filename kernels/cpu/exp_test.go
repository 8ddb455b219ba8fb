package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpF32 checks exp against float64 over softmax's and SiLU's whole input
// range, including the slow path (|x| > 87) where results go subnormal, flush
// to zero below about −104, and overflow above 88.4. The bound is 3 ulp
// (ggml states 1.45 + 0.5 for the algorithm), or 2 subnormal steps.
func TestExpF32(t *testing.T) {
	var x []float32
	for v := float32(-110); v <= 88; v += 0.0137 {
		x = append(x, v)
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, -87.33, -103.9, -150, float32(math.Inf(-1)))
	for len(x)%8 != 3 { // exercise the scalar tail too
		x = append(x, -1)
	}
	dst := make([]float32, len(x))
	expF32(dst, x, 0)
	for i, v := range x {
		want := math.Exp(float64(v))
		tol := max(3*0x1p-23*want, 0x1p-148)
		if d := math.Abs(float64(dst[i]) - want); d > tol {
			t.Fatalf("exp(%v) = %v, want %v (error %g > %g)", v, dst[i], want, d, tol)
		}
	}
	// As softmax uses it: inputs minus their maximum, and the sum.
	sum := expF32(dst, x, 88)
	var want64 float64
	for _, v := range x {
		want64 += math.Exp(float64(v - 88))
	}
	if d := math.Abs(float64(sum) - want64); d > 1e-5*want64 {
		t.Errorf("sum %v, want %v", sum, want64)
	}
	big := []float32{89, 100, 1000, float32(math.Inf(1)), 89, 89, 89, 89}
	expF32(big, big, 0)
	for i, v := range big {
		if !math.IsInf(float64(v), 1) {
			t.Errorf("exp of large input %d = %v, want +Inf", i, v)
		}
	}
}

func TestSiluMulF32(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	n := 203
	gate, up := randVec(r, n), randVec(r, n)
	for i := range gate {
		gate[i] *= 8
	}
	gate[0], gate[1], gate[2] = -95, 95, -200
	dst := make([]float32, n)
	siluMulF32(dst, gate, up)
	for i := range n {
		g, u := float64(gate[i]), float64(up[i])
		want := g / (1 + math.Exp(-g)) * u
		if d := math.Abs(float64(dst[i]) - want); d > 6*0x1p-23*math.Abs(want)+1e-37 {
			t.Fatalf("silu(%v)·%v = %v, want %v", g, u, dst[i], want)
		}
	}
}
