//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQ8_0OffsetRows checks moe_amd64.s's kernels (1 to 8 activation rows) (activations offset by
// 128) against the one-row AVX2 kernel, bit for bit, on the extremes the
// offset must get right (w = −128, 0, 127; x = ±127) and on odd row counts,
// whose lone last row fills both halves of a zmm.
func TestQ8_0OffsetRows(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q8_0]
	one := asmRows(dotQ8_0Q8_0Rows, 34, 34)
	r := rand.New(rand.NewPCG(41, 42))
	for m := 1; m <= 8; m++ {
		for _, in := range []int{32, 256, 1024} {
			for _, rows := range []int{1, 2, 3, 7, 16, 17} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb := in / 32
					wb := kernels.Q8_0.RowBytes(in)
					w := mustQuantize(t, kernels.Q8_0, randVec(r, rows*in))
					for i := 0; i < rows*nb; i++ {
						q := w[i*34+2 : i*34+34]
						q[r.IntN(32)] = 0x80 // −128
						q[r.IntN(32)] = 0
						q[r.IntN(32)] = 127
					}
					xrb := nb * 34
					xstride := xrb + 34
					xq, xo := make([]byte, m*xstride), make([]byte, m*xstride)
					for j := range m {
						x := randVec(r, in)
						x[r.IntN(in)] = -40 * float32(j+1) // quantizes to −127
						x[r.IntN(in)] = 50 * float32(j+1)  // and 127 where it is the largest
						k.quantize(xq[j*xstride:j*xstride+xrb], x)
					}
					copy(xo, xq)
					for j := range m {
						moeOffset(xo[j*xstride : j*xstride+xrb])
					}
					sc := make([]float32, 2*m*nb)
					actScales(sc, xo, xstride, 34, nb, m)
					dstride := rows + 2
					got := make([]float32, m*dstride)
					for i := range got {
						got[i] = float32(math.NaN())
					}
					q8OffsetRows[m](got, dstride, w, wb, rows, xo, xstride, sc, nb)
					want := make([]float32, rows)
					for j := range m {
						one(want, w, wb, xq[j*xstride:j*xstride+xrb], nb)
						for o, v := range want {
							if g := got[j*dstride+o]; math.Float32bits(g) != math.Float32bits(v) {
								t.Fatalf("activation %d row %d: offset kernel %v, one-row kernel %v", j, o, g, v)
							}
						}
						for o := rows; o < dstride; o++ {
							if !math.IsNaN(float64(got[j*dstride+o])) {
								t.Fatalf("activation %d: wrote past row %d", j, rows)
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkQ8_0OffsetRows times moe_amd64.s's kernels as BenchmarkRowsKernels
// times the others (16 weight rows of 576, eight activation rows a call
// round, weights in L1): GFLOP per CPU-second comparable with its Q8_0 rows,
// rows2, rows4 and rows8.
func BenchmarkQ8_0OffsetRows(b *testing.B) {
	if !useVNNI512 {
		b.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const rows, in = 16, 576
	k := quantKernels[kernels.Q8_0]
	nb, wb := in/32, kernels.Q8_0.RowBytes(in)
	w := mustQuantize(b, kernels.Q8_0, randVec(r, rows*in))
	xrb := nb * 34
	xq := make([]byte, 8*xrb)
	for j := range 8 {
		k.quantize(xq[j*xrb:(j+1)*xrb], randVec(r, in))
	}
	moeOffset(xq)
	dst := make([]float32, 8*rows)
	for m := 1; m <= 8; m++ {
		groups := 8 / m
		sc := make([]float32, 2*nb*m*groups)
		for g := range groups {
			actScales(sc[2*nb*m*g:], xq[g*m*xrb:], xrb, 34, nb, m)
		}
		b.Run(fmt.Sprintf("rows%d", m), func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				for g := range groups {
					q8OffsetRows[m](dst[g*m*rows:], rows, w, wb, rows, xq[g*m*xrb:], xrb, sc[2*nb*m*g:], nb)
				}
			}
			reportFlops(b, float64(2*groups*m*rows*in), processCPU()-cpu0)
		})
	}
}
