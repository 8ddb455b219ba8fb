//go:build amd64 && !noasm

package cpu

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func axpyF16AVX2(dst *float32, a float32, x *uint16, n int)

// toHalf stores src as F16 in dst (same length).
func toHalf(dst []uint16, src []float32) {
	n := len(src) &^ 7
	if useAVX2 && n > 0 {
		f32ToF16AVX2(&dst[0], &src[0], n)
	}
	toHalfGeneric(dst[n:], src[n:])
}

// axpyHalf: dst += a·x, x in F16.
func axpyHalf(dst []float32, a float32, x []uint16) {
	n := len(dst) &^ 7
	if useAVX2 && n > 0 {
		axpyF16AVX2(&dst[0], a, &x[0], n)
	}
	axpyHalfGeneric(dst[n:], a, x[n:len(dst)])
}
