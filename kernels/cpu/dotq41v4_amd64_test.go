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

// TestQ4_1RowsMVNNI checks the AVX-512 VNNI four- and eight-activation Q4_1
// kernels against the AVX2 ones bit for bit (which match the one-row
// kernel: batch invariance and greedy identity under speculation rest on
// it), and against a float64 dot within f32 rounding. Blocks include
// all-fifteen and all-zero levels, negative scales, subnormal d and m, and
// activations at ±127; row counts cover the lone last row of a pair (which
// fills both halves of a zmm) and results past the last row and between
// activation rows must stay untouched.
func TestQ4_1RowsMVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q4_1]
	r := rand.New(rand.NewPCG(26, 48))
	for _, f := range []struct {
		m          int
		avx2, vnni rowsMKernel
	}{{4, dotQ4_1Q8_1Rows4, dotQ4_1Q8_1Rows4VNNI}, {8, dotQ4_1Q8_1Rows8, dotQ4_1Q8_1Rows8VNNI}} {
		m := f.m
		for _, in := range []int{32, 96, 576, 1536} {
			for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 16, 17} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb := in / 32
					wb := kernels.Q4_1.RowBytes(in)
					w := mustQuantize(t, kernels.Q4_1, randVec(r, rows*in))
					for b := 0; b < rows*nb; b++ {
						blk := w[b*20 : b*20+20]
						switch b % 5 {
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
							binary.LittleEndian.PutUint16(blk[2:], 0x8003)
						case 4: // subnormal d
							binary.LittleEndian.PutUint16(blk, 0x0001)
						}
					}
					xrb := nb * 36
					xstride := xrb + 36
					xq := make([]byte, m*xstride)
					for j := range m {
						x := randVec(r, in)
						x[r.IntN(in)] = -40 * float32(j+1) // quants at -127 in that block
						for i := j % 2; i < in; i += 64 {
							x[i] = -x[i+1] * 1e3 // and at ±127 elsewhere
						}
						k.quantize(xq[j*xstride:j*xstride+xrb], x)
					}
					sc := make([]float32, 2*m*nb)
					actScales(sc, xq, xstride, 36, nb, m)
					dstride := rows + 2
					want, got := nanSlice(m*dstride), nanSlice(m*dstride)
					asmRowsM(f.avx2, m, 20, 36)(want, dstride, w, wb, rows, xq, xstride, sc, nb)
					asmRowsM(f.vnni, m, 20, 36)(got, dstride, w, wb, rows, xq, xstride, sc, nb)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("activation %d row %d: VNNI %v (%#08x), AVX2 %v (%#08x)", i/dstride, i%dstride,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
					for j := range m {
						for i := range rows {
							ref, tol := q41RefAbs(w[i*wb:], xq[j*xstride:], nb)
							if g := got[j*dstride+i]; math.Abs(float64(g)-ref) > tol {
								t.Errorf("activation %d row %d: VNNI %v, float64 %v (tolerance %g)", j, i, g, ref, tol)
							}
						}
					}
				})
			}
		}
	}
}

// q41RefAbs is q41Ref with the rounding bound taken over Σ|level·quant|
// rather than |Σ level·quant|: the kernels round partial sums (eight lanes
// per block, then their horizontal sum), and an activation block with
// quants at both +127 and -127 can cancel most of a block's sum.
func q41RefAbs(w, xq []byte, nb int) (ref, tol float64) {
	f16 := func(b []byte) float64 { return float64(quant.F16ToF32(binary.LittleEndian.Uint16(b))) }
	var mag float64
	for b := range nb {
		wb, xb := w[b*20:], xq[b*36:]
		var isum, iabs int64
		for j := range 16 {
			lo := int64(wb[4+j]&0xf) * int64(int8(xb[4+j]))
			hi := int64(wb[4+j]>>4) * int64(int8(xb[20+j]))
			isum += lo + hi
			iabs += max(lo, -lo) + max(hi, -hi)
		}
		dx := f16(wb) * f16(xb)
		ms := f16(wb[2:]) * f16(xb[2:])
		ref += dx*float64(isum) + ms
		mag += math.Abs(dx)*float64(iabs) + math.Abs(ms)
	}
	return ref, float64(nb+8) * 0x1p-23 * mag
}
