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

// TestQ8_0RowsMVNNI holds the AVX-512 VNNI four- and eight-activation Q8_0
// kernels (dotq8v_amd64.s) to TestQ4_1RowsMVNNI's standard, beyond what
// TestQ8_0RowsVNNI covers: bit for bit with the AVX2 kernels (speculative
// verify runs 1+k rows through the output head, and greedy identity needs
// them to give the one-row bits) and within f32 rounding of a float64 dot.
// Blocks include all −128 weights against all ±127 activations (the
// largest |sum| the VPDPBUSD(|w|, ±x) trick must keep exact, and the one
// where |w| = 128 does not fit a signed byte), mixed −128/0/127 weights,
// negative and subnormal scales; row counts cover every remainder of a pair
// and of the 16-row tile, and results past the last row and between
// activation rows must stay untouched.
func TestQ8_0RowsMVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q8_0]
	r := rand.New(rand.NewPCG(26, 80))
	for _, f := range []struct {
		m          int
		avx2, vnni rowsMKernel
	}{{4, dotQ8_0Q8_0Rows4, dotQ8_0Q8_0Rows4VNNI}, {8, dotQ8_0Q8_0Rows8, dotQ8_0Q8_0Rows8VNNI}} {
		m := f.m
		for _, in := range []int{32, 96, 576} {
			for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb := in / 32
					wb := kernels.Q8_0.RowBytes(in)
					w := mustQuantize(t, kernels.Q8_0, randVec(r, rows*in))
					for b := 0; b < rows*nb; b++ {
						blk := w[b*34 : b*34+34]
						switch b % 5 {
						case 1: // every weight −128
							for j := 2; j < 34; j++ {
								blk[j] = 0x80
							}
						case 2: // −128, 0 and 127 mixed in
							for j := 2; j < 34; j++ {
								blk[j] = [3]byte{0x80, 0, 127}[r.IntN(3)]
							}
						case 3: // negative scale
							binary.LittleEndian.PutUint16(blk, quant.F32ToF16(-0.02))
						case 4: // subnormal scale
							binary.LittleEndian.PutUint16(blk, 0x0003)
						}
					}
					xrb := nb * 34
					xstride := xrb + 34
					xq := make([]byte, m*xstride)
					for j := range m {
						x := randVec(r, in)
						for i := 0; i < in; i += 64 {
							// One block in two at ±127 throughout, the sign by activation row.
							for l := i; l < i+32 && l < in; l++ {
								x[l] = float32(1-2*(j%2)) * (1 + float32(l%3))
							}
						}
						k.quantize(xq[j*xstride:j*xstride+xrb], x)
						for i := 0; i < in; i += 64 {
							for l := 0; l < 32; l++ {
								xq[j*xstride+(i/32)*34+2+l] = byte(int8(127 * (1 - 2*(j%2))))
							}
						}
					}
					sc := make([]float32, 2*m*nb)
					actScales(sc, xq, xstride, 34, nb, m)
					dstride := rows + 2
					want, got := nanSlice(m*dstride), nanSlice(m*dstride)
					asmRowsM(f.avx2, m, 34, 34)(want, dstride, w, wb, rows, xq, xstride, sc, nb)
					asmRowsM(f.vnni, m, 34, 34)(got, dstride, w, wb, rows, xq, xstride, sc, nb)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("activation %d row %d: VNNI %v (%#08x), AVX2 %v (%#08x)", i/dstride, i%dstride,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
					for j := range m {
						for i := range rows {
							ref, tol := q80RefAbs(w[i*wb:], xq[j*xstride:], nb)
							if g := got[j*dstride+i]; math.Abs(float64(g)-ref) > tol {
								t.Errorf("activation %d row %d: VNNI %v, float64 %v (tolerance %g)", j, i, g, ref, tol)
							}
						}
						for i := rows; i < dstride; i++ {
							if g := got[j*dstride+i]; !math.IsNaN(float64(g)) {
								t.Errorf("activation %d: slot %d past the last row written (%v)", j, i, g)
							}
						}
					}
				})
			}
		}
	}
}

// q80RefAbs is q80Ref with the rounding bound taken over Σ|w·x| rather than
// |Σ w·x| (as q41RefAbs): the kernels round eight per-lane partial sums of a
// block before their horizontal sum, so a block whose products cancel has
// rounding error out of proportion to its sum.
func q80RefAbs(w, xq []byte, nb int) (ref, tol float64) {
	f16 := func(b []byte) float64 { return float64(quant.F16ToF32(binary.LittleEndian.Uint16(b))) }
	var mag float64
	for b := range nb {
		wb, xb := w[b*34:], xq[b*34:]
		var isum, iabs int64
		for j := range 32 {
			p := int64(int8(wb[2+j])) * int64(int8(xb[2+j]))
			isum += p
			iabs += max(p, -p)
		}
		dx := f16(wb) * f16(xb)
		ref += dx * float64(isum)
		mag += math.Abs(dx) * float64(iabs)
	}
	return ref, float64(nb+8) * 0x1p-23 * mag
}
