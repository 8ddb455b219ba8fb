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

// TestRowsSmallVNNI holds the two- and three-activation AVX-512 VNNI
// kernels (dotq41v2_amd64.s, dotq80v2_amd64.s) to the one-row kernel's
// bits: a speculative verify step's rows go through them, and a row's
// result may not depend on the rows beside it (design invariant 6). Block
// counts odd and even, activation and result strides with gaps (which must
// stay untouched, as must results past the last weight row), every weight
// row count through a pair and a 16-row tile, and blocks at the formats'
// extremes (TestQ4_1RowsMVNNI's and TestQ8_0RowsMVNNI's cases).
func TestRowsSmallVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(26, 2))
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
		k := quantKernels[dt]
		bb, wbb := k.actBlockBytes, dt.RowBytes(32)
		for m := 2; m <= 3; m++ {
			for _, in := range []int{32, 96, 608, 1536} {
				for _, gap := range []int{0, 1, 3} {
					for rows := 1; rows <= 17; rows++ {
						t.Run(fmt.Sprintf("%v/m%d/in%d/gap%d/rows%d", dt, m, in, gap, rows), func(t *testing.T) {
							nb := in / 32
							wb := dt.RowBytes(in) + gap*wbb
							w := make([]byte, rows*wb)
							for i := range rows {
								copy(w[i*wb:], mustQuantize(t, dt, randVec(r, in)))
							}
							extremeBlocks(r, dt, w, wb, rows, nb)
							xrb := nb * bb
							xstride := xrb + gap*bb
							xq := make([]byte, m*xstride)
							for j := range m {
								x := randVec(r, in)
								x[r.IntN(in)] = -40 * float32(j+1)
								for i := j % 2; i < in; i += 64 {
									x[i] = -x[i+1] * 1e3
								}
								k.quantize(xq[j*xstride:j*xstride+xrb], x)
							}
							sc := make([]float32, 2*m*nb)
							actScales(sc, xq, xstride, bb, nb, m)
							dstride := rows + gap
							got := nanSlice(m*dstride + 1)
							map[int]rowsMDot{2: k.rows2M, 3: k.rows3}[m](got, dstride, w, wb, rows, xq, xstride, sc, nb)
							want := make([]float32, rows)
							for j := range m {
								k.rows(want, w, wb, xq[j*xstride:], nb)
								for i := range dstride {
									g := got[j*dstride+i]
									if i >= rows {
										if !math.IsNaN(float64(g)) {
											t.Fatalf("activation %d: result %d past the last row written", j, i)
										}
										continue
									}
									if math.Float32bits(g) != math.Float32bits(want[i]) {
										t.Fatalf("activation %d row %d: %d-row kernel %v (%#08x), one-row %v (%#08x)", j, i, m,
											g, math.Float32bits(g), want[i], math.Float32bits(want[i]))
									}
								}
							}
							if !math.IsNaN(float64(got[m*dstride])) {
								t.Fatal("result past the last activation written")
							}
						})
					}
				}
			}
		}
	}
}

// extremeBlocks overwrites some of w's blocks with the cases the VNNI
// kernels' tricks must keep exact: Q4_1 all-15 and all-0 levels, negative
// scales and subnormal d and m; Q8_0 all −128 weights, mixed −128/0/127,
// negative and subnormal scales.
func extremeBlocks(r *rand.Rand, dt kernels.DType, w []byte, wb, rows, nb int) {
	for i := range rows {
		for b := range nb {
			switch dt {
			case kernels.Q4_1:
				blk := w[i*wb+b*20 : i*wb+b*20+20]
				switch (i + b) % 5 {
				case 1:
					for j := 4; j < 20; j++ {
						blk[j] = 0xff
					}
				case 2:
					clear(blk[4:])
				case 3:
					for j := 4; j < 20; j++ {
						blk[j] = byte(r.Uint32())
					}
					binary.LittleEndian.PutUint16(blk, quant.F32ToF16(-0.03))
					binary.LittleEndian.PutUint16(blk[2:], 0x8003)
				case 4:
					binary.LittleEndian.PutUint16(blk, 0x0001)
				}
			case kernels.Q8_0:
				blk := w[i*wb+b*34 : i*wb+b*34+34]
				switch (i + b) % 5 {
				case 1:
					for j := 2; j < 34; j++ {
						blk[j] = 0x80
					}
				case 2:
					for j := 2; j < 34; j++ {
						blk[j] = []byte{0x80, 0, 0x7f}[j%3]
					}
				case 3:
					binary.LittleEndian.PutUint16(blk, quant.F32ToF16(-0.02))
				case 4:
					binary.LittleEndian.PutUint16(blk, 0x0003)
				}
			}
		}
	}
}

// TestMatMulVerifyRows: matMul's grouping of 1..17 activation rows (and a
// second activation tile's worth) into kernels, padded groups included
// (the type's own padding, padding every remainder it can, and none), must
// leave each row's result the one it has alone, bit for bit, for the
// weight types with two- and three-row kernels or padding, odd block
// counts and output counts that end mid-tile.
func TestMatMulVerifyRows(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0, kernels.Q5_0} {
		k := quantKernels[dt]
		saved := k.pad
		defer func() { k.pad = saved }()
		for _, pad := range []padding{saved, {1, 1}, {}} {
			k.pad = pad
			for _, in := range []int{96, 608} {
				for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 34, 35, 39} {
					t.Run(fmt.Sprintf("%v/pad%d,%d/in%d/n%d", dt, pad.to8, pad.to4, in, n), func(t *testing.T) {
						batchInvariant(t, r, dt, n, in, 37)
					})
				}
			}
		}
	}
}

// BenchmarkRowsSmall times one call of each activation-row kernel over
// BenchmarkRowsKernels' L1-resident tile (16 weight rows of 576), the unit
// matMul's run works in: a tile stays in L1 while each group of activation
// rows passes over it, so a step's remainder rows cost these calls' compute.
// ns/op is per call; compare the ways to cover r rows (r = 3: rows3 or
// rows4 with a row discarded; 7: rows4 + rows3 or rows8).
func BenchmarkRowsSmall(b *testing.B) {
	if !useVNNI512 {
		b.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const rows, in = 16, 576
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
		k := quantKernels[dt]
		nb, wb := in/32, dt.RowBytes(in)
		w := mustQuantize(b, dt, randVec(r, rows*in))
		xrb := nb * k.actBlockBytes
		xq := make([]byte, 8*xrb)
		for j := range 8 {
			k.quantize(xq[j*xrb:(j+1)*xrb], randVec(r, in))
		}
		dst := make([]float32, 8*rows)
		sc := make([]float32, 16*nb)
		kern := map[int]rowsMDot{2: k.rows2M, 3: k.rows3, 4: k.rows4, 8: k.rows8}
		b.Run(dt.String()+"/rows1", func(b *testing.B) {
			for b.Loop() {
				k.rows(dst[:rows], w, wb, xq, nb)
			}
		})
		b.Run(dt.String()+"/rows2avx2", func(b *testing.B) {
			for b.Loop() {
				k.rows2(dst[:rows], dst[rows:2*rows], w, wb, xq, xq[xrb:], nb)
			}
		})
		for _, m := range []int{2, 3, 4, 8} {
			actScales(sc, xq, xrb, k.actBlockBytes, nb, m)
			b.Run(fmt.Sprintf("%v/rows%d", dt, m), func(b *testing.B) {
				for b.Loop() {
					kern[m](dst, rows, w, wb, rows, xq, xrb, sc[:2*m*nb], nb)
				}
			})
		}
	}
}
