package cpu

import (
	"encoding/binary"
	"math"

	"github.com/sluicehq/sluice/kernels/quant"
)

// Pure-Go dot products: the reference for the assembly and the fallback on
// machines without AVX2. Each takes one weight row w (nb blocks of its type)
// and one activation row x already quantized to the partner format, and
// follows ggml's generic ggml_vec_dot_* so the integer sums are the same.

func f16le(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

func dotF32Generic(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16F32Generic(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s float32
	for i, v := range x {
		s += quant.F16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}

func dotBF16F32Generic(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s float32
	for i, v := range x {
		s += quant.BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * v
	}
	return s
}

// Q4_1 [d m qs16] · Q8_1 [d s qs32]: Σ d·q+m times dx·qx = d·dx·Σq·qx + m·s.
// Blocks are viewed as fixed-size arrays so the inner loops carry no bounds
// checks.
func dotQ4_1Q8_1Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := (*[20]byte)(w[b*20:]), (*[36]byte)(x[b*36:])
		qs, q8 := (*[16]byte)(wb[4:]), (*[32]byte)(xb[4:])
		var lo, hi int32
		for j := 0; j < 16; j += 4 {
			lo += int32(qs[j]&0xf)*int32(int8(q8[j])) + int32(qs[j+1]&0xf)*int32(int8(q8[j+1])) +
				int32(qs[j+2]&0xf)*int32(int8(q8[j+2])) + int32(qs[j+3]&0xf)*int32(int8(q8[j+3]))
			hi += int32(qs[j]>>4)*int32(int8(q8[j+16])) + int32(qs[j+1]>>4)*int32(int8(q8[j+17])) +
				int32(qs[j+2]>>4)*int32(int8(q8[j+18])) + int32(qs[j+3]>>4)*int32(int8(q8[j+19]))
		}
		sum += f16le(wb[:])*f16le(xb[:])*float32(lo+hi) + f16le(wb[2:])*f16le(xb[2:])
	}
	return sum
}

func dotQ4_0Q8_0Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := w[b*18:b*18+18], x[b*34:b*34+34]
		var isum int32
		for j := range 16 {
			isum += (int32(wb[2+j]&0xf)-8)*int32(int8(xb[2+j])) + (int32(wb[2+j]>>4)-8)*int32(int8(xb[18+j]))
		}
		sum += f16le(wb) * f16le(xb) * float32(isum)
	}
	return sum
}

func dotQ5_0Q8_0Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := w[b*22:b*22+22], x[b*34:b*34+34]
		qh := binary.LittleEndian.Uint32(wb[2:])
		var isum int32
		for j := range 16 {
			lo := int32(wb[6+j]&0xf|byte(qh>>j<<4)&0x10) - 16
			hi := int32(wb[6+j]>>4|byte(qh>>(j+12))&0x10) - 16
			isum += lo*int32(int8(xb[2+j])) + hi*int32(int8(xb[18+j]))
		}
		sum += f16le(wb) * f16le(xb) * float32(isum)
	}
	return sum
}

func dotQ5_1Q8_1Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := w[b*24:b*24+24], x[b*36:b*36+36]
		qh := binary.LittleEndian.Uint32(wb[4:])
		var isum int32
		for j := range 16 {
			lo := int32(wb[8+j]&0xf | byte(qh>>j<<4)&0x10)
			hi := int32(wb[8+j]>>4 | byte(qh>>(j+12))&0x10)
			isum += lo*int32(int8(xb[4+j])) + hi*int32(int8(xb[20+j]))
		}
		sum += f16le(wb)*f16le(xb)*float32(isum) + f16le(wb[2:])*f16le(xb[2:])
	}
	return sum
}

func dotQ8_0Q8_0Generic(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := (*[34]byte)(w[b*34:]), (*[34]byte)(x[b*34:])
		var s0, s1 int32
		for j := 2; j < 34; j += 4 {
			s0 += int32(int8(wb[j]))*int32(int8(xb[j])) + int32(int8(wb[j+1]))*int32(int8(xb[j+1]))
			s1 += int32(int8(wb[j+2]))*int32(int8(xb[j+2])) + int32(int8(wb[j+3]))*int32(int8(xb[j+3]))
		}
		sum += f16le(wb[:]) * f16le(xb[:]) * float32(s0+s1)
	}
	return sum
}

