package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// testedLayouts are the grouped layouts whose kernels run on this CPU
// (x16pack_amd64_test.go adds them), each tested whether or not it is the
// one Upload picks.
var testedLayouts []*groupedLayout

// withLayout runs f with Upload grouping into l.
func withLayout(l *groupedLayout, f func()) {
	old := grouped
	grouped = l
	defer func() { grouped = old }()
	f()
}

// groupedRef is the grouped kernels' arithmetic for one canonical row w of nb
// Q4_1 or Q8_0 blocks against one activation row x (Q8_1 or Q8_0), in
// Go: per block the exact Σ q·a, then acc = fma(Σ, d·dx, acc) and, for
// Q4_1, acc = fma(m, s, acc), each rounded to float32 once (the float64
// FMA of these float32 operands is exact before its rounding: the
// products have at most 48 bits).
func groupedRef(dt kernels.DType, w, x []byte, nb int) float32 {
	half := func(b []byte) float32 { return quant.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	bb := dt.BlockBytes()
	var acc float32
	for b := range nb {
		blk := w[b*bb:]
		var sum int32
		switch dt {
		case kernels.Q4_1:
			xb := x[b*quant.Q8_1BlockBytes:]
			for i := range 16 {
				q := blk[4+i]
				sum += int32(q&15)*int32(int8(xb[4+i])) + int32(q>>4)*int32(int8(xb[20+i]))
			}
			acc = float32(math.FMA(float64(sum), float64(half(blk)*half(xb)), float64(acc)))
			acc = float32(math.FMA(float64(half(blk[2:])), float64(half(xb[2:])), float64(acc)))
		case kernels.Q8_0:
			xb := x[b*quant.Q8_0BlockBytes:]
			for i := range 32 {
				sum += int32(int8(blk[2+i])) * int32(int8(xb[2+i]))
			}
			acc = float32(math.FMA(float64(sum), float64(half(blk)*half(xb)), float64(acc)))
		}
	}
	return acc
}

// TestGroupedRegroup: groupedRow undoes packGrouped for every row of both
// types in groups of 8 and 16, and the padding rows are zero blocks.
func TestGroupedRegroup(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 82))
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
		for _, c := range []struct {
			rows int
			l    *groupedLayout
		}{{1, &x16Layout}, {7, &x16Layout}, {16, &x16Layout}, {21, &x16Layout}, {32, &x16Layout}, {1, &x8Layout}, {7, &x8Layout}, {8, &x8Layout}, {21, &x8Layout}, {32, &x8Layout}} {
			rows, G := c.rows, c.l.rows
			nb := 3
			wb := nb * dt.BlockBytes()
			w := make([]byte, rows*wb)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			g := packGrouped(dt, w, rows, nb, c.l)
			if want := (rows + G - 1) / G * G * wb; len(g) != want {
				t.Fatalf("%v rows %d in %d: %d bytes, want %d", dt, rows, G, len(g), want)
			}
			if rows >= G && bytes.Equal(g[:G*wb], w[:G*wb]) {
				t.Fatalf("%v rows %d in %d: packGrouped left the first group as it was", dt, rows, G)
			}
			row := make([]byte, wb)
			for i := range len(g) / wb {
				groupedRow(dt, row, g, nb, i, c.l)
				want := make([]byte, wb)
				if i < rows {
					want = w[i*wb : (i+1)*wb]
				}
				if !bytes.Equal(row, want) {
					t.Fatalf("%v rows %d in %d: row %d regrouped differs", dt, rows, G, i)
				}
			}
		}
	}
}

// TestGroupedBackend: a backend that regroups its Q4_1 and Q8_0 matrices,
// into every layout whose kernels run here, gives, on 1 and 2 threads,
// for every MatMul and MatMuls (whose chunks start and end inside groups
// when a weight's rows are not a multiple of the group's): generated rows
// (and on CPUs without tiles prompt rows) groupedRef's bits whatever rows
// share the batch (design invariant 6), within rounding of the file
// layout's kernels; tiled prompt rows and GetRows the file layout's
// backend's bits.
func TestGroupedBackend(t *testing.T) {
	if len(testedLayouts) == 0 {
		t.Skip("no grouped kernels on this CPU")
	}
	for _, l := range testedLayouts {
		for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
			t.Run(fmt.Sprintf("g%d/%v", l.rows, dt), func(t *testing.T) {
				withLayout(l, func() { testGroupedBackend(t, dt, l) })
			})
		}
	}
}

