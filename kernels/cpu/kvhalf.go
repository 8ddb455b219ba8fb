package cpu

import (
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// The KV cache holds F16, as llama.cpp's does by default: half the memory
// (twice the sequences in the same pool) and half the bytes attention reads
// per position, at a rounding error (2⁻¹¹ relative) far below what separates
// two sensible next tokens. Keeping the reference's precision also keeps our
// logits within a few hundredths of its own.

func toHalfGeneric(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = quant.F32ToF16(v)
	}
}

func axpyHalfGeneric(dst []float32, a float32, x []uint16) {
	for i, h := range x {
		dst[i] += a * quant.F16ToF32(h)
	}
}

// dotHalfF32 is Σ q[i]·f16(k[i]).
func dotHalfF32(k []uint16, q []float32) float32 {
	return dotHalf(kernels.F16, unsafe.Slice((*byte)(unsafe.Pointer(&k[0])), 2*len(k)), q)
}
