package quant

import "math"

// Activation formats. Before a quantized matmul, each activation row is
// quantized once to its weight type's partner (Q8_1 for Q4_1/Q5_1, Q8_0 for
// Q4_0/Q5_0/Q8_0, Q8_K for K-quants) so the dot products run on integers, as
// ggml's CPU backend does.
//
//	Q8_1 [d f16][s f16][qs int8 32]   x = d·q, s = d·Σq (lets Q4_1's min term
//	                                  fold into one multiply per block)
const (
	Q8_0BlockBytes = 34
	Q8_1BlockBytes = 36
	Q8_KBlockBytes = 292
)

// ActQ8_0 quantizes x (a multiple of 32 elements) into dst
// (len(x)/32·34 bytes) the way ggml's x86 quantize_row_q8_0 does: scale
// 127/amax and round half to even, so our integer dots see llama.cpp's values.
func ActQ8_0(dst []byte, x []float32) {
	for b := 0; b < len(x)/qk; b++ {
		xs, blk := x[b*qk:(b+1)*qk], dst[b*Q8_0BlockBytes:(b+1)*Q8_0BlockBytes]
		amax, _ := absMax(xs)
		putF16(blk, 0, amax/127)
		id := float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range xs {
			blk[2+j] = byte(int8(math.RoundToEven(float64(v * id))))
		}
	}
}

// ActQ8_1 is ActQ8_0's layout plus s = d·Σq (ggml's x86 quantize_row_q8_1).
func ActQ8_1(dst []byte, x []float32) {
	for b := 0; b < len(x)/qk; b++ {
		xs, blk := x[b*qk:(b+1)*qk], dst[b*Q8_1BlockBytes:(b+1)*Q8_1BlockBytes]
		amax, _ := absMax(xs)
		d := amax / 127
		id := float32(0)
		if amax != 0 {
			id = 127 / amax
		}
		var sum int32
		for j, v := range xs {
			q := int8(math.RoundToEven(float64(v * id)))
			blk[4+j] = byte(q)
			sum += int32(q)
		}
		putF16(blk, 0, d)
		putF16(blk, 2, d*float32(sum))
	}
}

// ActQ8_K quantizes x (a multiple of 256 elements) into Q8_K blocks with the
// reference quantizer, which is also what ggml's x86 build runs.
func ActQ8_K(dst []byte, x []float32) {
	for b := 0; b < len(x)/qkK; b++ {
		quantQ8_K(x[b*qkK:(b+1)*qkK], dst[b*Q8_KBlockBytes:(b+1)*Q8_KBlockBytes])
	}
}
