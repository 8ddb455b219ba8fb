//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestMXFP4RowsVNNI: the AVX-512 VNNI kernel gives the AVX2 kernel's bits
// for every row, over 1 to 11 rows (its four-row, pair and single loops),
// 1 to 90 blocks, a row stride past the blocks, and random exponents over
// all 256 (255 included: the kernels read it as 2^127, not as NaN) against
// small activations; a sum that overflows must overflow alike (TestMXFP4Rows
// checks the values against the plain-Go reference).
func TestMXFP4RowsVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(25, 5))
	for _, nb := range []int{1, 2, 3, 90} {
		for rows := 1; rows <= 11; rows++ {
			wstride := nb*quant.MXFP4BlockBytes + r.IntN(2)*3
			w := make([]byte, rows*wstride)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			xf := make([]float32, nb*32)
			for i := range xf {
				xf[i] = float32(r.NormFloat64() * 1e-4)
			}
			xq := make([]byte, nb*quant.Q8_0BlockBytes)
			quant.ActQ8_0(xq, xf)
			got, want := make([]float32, rows), make([]float32, rows)
			dotMXFP4Q8_0RowsVNNI(&w[0], wstride, &xq[0], nb, &got[0], rows)
			dotMXFP4Q8_0Rows(&w[0], wstride, &xq[0], nb, &want[0], rows)
			for i := range rows {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("nb %d rows %d row %d: VNNI %g, AVX2 %g", nb, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// TestMXFP4Rows4VNNI: the four-activation-row kernel, and rows4 (which takes
// it from 8 blocks a row), give every product the one-row kernel's bits, over 1 to 11 weight rows (its pairs and a lone last
// row), 1 to 90 blocks, row strides past the blocks, random exponents over
// all 256.
func TestMXFP4Rows4VNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI")
	}
	k := quantKernels[kernels.MXFP4]
	r := rand.New(rand.NewPCG(25, 6))
	for _, nb := range []int{1, 2, 3, 8, 90} {
		for rows := 1; rows <= 11; rows++ {
			wstride := nb*quant.MXFP4BlockBytes + r.IntN(2)*3
			w := make([]byte, rows*wstride)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			xstride := nb*quant.Q8_0BlockBytes + r.IntN(2)*34
			xq := make([]byte, 4*xstride)
			xf := make([]float32, nb*32)
			for j := range 4 {
				for i := range xf {
					xf[i] = float32(r.NormFloat64() * 1e-4)
				}
				k.quantize(xq[j*xstride:], xf)
			}
			sc := make([]float32, 2*4*nb)
			actScales(sc, xq, xstride, quant.Q8_0BlockBytes, nb, 4)
			dstride := rows + 3
			got := make([]float32, 4*dstride)
			asmRowsM(dotMXFP4Q8_0Rows4VNNI, 4, quant.MXFP4BlockBytes, quant.Q8_0BlockBytes)(got, dstride, w, wstride, rows, xq, xstride, sc, nb)
			via := make([]float32, 4*dstride)
			k.rows4(via, dstride, w, wstride, rows, xq, xstride, sc, nb)
			for j := range 4 {
				want := make([]float32, rows)
				k.rows(want, w, wstride, xq[j*xstride:], nb)
				for i := range rows {
					if g := got[j*dstride+i]; math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("nb %d rows %d: activation %d row %d: %g, one-row kernel %g", nb, rows, j, i, g, want[i])
					}
					if g := via[j*dstride+i]; math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("nb %d rows %d: activation %d row %d: rows4 %g, one-row kernel %g", nb, rows, j, i, g, want[i])
					}
				}
			}
		}
	}
}

// BenchmarkMXFP4Rows4: 64 MXFP4 weight rows against four activation rows,
// through the four-row kernel or the one-row kernel four times, at the
// tiny models' width (2 blocks) and gpt-oss's (90).
func BenchmarkMXFP4Rows4(b *testing.B) {
	if !useVNNI512 {
		b.Skip("no AVX-512 VNNI")
	}
	k := quantKernels[kernels.MXFP4]
	r := rand.New(rand.NewPCG(3, 4))
	const rows = 64
	for _, nb := range []int{2, 90} {
		wstride, xstride := nb*quant.MXFP4BlockBytes, nb*quant.Q8_0BlockBytes
		w := make([]byte, rows*wstride)
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for i := 0; i < len(w); i += quant.MXFP4BlockBytes {
			w[i] = 120
		}
		xq := make([]byte, 4*xstride)
		xf := make([]float32, nb*32)
		for j := range 4 {
			for i := range xf {
				xf[i] = float32(r.NormFloat64())
			}
			k.quantize(xq[j*xstride:], xf)
		}
		sc := make([]float32, 2*4*nb)
		actScales(sc, xq, xstride, quant.Q8_0BlockBytes, nb, 4)
		dst := make([]float32, 4*rows)
		k4 := asmRowsM(dotMXFP4Q8_0Rows4VNNI, 4, quant.MXFP4BlockBytes, quant.Q8_0BlockBytes)
		b.Run(fmt.Sprintf("rows4/nb%d", nb), func(b *testing.B) {
			for b.Loop() {
				k4(dst, rows, w, wstride, rows, xq, xstride, sc, nb)
			}
		})
		b.Run(fmt.Sprintf("rows1x4/nb%d", nb), func(b *testing.B) {
			for b.Loop() {
				for j := range 4 {
					k.rows(dst[j*rows:(j+1)*rows], w, wstride, xq[j*xstride:], nb)
				}
			}
		})
	}
}
