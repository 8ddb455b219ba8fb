//go:build amd64 && !noasm

package cpu

import (
	"golang.org/x/sys/cpu"

	"github.com/sluicehq/sluice/kernels"
)

// useAVX2 selects the assembly kernels in dot_amd64.s. F16C converts the
// blocks' f16 scales; every AVX2 CPU has it, but it is checked all the same.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func axpyF32AVX2(dst *float32, a float32, x *float32, n int)

// dotF32Fast: the assembly covers the multiple-of-8 prefix, Go the tail.
func dotF32Fast(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	m := n &^ 7
	s := dotF32AVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

func axpyF32Fast(dst []float32, a float32, x []float32) {
	n := len(dst)
	x = x[:n]
	m := n &^ 7
	axpyF32AVX2(&dst[0], a, &x[0], m)
	for i := m; i < n; i++ {
		dst[i] += a * x[i]
	}
}

//go:noescape
func dotQ4_1Q8_1AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ8_0Q8_0AVX2(w, x *byte, nb int) float32

// The slice wrappers check the bounds once; the assembly trusts nb.
func dotQ4_1Q8_1Fast(w, x []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*20-1], x[nb*36-1]
	return dotQ4_1Q8_1AVX2(&w[0], &x[0], nb)
}

func dotQ8_0Q8_0Fast(w, x []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_, _ = w[nb*34-1], x[nb*34-1]
	return dotQ8_0Q8_0AVX2(&w[0], &x[0], nb)
}

func init() {
	if !useAVX2 {
		return
	}
	quantKernels[kernels.Q4_1].dot = dotQ4_1Q8_1Fast
	quantKernels[kernels.Q8_0].dot = dotQ8_0Q8_0Fast
}
