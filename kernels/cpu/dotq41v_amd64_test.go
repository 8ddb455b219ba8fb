//go:build amd64 && !noasm

package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestQ4_1RowsVNNI checks the AVX-512 VNNI single-row Q4_1 kernel against
// the AVX2 kernel bit for bit (rows2/rows4/rows8 are bit-identical to the
// AVX2 rows, so the new rows must be too), and both against a float64 dot
// of the same blocks within f32 rounding, as the pure-Go reference is. Sizes
// cover one block, odd block counts and every remainder of the four-row
// groups; the blocks include all-zero and all-fifteen levels, negative and
// subnormal f16 scales, and activations at ±127.
func TestQ4_1RowsVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q4_1]
	avx2 := asmRows(dotQ4_1Q8_1Rows, 20, 36)
	vnni := asmRows(dotQ4_1Q8_1RowsVNNI, 20, 36)
	r := rand.New(rand.NewPCG(26, 41))
	for _, in := range []int{32, 96, 576, 1536, 2560} {
		for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19} {
			t.Run(fmt.Sprintf("in%d/rows%d", in, rows), func(t *testing.T) {
				nb := in / 32
				wb := kernels.Q4_1.RowBytes(in)
				w := mustQuantize(t, kernels.Q4_1, randVec(r, rows*in))
				for b := 0; b < rows*nb; b++ {
					blk := w[b*20 : b*20+20]
					switch b % 7 {
					case 1: // all levels 15
						for j := 4; j < 20; j++ {
							blk[j] = 0xff
						}
					case 2: // all levels 0
						clear(blk[4:])
					case 3: // random nibbles, negative scale, subnormal min
						for j := 4; j < 20; j++ {
							blk[j] = byte(r.Uint32())
						}
						binary.LittleEndian.PutUint16(blk, quant.F32ToF16(-0.03))
						binary.LittleEndian.PutUint16(blk[2:], 0x0003) // 3·2⁻²⁴
					case 4: // subnormal d
						binary.LittleEndian.PutUint16(blk, 0x8001)
					}
				}
				x := randVec(r, in)
				x[r.IntN(in)] = 50 // an outlier: that block's quants reach ±127
				for i := 0; i < in; i += 64 {
					x[i] = -x[i+1] * 1e3 // and quants at -127 elsewhere
				}
				xq := make([]byte, nb*36)
				k.quantize(xq, x)
				// Results past the last row must stay untouched: NaN guards.
				want, got := nanSlice(rows+3), nanSlice(rows+3)
				avx2(want[:rows], w, wb, xq, nb)
				vnni(got[:rows], w, wb, xq, nb)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("row %d: VNNI %v (%#08x), AVX2 %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				for i := range rows {
					ref, tol := q41Ref(w[i*wb:], xq, nb)
					if g := got[i]; math.Abs(float64(g)-ref) > tol {
						t.Errorf("row %d: VNNI %v, float64 %v (tolerance %g)", i, g, ref, tol)
					}
					if g := k.generic(w[i*wb:], xq, nb); math.Abs(float64(g)-ref) > tol {
						t.Errorf("row %d: generic %v, float64 %v (tolerance %g)", i, g, ref, tol)
					}
				}
			})
		}
	}
}

// TestQ8_0RowsVNNI1 checks the AVX-512 VNNI single-row Q8_0 kernel (eight
// rows a group, the rest through the AVX2 kernel) against the AVX2 kernel
// bit for bit, and both against float64, on weights at −128, 0 and 127,
// activations at ±127, one block to 80, and rows around multiples of 8.
func TestQ8_0RowsVNNI1(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q8_0]
	avx2 := asmRows(dotQ8_0Q8_0Rows, 34, 34)
	vnni := asmRows(dotQ8_0Q8_0RowsVNNI, 34, 34)
	r := rand.New(rand.NewPCG(26, 80))
	for _, in := range []int{32, 96, 576, 2560} {
		for _, rows := range []int{1, 7, 8, 9, 15, 16, 17, 24, 31} {
			t.Run(fmt.Sprintf("in%d/rows%d", in, rows), func(t *testing.T) {
				nb := in / 32
				wb := kernels.Q8_0.RowBytes(in)
				w := mustQuantize(t, kernels.Q8_0, randVec(r, rows*in))
				for b := 0; b < rows*nb; b++ {
					q := w[b*34+2 : b*34+34]
					q[r.IntN(32)] = 0x80 // −128
					q[r.IntN(32)] = 0
					q[r.IntN(32)] = 127
					if b%5 == 3 {
						binary.LittleEndian.PutUint16(w[b*34:], 0x8002) // subnormal, negative
					}
				}
				x := randVec(r, in)
				x[r.IntN(in)] = 50
				for i := 0; i < in; i += 64 {
					x[i] = -x[i+1] * 1e3
				}
				xq := make([]byte, nb*34)
				k.quantize(xq, x)
				want, got := nanSlice(rows+3), nanSlice(rows+3)
				avx2(want[:rows], w, wb, xq, nb)
				vnni(got[:rows], w, wb, xq, nb)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("row %d: VNNI %v (%#08x), AVX2 %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				for i := range rows {
					ref, tol := q80Ref(w[i*wb:], xq, nb)
					if g := got[i]; math.Abs(float64(g)-ref) > tol {
						t.Errorf("row %d: VNNI %v, float64 %v (tolerance %g)", i, g, ref, tol)
					}
				}
			})
		}
	}
}

