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

// q41x16Ref is the grouped kernels' arithmetic for one canonical row w of
// nb Q4_1 blocks against one Q8_1 activation row x, in Go: per block the
// exact Σ q·a, then acc = fma(Σ, d·dx, acc) and acc = fma(m, s, acc), each
// rounded to float32 once (the float64 FMA of float32 operands is exact
// before its rounding, the products having at most 48 bits).
func q41x16Ref(w, x []byte, nb int) float32 {
	half := func(b []byte) float32 { return quant.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	var acc float32
	for b := range nb {
		blk, xb := w[b*q41Block:], x[b*quant.Q8_1BlockBytes:]
		var sum int32
		for i := range 16 {
			q := blk[4+i]
			sum += int32(q&15)*int32(int8(xb[4+i])) + int32(q>>4)*int32(int8(xb[20+i]))
		}
		acc = float32(math.FMA(float64(sum), float64(half(blk)*half(xb)), float64(acc)))
		acc = float32(math.FMA(float64(half(blk[2:])), float64(half(xb[2:])), float64(acc)))
	}
	return acc
}

// TestQ41Regroup: q41x16Row undoes packQ41x16 for every row, and the
// padding rows are zero.
func TestQ41Regroup(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 82))
	for _, rows := range []int{1, 7, 16, 21, 32} {
		nb := 3
		wb := nb * q41Block
		w := make([]byte, rows*wb)
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		g := packQ41x16(w, rows, nb)
		if want := (rows + 15) / 16 * 16 * wb; len(g) != want {
			t.Fatalf("rows %d: %d bytes, want %d", rows, len(g), want)
		}
		if rows >= 16 && bytes.Equal(g[:16*wb], w[:16*wb]) {
			t.Fatalf("rows %d: packQ41x16 left the first group as it was", rows)
		}
		row := make([]byte, wb)
		for i := range len(g) / wb {
			q41x16Row(row, g, nb, i)
			want := make([]byte, wb)
			if i < rows {
				want = w[i*wb : (i+1)*wb]
			}
			if !bytes.Equal(row, want) {
				t.Fatalf("rows %d: row %d regrouped differs", rows, i)
			}
		}
	}
}

// TestQ41GroupedBackend: a backend that regroups its Q4_1 matrices gives,
// on 1 and 2 threads, for every MatMul and MatMuls (whose chunks start and
// end inside groups when a weight's rows are not a multiple of sixteen):
// generated rows q41x16Ref's bits whatever rows share the batch (design
// invariant 6), within rounding of the file layout's kernels; prompt rows
// (tiled) and GetRows the file layout's backend's bits.
func TestQ41GroupedBackend(t *testing.T) {
	if q41x16Kernels[1] == nil {
		t.Skip("Q4_1 matrices are not regrouped on this CPU")
	}
	r := rand.New(rand.NewPCG(26, 83))
	const in = 576
	nb := in / 32
	outs := []int{72, 13, 40}
	qk := quantKernels[kernels.Q4_1]
	for _, threads := range []int{1, 2} {
		grouped, file := New(threads), New(threads)
		file.KeepFileLayout()
		t.Cleanup(func() { grouped.Close(); file.Close() })
		var gw, fw []kernels.Tensor
		var data [][]byte
		for _, out := range outs {
			d := mustQuantize(t, kernels.Q4_1, randVec(r, out*in))
			h := kernels.HostTensor{Name: "w", DType: kernels.Q4_1, Shape: []int{out, in}, Data: d}
			g, err := grouped.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			f, err := file.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			if !g.(*tensor).q41x16 || f.(*tensor).q41x16 {
				t.Fatalf("out %d: grouped %v, file layout %v", out, g.(*tensor).q41x16, f.(*tensor).q41x16)
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
							if flags[row] {
								if math.Float32bits(gv) != math.Float32bits(fv) {
									t.Fatalf("result %d prompt row %d [%d]: grouped %v, file layout %v", i, row, o, gv, fv)
								}
								continue
							}
							qk.quantize(xq, xv[row*in:(row+1)*in])
							w := data[i%len(outs)]
							want := q41x16Ref(w[o*kernels.Q4_1.RowBytes(in):], xq, nb)
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
