package quant

import (
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// MXFP4 as ggml lays it out (block_mxfp4): e, an E8M0 exponent byte, then
// 16 bytes whose low nibbles are elements 0–15 and high nibbles 16–31, each
// an E2M1 code. ggml keeps the codes' values doubled as int8 (kvalues_mxfp4,
// so that they dot with Q8_0 in integers) and halves the scale instead:
//
//	x[j] = kvaluesMXFP4[code] · 2^(e−128)
//
// which equals the E2M1 value times 2^(e−127), the OCP definition.

// MXFP4BlockBytes is the size of one 32-element MXFP4 block.
const MXFP4BlockBytes = 17

// KValuesMXFP4 are the E2M1 codes' values, doubled (ggml's kvalues_mxfp4).
var KValuesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0Half is 2^(e−128), ggml_e8m0_to_fp32_half bit for bit: the two
// smallest exponents give subnormals.
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func init() {
	decoders[kernels.MXFP4] = dequantMXFP4
	encoders[kernels.MXFP4] = quantMXFP4
}

// dequantMXFP4 is ggml's dequantize_row_mxfp4 for one block.
func dequantMXFP4(blk []byte, x []float32) {
	d := E8M0Half(blk[0])
	for j := range 16 {
		q := blk[1+j]
		x[j] = float32(KValuesMXFP4[q&0xf]) * d
		x[j+16] = float32(KValuesMXFP4[q>>4]) * d
	}
}

// quantMXFP4 is ggml's quantize_row_mxfp4_ref for one block: the exponent
// puts the largest |x| in the codes' top octave (floor(log2 amax) − 2), and
// each element takes the nearest code (the first of equals).
func quantMXFP4(x []float32, blk []byte) {
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	var e uint8
	if amax > 0 {
		// log2f, rounded to float32 as C computes it, then floored.
		l := float32(math.Log2(float64(amax)))
		e = uint8(int32(float32(math.Floor(float64(l)))-2+127) & 0xff)
	}
	blk[0] = e
	d := E8M0Half(e)
	for j := range 16 {
		blk[1+j] = bestMXFP4(x[j], d) | bestMXFP4(x[j+16], d)<<4
	}
}

func bestMXFP4(x, d float32) uint8 {
	best, bestErr := 0, float32(math.Abs(float64(float32(KValuesMXFP4[0])*d-x)))
	for i := 1; i < 16; i++ {
		if err := float32(math.Abs(float64(float32(KValuesMXFP4[i])*d - x))); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}
