package quant

import (
	"encoding/binary"
	"math"
)

// K-quant super-blocks of QK_K = 256 elements:
//
//	Q4_K [d f16][dmin f16][scales 12][qs 128]            8 sub-blocks of 32: x = d·sc·q − dmin·m
//	Q5_K [d f16][dmin f16][scales 12][qh 32][qs 128]     as Q4_K with a fifth bit from qh
//	Q6_K [ql 128][qh 64][scales int8 16][d f16]          16 sub-blocks of 16: x = d·sc·(q−32)
//	Q8_K [d f32][qs int8 256][bsums int16 16]            activation partner of the above
//
// In Q4_K/Q5_K each 64-element chunk c uses qs[32c:32c+32]: low nibbles are
// elements 64c..64c+31, high nibbles 64c+32..64c+63. The 12 scale bytes pack
// eight 6-bit scales and eight 6-bit mins (see scaleMinK4).

const qkK = 256

// scaleMinK4 unpacks sub-block j's 6-bit scale and min (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// ScaleMinK4 is scaleMinK4 for the CPU kernels.
func ScaleMinK4(j int, scales []byte) (sc, m uint8) { return scaleMinK4(j, scales) }

func dequantQ4_K(b []byte, y []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	scales, q := b[4:16], b[16:144]
	for c := range 4 {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		qc, yc := q[32*c:32*c+32], y[64*c:64*c+64]
		for l := range 32 {
			yc[l] = float32(d1*float32(qc[l]&0xf)) - mm1
			yc[l+32] = float32(d2*float32(qc[l]>>4)) - mm2
		}
	}
}

func dequantQ5_K(b []byte, y []float32) {
	d, dmin := f16At(b, 0), f16At(b, 2)
	scales, qh, ql := b[4:16], b[16:48], b[48:176]
	for c := range 4 {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		u1, u2 := byte(1)<<(2*c), byte(2)<<(2*c)
		qc, yc := ql[32*c:32*c+32], y[64*c:64*c+64]
		for l := range 32 {
			lo, hi := qc[l]&0xf, qc[l]>>4
			if qh[l]&u1 != 0 {
				lo += 16
			}
			if qh[l]&u2 != 0 {
				hi += 16
			}
			yc[l] = float32(d1*float32(lo)) - mm1
			yc[l+32] = float32(d2*float32(hi)) - mm2
		}
	}
}

