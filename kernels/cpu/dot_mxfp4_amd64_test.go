//go:build amd64 && !noasm

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels/quant"
)

// TestMXFP4RowsVNNI: the AVX-512 VNNI kernel gives the AVX2 kernel's bits
// for every row, over 1 to 11 rows (its four-row, pair and single loops),
// 1 to 90 blocks, a row stride past the blocks, and all 256 exponents
// against activations small enough that no sum overflows (TestMXFP4Rows
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
