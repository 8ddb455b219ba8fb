//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

func init() {
	if useVNNI512 {
		testedLayouts = append(testedLayouts, &x16Layout)
	}
	if useAVX2 {
		testedLayouts = append(testedLayouts, &x8Layout)
	}
}

// TestGroupedKernels: every grouped kernel of every layout that runs here
// (Q4_1 and Q8_0, one to eight activations), over a matrix regrouped by
// packGrouped, gives groupedRef's bits for every row and activation, 0
// for the padded last group's rows, and writes nothing past its groups'
// outputs.
func TestGroupedKernels(t *testing.T) {
	if len(testedLayouts) == 0 {
		t.Skip("no grouped kernels on this CPU")
	}
	for _, l := range testedLayouts {
		for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
			testGroupedKernels(t, l, dt)
		}
	}
}

func testGroupedKernels(t *testing.T, l *groupedLayout, dt kernels.DType) {
	G := l.rows
	{
		qk := quantKernels[dt]
		r := rand.New(rand.NewPCG(26, 81))
		bb := qk.actBlockBytes
		for _, m := range []int{1, 2, 3, 4, 8} {
			for _, in := range []int{32, 96, 576, 1536} {
				for _, rows := range []int{1, 9, 16, 24, 37} {
					t.Run(fmt.Sprintf("g%d/%v/m%d/in%d/rows%d", G, dt, m, in, rows), func(t *testing.T) {
						nb, wb := in/32, dt.RowBytes(in)
						w := mustQuantize(t, dt, randVec(r, rows*in))
						extremeBlocks(r, dt, w, wb, rows, nb)
						g := packGrouped(dt, w, rows, nb, l)
						groups := (rows + G - 1) / G
						xq := make([]byte, m*nb*bb)
						for j := range m {
							x := randVec(r, in)
							x[r.IntN(in)] = -40 * float32(j+1)
							qk.quantize(xq[j*nb*bb:(j+1)*nb*bb], x)
						}
						sc := make([]float32, 2*m*nb)
						groupedScales(sc, xq, nb*bb, bb, nb, m)
						stride := G*groups + 3 // outputs of an activation, and three past them
						got := nanSlice(m * stride)
						l.kernels[dt][m](&g[0], nb, &xq[0], nb*bb, &sc[0], &got[0], 4*stride, groups)
						for j := range m {
							for o := range stride {
								v := got[j*stride+o]
								switch {
								case o >= G*groups:
									if !math.IsNaN(float64(v)) {
										t.Fatalf("activation %d: wrote %v at %d, past its %d groups", j, v, o, groups)
									}
								case o >= rows:
									if v != 0 {
										t.Fatalf("activation %d padding row %d: %v", j, o, v)
									}
								default:
									want := groupedRef(dt, w[o*wb:(o+1)*wb], xq[j*nb*bb:], nb)
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
}

// BenchmarkX16 times the file layout's kernel set and the grouped kernels
// of every layout that runs here (groupedG, G rows a group) as matMul
// hands them rows: a verify step's or small batch's activations (m > 1) a
// 16-row tile or a group at a time, one row's over the whole range; on a
// 16-row tile in L1, a 576×1536 matrix in L2 (SmolLM2's FFN down) and
// 64 MiB from memory. GB/s of weights read.
func BenchmarkX16(b *testing.B) {
	if len(testedLayouts) == 0 {
		b.Skip("no grouped kernels on this CPU")
	}
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
		b.Run(dt.String()+"/tile", func(b *testing.B) { benchX16(b, dt, 16, 576) })
		b.Run(dt.String()+"/64MiB", func(b *testing.B) { benchX16(b, dt, 64<<20/dt.RowBytes(576)/16*16, 576) })
		b.Run(dt.String()+"/in1536", func(b *testing.B) { benchX16(b, dt, 576, 1536) })
	}
}

func benchX16(b *testing.B, dt kernels.DType, rows, in int) {
	r := rand.New(rand.NewPCG(26, 84))
	file := quantKernels[dt]
	nb, wb, bb := in/32, dt.RowBytes(in), file.actBlockBytes
	w := mustQuantize(b, dt, randVec(r, rows*in))
	for _, m := range []int{1, 2, 3, 4, 8} {
		xq := make([]byte, m*nb*bb)
		for j := range m {
			file.quantize(xq[j*nb*bb:(j+1)*nb*bb], randVec(r, in))
		}
		sc, sx := make([]float32, 2*m*nb), make([]float32, 2*m*nb)
		actScales(sc, xq, nb*bb, bb, nb, m)
		groupedScales(sx, xq, nb*bb, bb, nb, m)
		dst := make([]float32, m*rows)
		b.Run(fmt.Sprintf("m%d/file", m), func(b *testing.B) {
			km := map[int]rowsMDot{2: file.rows2M, 3: file.rows3, 4: file.rows4, 8: file.rows8}[m]
			if m > 1 && km == nil {
				b.Skipf("no %d-row kernel for the file layout on this CPU", m)
			}
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
		for _, l := range testedLayouts {
			G := l.rows
			g := packGrouped(dt, w, rows, nb, l)
			b.Run(fmt.Sprintf("m%d/grouped%d", m, G), func(b *testing.B) {
				k := l.kernels[dt][m]
				for b.Loop() {
					if m == 1 {
						k(&g[0], nb, &xq[0], nb*bb, &sx[0], &dst[0], 4*rows, rows/G)
						continue
					}
					for o := 0; o < rows; o += G {
						k(&g[o*wb], nb, &xq[0], nb*bb, &sx[0], &dst[o], 4*rows, 1)
					}
				}
				b.ReportMetric(float64(rows*wb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
