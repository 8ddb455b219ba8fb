//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQ41GroupedKernels: every kernel of the grouped set, over a matrix
// regrouped by packQ41, gives the file layout's kernel's bits for every
// row, for one to eight activations, whole groups and the rows past them,
// and writes nothing past its last row or activation.
func TestQ41GroupedKernels(t *testing.T) {
	if q41x8Kernels == nil {
		t.Skip("no grouped Q4_1 kernels on this CPU")
	}
	file, grouped := quantKernels[kernels.Q4_1], q41x8Kernels
	r := rand.New(rand.NewPCG(26, 81))
	bb := file.actBlockBytes
	for _, m := range []int{1, 2, 3, 4, 8} {
		for _, in := range []int{32, 96, 576, 1536} {
			for _, rows := range []int{8, 9, 15, 16, 24, 37} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb := in / 32
					wb := kernels.Q4_1.RowBytes(in)
					w := mustQuantize(t, kernels.Q4_1, randVec(r, rows*in))
					extremeBlocks(r, kernels.Q4_1, w, wb, rows, nb)
					g := packQ41(w, rows, nb)
					xq := make([]byte, m*nb*bb)
					for j := range m {
						x := randVec(r, in)
						x[r.IntN(in)] = -40 * float32(j+1)
						file.quantize(xq[j*nb*bb:(j+1)*nb*bb], x)
					}
					sc := make([]float32, 2*m*nb)
					actScales(sc, xq, nb*bb, bb, nb, m)
					want, got := nanSlice(m*rows+1), nanSlice(m*rows+1)
					run := func(k *quantKernel, dst []float32, w []byte) {
						if m == 1 {
							k.rows(dst[:rows], w, wb, xq, nb)
							return
						}
						km := map[int]rowsMDot{2: k.rows2M, 3: k.rows3, 4: k.rows4, 8: k.rows8}[m]
						km(dst, rows, w, wb, rows, xq, nb*bb, sc, nb)
					}
					run(file, want, w)
					run(grouped, got, g)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("activation %d row %d: grouped %v (%#08x), file layout %v (%#08x)",
								i/rows, i%rows, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				})
			}
		}
	}
}

// BenchmarkQ41Grouped times each kernel of the file layout's set and the
// grouped set over the 16-row tiles of a 576-column matrix (SmolLM2's),
// as matMul hands a verify step or a small batch to them: one tile, in
// cache, and 64 MiB of them, from memory.
func BenchmarkQ41Grouped(b *testing.B) {
	if q41x8Kernels == nil {
		b.Skip("no grouped Q4_1 kernels on this CPU")
	}
	b.Run("tile", func(b *testing.B) { benchQ41Grouped(b, 16) })
	b.Run("64MiB", func(b *testing.B) { benchQ41Grouped(b, 64<<20/kernels.Q4_1.RowBytes(576)/16*16) })
	b.Run("in1536", func(b *testing.B) { benchQ41GroupedIn(b, 576, 1536) })
}

func benchQ41Grouped(b *testing.B, rows int) {
	benchQ41GroupedIn(b, rows, 576)
}

func benchQ41GroupedIn(b *testing.B, rows, in int) {
	r := rand.New(rand.NewPCG(26, 84))

	nb, wb, bb := in/32, kernels.Q4_1.RowBytes(in), quantKernels[kernels.Q4_1].actBlockBytes
	w := mustQuantize(b, kernels.Q4_1, randVec(r, rows*in))
	g := packQ41(w, rows, nb)
	for _, m := range []int{1, 2, 3, 4, 8} {
		xq := make([]byte, m*nb*bb)
		for j := range m {
			quantKernels[kernels.Q4_1].quantize(xq[j*nb*bb:(j+1)*nb*bb], randVec(r, in))
		}
		sc := make([]float32, 2*m*nb)
		actScales(sc, xq, nb*bb, bb, nb, m)
		dst := make([]float32, m*rows)
		for _, c := range []struct {
			name string
			k    *quantKernel
			w    []byte
		}{{"file", quantKernels[kernels.Q4_1], w}, {"grouped", q41x8Kernels, g}} {
			b.Run(fmt.Sprintf("m%d/%s", m, c.name), func(b *testing.B) {
				km := map[int]rowsMDot{2: c.k.rows2M, 3: c.k.rows3, 4: c.k.rows4, 8: c.k.rows8}[m]
				for b.Loop() {
					for o := 0; o < rows; o += 16 {
						if m == 1 {
							c.k.rows(dst[o:o+16], c.w[o*wb:], wb, xq, nb)
							continue
						}
						km(dst[o:], rows, c.w[o*wb:], wb, 16, xq, nb*bb, sc, nb)
					}
				}
				b.ReportMetric(float64(rows*wb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