// TestQ5_0RowsVNNI1 is TestQ8_0RowsVNNI1 for the Q5_0 kernel, on blocks
// with every fifth bit set, none set and random (levels −16 and 15 among
// them), and subnormal negative scales.
func TestQ5_0RowsVNNI1(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q5_0]
	avx2 := asmRows(dotQ5_0Q8_0Rows, 22, 34)
	vnni := asmRows(dotQ5_0Q8_0RowsVNNI, 22, 34)
	r := rand.New(rand.NewPCG(26, 50))
	for _, in := range []int{32, 96, 640, 2560} {
		for _, rows := range []int{1, 7, 8, 9, 16, 17, 24, 31} {
			t.Run(fmt.Sprintf("in%d/rows%d", in, rows), func(t *testing.T) {
				nb := in / 32
				wb := kernels.Q5_0.RowBytes(in)
				w := mustQuantize(t, kernels.Q5_0, randVec(r, rows*in))
				for b := 0; b < rows*nb; b++ {
					blk := w[b*22 : b*22+22]
					switch b % 4 {
					case 0: // all levels ≥ 0, one at 15
						copy(blk[2:6], []byte{0xff, 0xff, 0xff, 0xff})
						blk[6+r.IntN(16)] |= 0x0f
					case 1: // all levels < 0, one at −16
						clear(blk[2:6])
						blk[6+r.IntN(16)] &= 0xf0
					case 2: // random bits and nibbles, subnormal negative scale
						binary.LittleEndian.PutUint32(blk[2:], r.Uint32())
						for j := 6; j < 22; j++ {
							blk[j] = byte(r.Uint32())
						}
						binary.LittleEndian.PutUint16(blk, 0x8002)
					}
				}
				x := randVec(r, in)
				x[r.IntN(in)] = 50
				for i := 0; i < in; i += 64 {
					x[i] = -x[i+1] * 1e3
				}
				xq := make([]byte, nb*34)
				k.quantize(xq, x)
				want, got := nanSlice(rows+3), nanSlice(rows+3)
				avx2(want[:rows], w, wb, xq, nb)
				vnni(got[:rows], w, wb, xq, nb)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("row %d: VNNI %v (%#08x), AVX2 %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				wf := mustDequantize(t, kernels.Q5_0, w, rows*in)
				xf := decodeAct(t, kernels.Q5_0, xq, in)
				for i := range rows {
					var ref, mag float64
					for j := range in {
						p := float64(wf[i*in+j]) * float64(xf[j])
						ref += p
						mag += math.Abs(p)
					}
					if tol := float64(nb+8) * 0x1p-23 * mag; math.Abs(float64(got[i])-ref) > tol {
						t.Errorf("row %d: VNNI %v, float64 %v (tolerance %g)", i, got[i], ref, tol)
					}
				}
			})
		}
	}
}

// q80Ref is q41Ref for a Q8_0 row against a Q8_0 activation row.
func q80Ref(w, xq []byte, nb int) (ref, tol float64) {
	f16 := func(b []byte) float64 { return float64(quant.F16ToF32(binary.LittleEndian.Uint16(b))) }
	var mag float64
	for b := range nb {
		wb, xb := w[b*34:], xq[b*34:]
		var isum int64
		for j := range 32 {
			isum += int64(int8(wb[2+j])) * int64(int8(xb[2+j]))
		}
		dot := f16(wb) * f16(xb) * float64(isum)
		ref += dot
		mag += math.Abs(dot)
	}
	return ref, float64(nb+8) * 0x1p-23 * mag
}

