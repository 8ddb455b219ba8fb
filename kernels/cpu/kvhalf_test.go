package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels/quant"
)

// The F16 cache's conversions must agree with the scalar reference bit for bit
// (the AVX2 path rounds with VCVTPS2PH, nearest even), tails included.
func TestHalfKVMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 8, 64, 67, 192} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 30)
		}
		got, want := make([]uint16, n), make([]uint16, n)
		toHalf(got, src)
		toHalfGeneric(want, src)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d toHalf[%d] = %#04x, want %#04x", n, i, got[i], want[i])
			}
		}
		dst, ref := make([]float32, n), make([]float32, n)
		for i := range dst {
			dst[i] = float32(i)
			ref[i] = float32(i)
		}
		axpyHalf(dst, 0.37, got)
		axpyHalfGeneric(ref, 0.37, want)
		for i := range dst {
			// FMA rounds once where the Go loop rounds twice: 1 ulp apart at most.
			if d := float64(dst[i] - ref[i]); math.Abs(d) > 1e-6*(1+math.Abs(float64(ref[i]))) {
				t.Fatalf("n=%d axpyHalf[%d] = %g, want %g", n, i, dst[i], ref[i])
			}
		}
		if n%8 == 0 {
			q := src
			var exact float32
			for i := range q {
				exact += q[i] * quant.F16ToF32(want[i])
			}
			if d := dotHalfF32(got, q) - exact; d > 1e-2*float32(n) || d < -1e-2*float32(n) {
				t.Fatalf("n=%d dotHalfF32 off by %g", n, d)
			}
		}
	}
}