func testGroupedBackend(t *testing.T, dt kernels.DType, l *groupedLayout) {
	r := rand.New(rand.NewPCG(26, 83))
	const in = 576
	nb := in / 32
	outs := []int{72, 13, 40}
	qk := quantKernels[dt]
	for _, threads := range []int{1, 2} {
		grouped, file := New(threads), New(threads)
		file.KeepFileLayout()
		t.Cleanup(func() { grouped.Close(); file.Close() })
		var gw, fw []kernels.Tensor
		var data [][]byte
		for _, out := range outs {
			d := mustQuantize(t, dt, randVec(r, out*in))
			h := kernels.HostTensor{Name: "w", DType: dt, Shape: []int{out, in}, Data: d}
			g, err := grouped.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			f, err := file.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			if g.(*tensor).layout != l || f.(*tensor).layout != nil {
				t.Fatalf("out %d: grouped in %v, file layout in %v", out, g.(*tensor).layout, f.(*tensor).layout)
			}
			gw, fw, data = append(gw, g), append(fw, f), append(data, d)
		}
		for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 33} {
			for _, prompt := range []bool{false, true} {
				t.Run(fmt.Sprintf("t%d/n%d/prompt=%v", threads, n, prompt), func(t *testing.T) {
					xv := randVec(r, n*in)
					flags := make([]bool, n)
					flags[n/2] = prompt
					results := func(b *Backend, ws []kernels.Tensor) [][]float32 {
						b.SetPromptRows(flags)
						defer b.SetPromptRows(nil)
						x := scratch(t, b, xv, n, in)
						var dsts []kernels.Tensor
						var out [][]float32
						for i, w := range ws {
							d := scratch(t, b, nil, n, outs[i])
							if err := b.MatMul(d, x, w, nil, n); err != nil {
								t.Fatal(err)
							}
							out = append(out, d.(*tensor).f32)
							dsts = append(dsts, scratch(t, b, nil, n, outs[i]))
						}
						if err := b.MatMuls(dsts, x, ws, nil, n); err != nil {
							t.Fatal(err)
						}
						for _, d := range dsts {
							out = append(out, d.(*tensor).f32)
						}
						return out
					}
					g, f := results(grouped, gw), results(file, fw)
					xq := make([]byte, nb*qk.actBlockBytes)
					for i := range g {
						out := outs[i%len(outs)]
						for j := range g[i] {
							row, o := j/out, j%out
							gv, fv := g[i][j], f[i][j]
							if flags[row] && tiledPrompt(dt) {
								if math.Float32bits(gv) != math.Float32bits(fv) {
									t.Fatalf("result %d prompt row %d [%d]: grouped %v, file layout %v", i, row, o, gv, fv)
								}
								continue
							}
							qk.quantize(xq, xv[row*in:(row+1)*in])
							w := data[i%len(outs)]
							want := groupedRef(dt, w[o*dt.RowBytes(in):], xq, nb)
							if math.Float32bits(gv) != math.Float32bits(want) {
								t.Fatalf("result %d row %d [%d]: grouped %v, want %v", i, row, o, gv, want)
							}
							if math.Abs(float64(gv-fv)) > 1e-4*(1+math.Abs(float64(fv))) {
								t.Fatalf("result %d row %d [%d]: grouped %v, file layout %v", i, row, o, gv, fv)
							}
						}
					}
				})
			}
		}
		ids := []int32{0, 7, 15, 16, 71}
		gr, fr := scratch(t, grouped, nil, len(ids), in), scratch(t, file, nil, len(ids), in)
		if err := grouped.GetRows(gr, gw[0], ids); err != nil {
			t.Fatal(err)
		}
		if err := file.GetRows(fr, fw[0], ids); err != nil {
			t.Fatal(err)
		}
		for j, v := range gr.(*tensor).f32 {
			if math.Float32bits(v) != math.Float32bits(fr.(*tensor).f32[j]) {
				t.Fatalf("GetRows [%d]: grouped %v, file layout %v", j, v, fr.(*tensor).f32[j])
			}
		}
		if a := testing.AllocsPerRun(10, func() { grouped.GetRows(gr, gw[0], ids) }); a != 0 {
			t.Errorf("GetRows of a grouped matrix: %v allocations a call", a)
		}
	}
}