func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// q41Ref is one Q4_1 row against a Q8_1 row in float64, as the kernels
// define it (the min term as m·s, s the activation block's stored sum), and
// a bound on f32 rounding: each block's product and each running sum add at
// most 2⁻²⁴ relative error, so (nb+8)·2⁻²³ of Σ|terms| covers both kernels.
func q41Ref(w, xq []byte, nb int) (ref, tol float64) {
	f16 := func(b []byte) float64 { return float64(quant.F16ToF32(binary.LittleEndian.Uint16(b))) }
	var mag float64
	for b := range nb {
		wb, xb := w[b*20:], xq[b*36:]
		var isum int64
		for j := range 16 {
			isum += int64(wb[4+j]&0xf)*int64(int8(xb[4+j])) + int64(wb[4+j]>>4)*int64(int8(xb[20+j]))
		}
		dot := f16(wb) * f16(xb) * float64(isum)
		ms := f16(wb[2:]) * f16(xb[2:])
		ref += dot + ms
		mag += math.Abs(dot) + math.Abs(ms)
	}
	return ref, float64(nb+8) * 0x1p-23 * mag
}

// BenchmarkSingleRowKernels: the AVX2 and AVX-512 single-row kernels
// over one L2-resident matrix of 576 columns (Q4_1: SmolLM2's FFN up, 1536
// rows, 1.7 MB; Q8_0: 2048 rows of its output head, 1.2 MB; Q5_0: 2048
// rows, 0.8 MB), GB/s of
// weights read.
func BenchmarkSingleRowKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(26, 42))
	const in = 576
	for _, c := range []struct {
		dt         kernels.DType
		rows       int
		avx2, vnni func(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)
	}{
		{kernels.Q4_1, 1536, dotQ4_1Q8_1Rows, dotQ4_1Q8_1RowsVNNI},
		{kernels.Q8_0, 2048, dotQ8_0Q8_0Rows, dotQ8_0Q8_0RowsVNNI},
		{kernels.Q5_0, 2048, dotQ5_0Q8_0Rows, dotQ5_0Q8_0RowsVNNI},
	} {
		k := quantKernels[c.dt]
		w := randomBlocks(r, c.dt, c.rows, in)
		nb := in / 32
		xq := make([]byte, nb*k.actBlockBytes)
		k.quantize(xq, randVec(r, in))
		dst := make([]float32, c.rows)
		isGrouped := groupedRuns(c.dt)
		for _, f := range []struct {
			name string
			rows rowsDot
			raw  []byte
			ok   bool
		}{
			{"avx2", asmRows(c.avx2, c.dt.BlockBytes(), k.actBlockBytes), w.raw, useAVX2},
			{"vnni512", asmRows(c.vnni, c.dt.BlockBytes(), k.actBlockBytes), w.raw, useVNNI512},
			{"grouped", groupedRows(isGrouped, c.dt, k), groupedRaw(isGrouped, c.dt, w.raw, c.rows, nb), isGrouped},
		} {
			if !f.ok {
				continue
			}
			b.Run(c.dt.String()+"/"+f.name, func(b *testing.B) {
				for b.Loop() {
					f.rows(dst, f.raw, c.dt.RowBytes(in), xq, nb)
				}
				b.ReportMetric(float64(len(w.raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// groupedRows is dt's grouped one-row kernel where it runs, as a rowsDot
// over whole groups (its scale table made a call, as matMul makes it).
func groupedRows(ok bool, dt kernels.DType, k *quantKernel) rowsDot {
	if !ok {
		return nil
	}
	var sc []float32
	return func(dst []float32, w []byte, _ int, x []byte, nb int) {
		sc = grow(sc, 2*nb)
		groupedScales(sc, x, nb*k.actBlockBytes, k.actBlockBytes, nb, 1)
		grouped.kernels[dt][1](&w[0], nb, &x[0], nb*k.actBlockBytes, &sc[0], &dst[0], 4*len(dst), len(dst)/grouped.rows)
	}
}

// groupedRaw is raw grouped where dt's matrices are.
func groupedRaw(ok bool, dt kernels.DType, raw []byte, rows, nb int) []byte {
	if !ok {
		return nil
	}
	return packGrouped(dt, raw, rows, nb, grouped)
}
