package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowsM checks every four- and eight-activation kernel against the
// one-row kernel bit for bit: tiles of 1..17 weight rows (odd counts and
// lone tails), m different activation rows with outliers, results strided
// into a wider dst whose gaps must stay untouched.
func TestRowsM(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tested := 0
	for _, dt := range quantTypes {
		k := quantKernels[dt]
		for _, f := range []struct {
			m    int
			rows rowsMDot
		}{{4, k.rows4}, {8, k.rows8}} {
			if f.rows == nil {
				continue
			}
			tested++
			m := f.m
			for _, in := range []int{256, 576, 1536} {
				if in%dt.BlockElems() != 0 {
					continue
				}
				for _, rows := range []int{1, 2, 3, 5, 7, 13, 16, 17} {
					t.Run(fmt.Sprintf("%v/m%d/in%d/rows%d", dt, m, in, rows), func(t *testing.T) {
						nb := in / dt.BlockElems()
						wb := dt.RowBytes(in)
						w := mustQuantize(t, dt, randVec(r, rows*in))
						xrb := nb * k.actBlockBytes
						xstride := xrb + 2*k.actBlockBytes // rows not back to back
						xq := make([]byte, m*xstride)
						for j := range m {
							x := randVec(r, in)
							x[r.IntN(in)] = 30 * float32(j+1) // an outlier, as real activations have
							k.quantize(xq[j*xstride:j*xstride+xrb], x)
						}
						sc := make([]float32, 2*m*nb)
						actScales(sc, xq, xstride, k.actBlockBytes, nb, m)
						dstride := rows + 3
						dst := make([]float32, m*dstride)
						for i := range dst {
							dst[i] = float32(math.NaN())
						}
						f.rows(dst, dstride, w, wb, rows, xq, xstride, sc, nb)
						want := make([]float32, rows)
						for j := range m {
							k.rows(want, w, wb, xq[j*xstride:j*xstride+xrb], nb)
							for o := range rows {
								if got := dst[j*dstride+o]; got != want[o] {
									t.Fatalf("activation %d row %d: rows%d %v, rows %v", j, o, m, got, want[o])
								}
							}
							for o := rows; o < dstride && j*dstride+o < len(dst); o++ {
								if v := dst[j*dstride+o]; !math.IsNaN(float64(v)) {
									t.Fatalf("activation %d: wrote %v past the tile at %d", j, v, o)
								}
							}
						}
					})
				}
			}
		}
	}
	if tested == 0 {
		t.Skip("no multi-activation kernels on this build")
	}
}
