package quant

import "math"

// f16Table maps every IEEE half bit pattern to its float32 value, as ggml's
// table does: the dot products read two halves per block and a load beats the
// bit arithmetic.
var f16Table [1 << 16]float32

func init() {
	for i := range f16Table {
		f16Table[i] = f16ToF32Slow(uint16(i))
	}
}

// F16ToF32 converts an IEEE 754 half (binary16) to float32 exactly.
func F16ToF32(h uint16) float32 { return f16Table[h] }

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN: keep the payload
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = man · 2⁻²⁴, exactly representable in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		return -v
	}
	return v
}

// F32ToF16 converts float32 to half with round-to-nearest-even, bit-identical
// to ggml's software conversion and to x86 F16C (overflow gives ±Inf, NaN stays
// NaN). The explicit float32 conversions stop the compiler fusing the steps
// into an FMA, which would change the rounding.
func F32ToF16(f float32) uint16 {
	const scaleToInf = 0x1.0p+112
	const scaleToZero = 0x1.0p-110
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits((bias>>1)+0x07800000) + base)
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	manBits := bits & 0x00000fff
	nonsign := expBits + manBits
	if shl1w > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16 | nonsign)
}

// BF16ToF32 converts bfloat16 (the top half of a float32) to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even, as ggml_compute_fp32_to_bf16 does; NaNs
// are kept quiet.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16 | 64)
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// nearestInt rounds half to even, like ggml's nearest_int (valid for |f| < 2²²).
func nearestInt(f float32) int32 { return int32(math.RoundToEven(float64(f))) }
