package quant

import (
	"encoding/binary"
	"math"
)

// The 32-element "legacy" blocks. In every one, byte j of qs holds element j
// in its low nibble and element j+16 in its high nibble:
//
//	Q4_0 [d f16][qs 16]          x = d·(q−8)
//	Q4_1 [d f16][m f16][qs 16]   x = d·q + m
//	Q5_0 [d f16][qh 4][qs 16]    x = d·(q−16), bit 4 of element j is qh bit j
//	Q5_1 [d f16][m f16][qh 4][qs 16]
//	Q8_0 [d f16][qs int8 32]     x = d·q

const qk = 32

func dequantQ4_0(b []byte, x []float32) {
	d := f16At(b, 0)
	qs := b[2:18]
	for j := range 16 {
		x[j] = float32(int32(qs[j]&0xf)-8) * d
		x[j+16] = float32(int32(qs[j]>>4)-8) * d
	}
}

func dequantQ4_1(b []byte, x []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qs := b[4:20]
	for j := range 16 {
		x[j] = float32(float32(qs[j]&0xf)*d) + m
		x[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

func dequantQ5_0(b []byte, x []float32) {
	d := f16At(b, 0)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	for j := range 16 {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		x[j] = float32(int32(qs[j]&0xf|h0)-16) * d
		x[j+16] = float32(int32(qs[j]>>4|h1)-16) * d
	}
}

func dequantQ5_1(b []byte, x []float32) {
	d, m := f16At(b, 0), f16At(b, 2)
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	for j := range 16 {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		x[j] = float32(float32(qs[j]&0xf|h0)*d) + m
		x[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
	}
}

func dequantQ8_0(b []byte, x []float32) {
	d := f16At(b, 0)
	for j := range qk {
		x[j] = float32(int8(b[2+j])) * d
	}
}

// absMax returns the element of largest magnitude (first one on ties), signed.
func absMax(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	return amax, max
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = float32(math.MaxFloat32), -float32(math.MaxFloat32)
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// quantQ4_0 follows quantize_row_q4_0_ref: the extreme element maps to −8.
func quantQ4_0(x []float32, b []byte) {
	_, mx := absMax(x)
	d := mx / -8
	id := inverse(d)
	putF16(b, 0, d)
	for j := range 16 {
		x0 := min(15, int8(x[j]*id+8.5))
		x1 := min(15, int8(x[j+16]*id+8.5))
		b[2+j] = byte(x0) | byte(x1)<<4
	}
}

func quantQ4_1(x []float32, b []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	id := inverse(d)
	putF16(b, 0, d)
	putF16(b, 2, lo)
	for j := range 16 {
		x0 := min(15, int8((x[j]-lo)*id+0.5))
		x1 := min(15, int8((x[j+16]-lo)*id+0.5))
		b[4+j] = byte(x0) | byte(x1)<<4
	}
}

func quantQ5_0(x []float32, b []byte) {
	_, mx := absMax(x)
	d := mx / -16
	id := inverse(d)
	putF16(b, 0, d)
	var qh uint32
	for j := range 16 {
		x0 := byte(min(31, int8(x[j]*id+16.5)))
		x1 := byte(min(31, int8(x[j+16]*id+16.5)))
		b[6+j] = x0&0xf | (x1&0xf)<<4
		qh |= uint32(x0>>4&1)<<j | uint32(x1>>4&1)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[2:], qh)
}

func quantQ5_1(x []float32, b []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	id := inverse(d)
	putF16(b, 0, d)
	putF16(b, 2, lo)
	var qh uint32
	for j := range 16 {
		x0 := min(31, uint8((x[j]-lo)*id+0.5))
		x1 := min(31, uint8((x[j+16]-lo)*id+0.5))
		b[8+j] = x0&0xf | (x1&0xf)<<4
		qh |= uint32(x0>>4&1)<<j | uint32(x1>>4&1)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[4:], qh)
}

func quantQ8_0(x []float32, b []byte) {
	amax, _ := absMax(x)
	d := amax / 127
	id := inverse(d)
	putF16(b, 0, d)
	for j := range qk {
		b[2+j] = byte(int8(math.Round(float64(x[j] * id))))
	}
}