func dequantQ6_K(b []byte, y []float32) {
	d := f16At(b, 208)
	for half := range 2 {
		ql, qh := b[64*half:64*half+64], b[128+32*half:128+32*half+32]
		sc := b[192+8*half : 192+8*half+8]
		yh := y[128*half : 128*half+128]
		for l := range 32 {
			is := l / 16
			q1 := int32(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
			q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			yh[l] = d * float32(int8(sc[is])) * float32(q1)
			yh[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			yh[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			yh[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}

func dequantQ8_K(b []byte, y []float32) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	for j := range qkK {
		y[j] = d * float32(int8(b[4+j]))
	}
}

// quantQ8_K follows quantize_row_q8_K_ref (also what ggml's x86 build runs):
// the extreme element maps to −127, bsums hold each 16-group's sum.
func quantQ8_K(x []float32, b []byte) {
	clear(b)
	amax, mx := absMax(x)
	if amax == 0 {
		return
	}
	iscale := -127 / mx
	for j := range qkK {
		b[4+j] = byte(int8(min(127, nearestInt(iscale*x[j]))))
	}
	for g := range 16 {
		var s int16
		for i := range 16 {
			s += int16(int8(b[4+16*g+i]))
		}
		binary.LittleEndian.PutUint16(b[260+2*g:], uint16(s))
	}
	binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
}

// quantQ4_K and quantQ5_K follow quantize_row_q4_K_ref / q5_K_ref: per
// sub-block a weighted least-squares search for scale and min
// (makeQKX2Quants), then both quantized to 6 bits against the block maxima.
func quantQ4_K(x []float32, b []byte) {
	var L [qkK]uint8
	quantKScales(x, b, L[:], 15, -1, 20)
	q := b[16:144]
	for c := range 4 {
		for l := range 32 {
			q[32*c+l] = L[64*c+l] | L[64*c+l+32]<<4
		}
	}
}

func quantQ5_K(x []float32, b []byte) {
	var L [qkK]uint8
	quantKScales(x, b, L[:], 31, -0.5, 15)
	qh, ql := b[16:48], b[48:176]
	clear(qh)
	for c := range 4 {
		m1, m2 := byte(1)<<(2*c), byte(2)<<(2*c)
		for j := range 32 {
			l1, l2 := L[64*c+j], L[64*c+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[32*c+j] = l1 | l2<<4
		}
	}
}

// quantKScales fills d, dmin and the 12 scale bytes of a Q4_K/Q5_K block and
// returns each element's level in L (0..nmax).
func quantKScales(x []float32, b []byte, L []uint8, nmax int32, rmin float32, nstep int) {
	var scales, mins [8]float32
	var weights [32]float32
	var laux [32]uint8
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += v * v
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, 0.1, nstep)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := b[4:16]
	clear(sc)
	for j := range 8 {
		ls := uint8(min(63, nearestInt(invScale*scales[j])))
		lm := uint8(min(63, nearestInt(invMin*mins[j])))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(b, 0, maxScale/63)
	putF16(b, 2, maxMin/63)
	d, dmin := f16At(b, 0), f16At(b, 2)
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		dj := d * float32(s)
		if dj == 0 {
			continue
		}
		dm := dmin * float32(m)
		for i := range 32 {
			l := nearestInt((x[32*j+i] + dm) / dj)
			L[32*j+i] = uint8(max(0, min(nmax, l)))
		}
	}
}

// makeQKX2Quants is ggml's make_qkx2_quants (use_mad = false): it returns the
// scale and the (positive) min such that x ≈ scale·L − min, minimizing the
// weighted squared error over a small sweep of candidate scales.
func makeQKX2Quants(nmax int32, x, w []float32, L, laux []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	lo, hi := x[0], x[0]
	sumW, sumX := w[0], w[0]*x[0]
	for i := 1; i < len(x); i++ {
		lo, hi = min(lo, x[i]), max(hi, x[i])
		sumW += w[i]
		sumX += w[i] * x[i]
	}
	lo = min(lo, 0)
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		l := max(0, min(nmax, nearestInt(iscale*(v-lo))))
		L[i] = uint8(l)
		diff := scale*float32(l) + lo - v
		bestErr += w[i] * diff * diff
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + rdelta*float32(is) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := max(0, min(nmax, nearestInt(iscale*(v-lo))))
			laux[i] = uint8(l)
			fl := float32(l)
			sumL += w[i] * fl
			sumL2 += w[i] * fl * fl
			sumXL += w[i] * fl * v
		}
		D := sumW*sumL2 - sumL*sumL
		if D <= 0 {
			continue
		}
		thisScale := (sumW*sumXL - sumX*sumL) / D
		thisMin := (sumL2*sumX - sumL*sumXL) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curErr float32
		for i, v := range x {
			diff := thisScale*float32(laux[i]) + thisMin - v
			curErr += w[i] * diff * diff
		}
		if curErr < bestErr {
			copy(L, laux)
			bestErr, scale, lo = curErr, thisScale, thisMin
		}
	}
	return scale, -lo
}

// quantQ6_K follows quantize_row_q6_K_ref: per 16-element sub-block a signed
// scale from makeQXQuants, then int8 scales against the block's largest.
func quantQ6_K(x []float32, b []byte) {
	var L [qkK]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := range 16 {
		s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if a := abs32(s); a > maxAbs {
			maxAbs, maxScale = a, s
		}
	}
	clear(b)
	if maxAbs < groupMaxEps {
		return
	}
	iscale := -128 / maxScale
	putF16(b, 208, 1/iscale)
	for ib := range 16 {
		b[192+ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	d0 := f16At(b, 208)
	for j := range 16 {
		d := d0 * float32(int8(b[192+j]))
		if d == 0 {
			continue
		}
		for i := range 16 {
			l := max(-32, min(31, nearestInt(x[16*j+i]/d)))
			L[16*j+i] = int8(l + 32)
		}
	}
	for half := range 2 {
		ql, qh := b[64*half:64*half+64], b[128+32*half:128+32*half+32]
		Lh := L[128*half : 128*half+128]
		for l := range 32 {
			q1, q2, q3, q4 := uint8(Lh[l]), uint8(Lh[l+32]), uint8(Lh[l+64]), uint8(Lh[l+96])
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

const groupMaxEps = 1e-15

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 (weights x²): a
// symmetric scale refined over ±0.9 around nmax by least squares.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	amax, mx := absMax(x)
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	fmax := float32(nmax)
	sums := func(iscale float32) (sumLX, sumL2 float32) {
		for _, v := range x {
			l := float32(max(-nmax, min(nmax-1, nearestInt(iscale*v))))
			w := v * v
			sumLX += w * v * l
			sumL2 += w * l * l
		}
		return sumLX, sumL2
	}
	fill := func(iscale float32) {
		for i, v := range x {
			L[i] = int8(nmax + max(-nmax, min(nmax-1, nearestInt(iscale*v))))
		}
	}
	iscale := -fmax / mx
	fill(iscale)
	sumLX, sumL2 := sums(iscale)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fmax + 0.1*float32(is)) / mx
		sumLX, sumL2 = sums(iscale)
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			fill(iscale)
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}
