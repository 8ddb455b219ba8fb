package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestQ41Regroup: q41Row undoes packQ41 for every row, the rows past the
// last group included.
func TestQ41Regroup(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 82))
	for _, rows := range []int{1, 7, 8, 13, 16, 21} {
		nb := 3
		wb := nb * q41Block
		w := make([]byte, rows*wb)
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		g := packQ41(w, rows, nb)
		if rows >= 8 && bytes.Equal(g[:8*wb], w[:8*wb]) {
			t.Fatalf("rows %d: packQ41 left the first group as it was", rows)
		}
		row := make([]byte, wb)
		for i := range rows {
			q41Row(row, g, rows, nb, i)
			if !bytes.Equal(row, w[i*wb:(i+1)*wb]) {
				t.Fatalf("rows %d: row %d regrouped differs", rows, i)
			}
		}
	}
}

// TestQ41GroupedBackend: a backend that regroups its Q4_1 matrices gives
// every MatMul, MatMuls (whose chunks split groups when a weight's rows
// are not a multiple of eight), prompt-row (tiled) and GetRows result of
// one that keeps the file's layout, bit for bit, on 1 and 2 threads.
func TestQ41GroupedBackend(t *testing.T) {
	if q41x8Kernels == nil {
		t.Skip("Q4_1 matrices are not regrouped on this CPU")
	}
	r := rand.New(rand.NewPCG(26, 83))
	const in = 576
	outs := []int{72, 13, 40}
	for _, threads := range []int{1, 2} {
		grouped, file := New(threads), New(threads)
		file.KeepFileLayout()
		t.Cleanup(func() { grouped.Close(); file.Close() })
		var gw, fw []kernels.Tensor
		for _, out := range outs {
			data := mustQuantize(t, kernels.Q4_1, randVec(r, out*in))
			h := kernels.HostTensor{Name: "w", DType: kernels.Q4_1, Shape: []int{out, in}, Data: data}
			g, err := grouped.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			f, err := file.Upload(h)
			if err != nil {
				t.Fatal(err)
			}
			if out >= 8 && !g.(*tensor).q41x8 || f.(*tensor).q41x8 {
				t.Fatalf("out %d: grouped %v, file layout %v", out, g.(*tensor).q41x8, f.(*tensor).q41x8)
			}
			gw, fw = append(gw, g), append(fw, f)
		}
		for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 33} {
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
					for i := range g {
						for j := range g[i] {
							if math.Float32bits(g[i][j]) != math.Float32bits(f[i][j]) {
								t.Fatalf("result %d [%d]: grouped %v, file layout %v", i, j, g[i][j], f[i][j])
							}
						}
					}
				})
			}
		}
		ids := []int32{0, 7, 8, 12, 71}
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
