//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQ8_0RowsVNNI checks the AVX-512 VNNI Q8_0 kernels against the AVX2
// ones they replace, bit for bit, on the extremes the sign trick must get
// right (w = −128, 0, 127 and x = ±127) and on odd row counts, whose lone
// last row fills both halves of a zmm.
func TestQ8_0RowsVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q8_0]
	r := rand.New(rand.NewPCG(31, 32))
	for _, f := range []struct {
		m          int
		avx2, vnni rowsMKernel
	}{{4, dotQ8_0Q8_0Rows4, dotQ8_0Q8_0Rows4VNNI}, {8, dotQ8_0Q8_0Rows8, dotQ8_0Q8_0Rows8VNNI}} {
		m := f.m
		for _, in := range []int{32, 256, 1536} {
			for _, rows := range []int{1, 2, 3, 4, 7, 16, 17} {
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
					compareRowsM(t, r, k, m, 34, f.avx2, f.vnni, w, wb, rows, in)
				})
			}
		}
	}
}

// TestQ5_0RowsVNNI checks the AVX-512 VNNI Q5_0 kernels against the AVX2
// ones bit for bit, on blocks with every fifth bit set, none set and mixed
// (levels −16 and 15 among them), and on odd row counts.
func TestQ5_0RowsVNNI(t *testing.T) {
	if !useVNNI512 {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	k := quantKernels[kernels.Q5_0]
	r := rand.New(rand.NewPCG(33, 34))
	for _, f := range []struct {
		m          int
		avx2, vnni rowsMKernel
	}{{4, dotQ5_0Q8_0Rows4, dotQ5_0Q8_0Rows4VNNI}, {8, dotQ5_0Q8_0Rows8, dotQ5_0Q8_0Rows8VNNI}} {
		m := f.m
		for _, in := range []int{32, 640, 1536} {
			for _, rows := range []int{1, 2, 3, 4, 7, 16, 17} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb := in / 32
					wb := kernels.Q5_0.RowBytes(in)
					w := mustQuantize(t, kernels.Q5_0, randVec(r, rows*in))
					for i := 0; i < rows*nb; i++ {
						b := w[i*22 : i*22+22]
						switch i % 3 {
						case 0: // all levels ≥ 0, one at 15
							copy(b[2:6], []byte{0xff, 0xff, 0xff, 0xff})
							b[6+r.IntN(16)] |= 0x0f
						case 1: // all levels < 0, one at −16
							copy(b[2:6], []byte{0, 0, 0, 0})
							b[6+r.IntN(16)] &= 0xf0
						}
					}
					compareRowsM(t, r, k, m, 22, f.avx2, f.vnni, w, wb, rows, in)
				})
			}
		}
	}
}

// compareRowsM runs the AVX2 and VNNI forms of an m-activation kernel over
// rows weight rows of in inputs (w, wb bytes a row, wbb a block) against m
// random Q8_0 activations, one of them with an outlier, and fails on the
// first output whose bits differ.
func compareRowsM(t *testing.T, r *rand.Rand, k *quantKernel, m, wbb int, avx2, vnni rowsMKernel, w []byte, wb, rows, in int) {
	t.Helper()
	nb := in / 32
	xrb := nb * 34
	xstride := xrb + 34
	xq := make([]byte, m*xstride)
	for j := range m {
		x := randVec(r, in)
		x[r.IntN(in)] = -40 * float32(j+1)
		k.quantize(xq[j*xstride:j*xstride+xrb], x)
	}
	sc := make([]float32, 2*m*nb)
	actScales(sc, xq, xstride, 34, nb, m)
	dstride := rows + 2
	got, want := make([]float32, m*dstride), make([]float32, m*dstride)
	for i := range got {
		got[i], want[i] = float32(math.NaN()), float32(math.NaN())
	}
	asmRowsM(avx2, m, wbb, 34)(want, dstride, w, wb, rows, xq, xstride, sc, nb)
	asmRowsM(vnni, m, wbb, 34)(got, dstride, w, wb, rows, xq, xstride, sc, nb)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("activation %d row %d: VNNI %v, AVX2 %v", i/dstride, i%dstride, got[i], want[i])
		}
	}
}
