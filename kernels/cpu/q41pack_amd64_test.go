//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQ41x16Kernels: every grouped kernel (one to eight activations), over
// a matrix regrouped by packQ41x16, gives q41x16Ref's bits for every row
// and activation, the padded last group's rows included, and writes
// nothing past its groups' outputs.
func TestQ41x16Kernels(t *testing.T) {
	if q41x16Kernels[1] == nil {
		t.Skip("no grouped Q4_1 kernels on this CPU")
	}
	file := quantKernels[kernels.Q4_1]
	r := rand.New(rand.NewPCG(26, 81))
	bb := file.actBlockBytes
	for _, m := range []int{1, 2, 3, 4, 8} {
		for _, in := range []int{32, 96, 576, 1536} {
			for _, rows := range []int{1, 9, 16, 24, 37} {
				t.Run(fmt.Sprintf("m%d/in%d/rows%d", m, in, rows), func(t *testing.T) {
					nb, wb := in/32, kernels.Q4_1.RowBytes(in)
					w := mustQuantize(t, kernels.Q4_1, randVec(r, rows*in))
					extremeBlocks(r, kernels.Q4_1, w, wb, rows, nb)
					g := packQ41x16(w, rows, nb)
					groups := (rows + 15) / 16
					xq := make([]byte, m*nb*bb)
					for j := range m {
						x := randVec(r, in)
						x[r.IntN(in)] = -40 * float32(j+1)
						file.quantize(xq[j*nb*bb:(j+1)*nb*bb], x)
					}
					sc := make([]float32, 2*m*nb)
					actScales(sc, xq, nb*bb, bb, nb, m)
					stride := 16*groups + 3 // outputs of an activation, and three past them
					got := nanSlice(m * stride)
					q41x16Kernels[m](&g[0], nb, &xq[0], nb*bb, &sc[0], &got[0], 4*stride, groups)
					for j := range m {
						for o := range stride {
							v := got[j*stride+o]
							switch {
							case o >= 16*groups:
								if !math.IsNaN(float64(v)) {
									t.Fatalf("activation %d: wrote %v at %d, past its %d groups", j, v, o, groups)
								}
							case o >= rows:
								if v != 0 {
									t.Fatalf("activation %d padding row %d: %v", j, o, v)
								}
							default:
								want := q41x16Ref(w[o*wb:(o+1)*wb], xq[j*nb*bb:], nb)
								if math.Float32bits(v) != math.Float32bits(want) {
									t.Fatalf("activation %d row %d: %v (%#08x), want %v (%#08x)",
										j, o, v, math.Float32bits(v), want, math.Float32bits(want))
								}
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkQ41Grouped times the file layout's kernel set and the grouped
// kernels as matMul hands them rows: a verify step's or small batch's
// activations (m > 1) a 16-row tile at a time, one row's over the whole
// range; on a 16-row tile in L1, a 576×1536 matrix in L2 (SmolLM2's FFN
// down) and 64 MiB from memory. GB/s of weights read.
func BenchmarkQ41Grouped(b *testing.B) {
	if q41x16Kernels[1] == nil {
		b.Skip("no grouped Q4_1 kernels on this CPU")
	}
	b.Run("tile", func(b *testing.B) { benchQ41Grouped(b, 16, 576) })
	b.Run("64MiB", func(b *testing.B) { benchQ41Grouped(b, 64<<20/kernels.Q4_1.RowBytes(576)/16*16, 576) })
	b.Run("in1536", func(b *testing.B) { benchQ41Grouped(b, 576, 1536) })
}

func benchQ41Grouped(b *testing.B, rows, in int) {
	r := rand.New(rand.NewPCG(26, 84))
	nb, wb, bb := in/32, kernels.Q4_1.RowBytes(in), quantKernels[kernels.Q4_1].actBlockBytes
	w := mustQuantize(b, kernels.Q4_1, randVec(r, rows*in))
	g := packQ41x16(w, rows, nb)
	file := quantKernels[kernels.Q4_1]
	for _, m := range []int{1, 2, 3, 4, 8} {
		xq := make([]byte, m*nb*bb)
		for j := range m {
			file.quantize(xq[j*nb*bb:(j+1)*nb*bb], randVec(r, in))
		}
		sc := make([]float32, 2*m*nb)
		actScales(sc, xq, nb*bb, bb, nb, m)
		dst := make([]float32, m*rows)
		b.Run(fmt.Sprintf("m%d/file", m), func(b *testing.B) {
			km := map[int]rowsMDot{2: file.rows2M, 3: file.rows3, 4: file.rows4, 8: file.rows8}[m]
			for b.Loop() {
				if m == 1 {
					file.rows(dst[:rows], w, wb, xq, nb)
					continue
				}
				for o := 0; o < rows; o += 16 {
					km(dst[o:], rows, w[o*wb:], wb, 16, xq, nb*bb, sc, nb)
				}
			}
			b.ReportMetric(float64(rows*wb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		b.Run(fmt.Sprintf("m%d/grouped", m), func(b *testing.B) {
			k := q41x16Kernels[m]
			for b.Loop() {
				if m == 1 {
					k(&g[0], nb, &xq[0], nb*bb, &sc[0], &dst[0], 4*rows, rows/16)
					continue
				}
				for o := 0; o < rows; o += 16 {
					k(&g[o*wb], nb, &xq[0], nb*bb, &sc[0], &dst[o], 4*rows, 1)
				}
			}
			b.ReportMetric(float64(rows*wb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