// q8KScale and q8KBsum read a Q8_K activation block's f32 scale and the sum
// of its 16-element group g.
func q8KScale(xb []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(xb)) }
func q8KBsum(xb []byte, g int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(xb[260+2*g:])))
}

// dotLevels32 is Σ a[l]·q8[l] over one 32-element sub-block.
func dotLevels32(a []uint8, q8 []byte) int32 {
	var s int32
	for l := range 32 {
		s += int32(a[l]) * int32(int8(q8[l]))
	}
	return s
}

// Q4_K · Q8_K: Σ_sub d·sc·Σa·q8 − dmin·m·Σq8, the min term taken from the
// activation's bsums (two 16-groups per 32-element sub-block).
func dotQ4_KQ8_KGeneric(w, x []byte, nb int) float32 {
	var sum float32
	var a [256]uint8
	for b := range nb {
		wb, xb := w[b*144:b*144+144], x[b*292:b*292+292]
		q := wb[16:144]
		for c := range 4 {
			for l := range 32 {
				a[64*c+l], a[64*c+32+l] = q[32*c+l]&0xf, q[32*c+l]>>4
			}
		}
		sum += kQuantSum(wb, xb, a[:])
	}
	return sum
}

func dotQ5_KQ8_KGeneric(w, x []byte, nb int) float32 {
	var sum float32
	var a [256]uint8
	for b := range nb {
		wb, xb := w[b*176:b*176+176], x[b*292:b*292+292]
		qh, ql := wb[16:48], wb[48:176]
		for c := range 4 {
			for l := range 32 {
				a[64*c+l] = ql[32*c+l]&0xf | (qh[l]>>(2*c)&1)<<4
				a[64*c+32+l] = ql[32*c+l]>>4 | (qh[l]>>(2*c+1)&1)<<4
			}
		}
		sum += kQuantSum(wb, xb, a[:])
	}
	return sum
}

// kQuantSum finishes a Q4_K/Q5_K block whose levels are unpacked in a.
func kQuantSum(wb, xb []byte, a []uint8) float32 {
	scales := wb[4:16]
	q8 := xb[4:260]
	var isum, msum int32
	for j := range 8 {
		sc, m := quant.ScaleMinK4(j, scales)
		isum += int32(sc) * dotLevels32(a[32*j:32*j+32], q8[32*j:32*j+32])
		msum += int32(m) * (q8KBsum(xb, 2*j) + q8KBsum(xb, 2*j+1))
	}
	dy := q8KScale(xb)
	return f16le(wb)*dy*float32(isum) - f16le(wb[2:])*dy*float32(msum)
}

// Q6_K · Q8_K: d·Σ_sub sc·Σ(q−32)·q8 over sixteen 16-element sub-blocks.
func dotQ6_KQ8_KGeneric(w, x []byte, nb int) float32 {
	var sum float32
	var a [256]int8
	for b := range nb {
		wb, xb := w[b*210:b*210+210], x[b*292:b*292+292]
		for half := range 2 {
			ql, qh := wb[64*half:64*half+64], wb[128+32*half:128+32*half+32]
			ah := a[128*half : 128*half+128]
			for l := range 32 {
				ah[l] = int8(ql[l]&0xf|(qh[l]&3)<<4) - 32
				ah[l+32] = int8(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				ah[l+64] = int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				ah[l+96] = int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
		q8 := xb[4:260]
		var isum int32
		for s := range 16 {
			var si int32
			for l := range 16 {
				si += int32(a[16*s+l]) * int32(int8(q8[16*s+l]))
			}
			isum += int32(int8(wb[192+s])) * si
		}
		sum += f16le(wb[208:]) * q8KScale(xb) * float32(isum)
	}
	return sum
}

func dotQ8_KQ8_KGeneric(w, x []byte, nb int) float32 {
	var sum float32
	for b := range nb {
		wb, xb := w[b*292:b*292+292], x[b*292:b*292+292]
		var isum int32
		for j := range 256 {
			isum += int32(int8(wb[4+j])) * int32(int8(xb[4+j]))
		}
		sum += q8KScale(wb) * q8KScale(xb) * float32(isum)
	}
	return sum
}
