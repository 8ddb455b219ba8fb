package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
)

func f32Weight(t *testing.T, b *Backend, v []float32, shape ...int) kernels.Tensor {
	t.Helper()
	w, err := b.Upload(kernels.HostTensor{Name: "w", DType: kernels.F32, Shape: shape,
		Data: unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestMoEFFN checks each row of a batch against the mixture computed for it
// alone in float64, with and without renormalised weights, and with a
// router tie (two equal logits: the lower expert wins).
func TestMoEFFN(t *testing.T) {
	const experts, k, hidden, ffn, n = 6, 2, 16, 8, 9
	r := rand.New(rand.NewPCG(5, 6))
	gv, uv, dv := randF32(r, experts*ffn*hidden), randF32(r, experts*ffn*hidden), randF32(r, experts*hidden*ffn)
	xv, lv := randF32(r, n*hidden), randF32(r, n*experts)
	lv[3*experts+1], lv[3*experts+4] = 9, 9 // row 3: experts 1 and 4 tie for first
	lv[4*experts+2], lv[4*experts+5] = 7, 7 // row 4: 2 and 5 tie, with 0 above them
	lv[4*experts+0] = 8
	for _, norm := range []bool{false, true} {
		b := New(2)
		gate, up, down := f32Weight(t, b, gv, experts, ffn, hidden), f32Weight(t, b, uv, experts, ffn, hidden), f32Weight(t, b, dv, experts, hidden, ffn)
		x, logits, dst := scratch(t, b, xv, n, hidden), scratch(t, b, lv, n, experts), scratch(t, b, nil, n, hidden)
		if err := b.MoEFFN(dst, x, logits, gate, up, down, n, k, norm); err != nil {
			t.Fatal(err)
		}
		got := dst.(*tensor).f32
		for row := range n {
			l := lv[row*experts : (row+1)*experts]
			var sum float64
			p := make([]float64, experts)
			for e, v := range l {
				p[e] = math.Exp(float64(v))
				sum += p[e]
			}
			top := []int{}
			for range k {
				best := -1
				for e := range experts {
					if !slices.Contains(top, e) && (best < 0 || p[e] > p[best]) {
						best = e
					}
				}
				top = append(top, best)
			}
			if row == 3 && (top[0] != 1 || top[1] != 4) || row == 4 && (top[0] != 0 || top[1] != 2) {
				t.Fatalf("reference picks %v for row %d", top, row)
			}
			div := sum
			if norm {
				div = p[top[0]] + p[top[1]]
			}
			want := make([]float64, hidden)
			for _, e := range top {
				g := make([]float64, ffn)
				for j := range ffn {
					var a, c float64
					for i := range hidden {
						a += float64(gv[(e*ffn+j)*hidden+i]) * float64(xv[row*hidden+i])
						c += float64(uv[(e*ffn+j)*hidden+i]) * float64(xv[row*hidden+i])
					}
					g[j] = a / (1 + math.Exp(-a)) * c
				}
				for o := range hidden {
					var s float64
					for j := range ffn {
						s += float64(dv[(e*hidden+o)*ffn+j]) * g[j]
					}
					want[o] += p[e] / div * s
				}
			}
			for o := range hidden {
				if d := math.Abs(float64(got[row*hidden+o]) - want[o]); d > 1e-4*(1+math.Abs(want[o])) {
					t.Fatalf("norm %v row %d output %d: %g, want %g", norm, row, o, got[row*hidden+o], want[o])
				}
			}
		}
		b.Close()
	}
}

// TestGatedAdd checks each row's sigmoid gate in float64, with rows past n
// left alone and a gate tensor of the wrong width refused.
func TestGatedAdd(t *testing.T) {
	const rows, n, cols = 5, 4, 12
	r := rand.New(rand.NewPCG(7, 8))
	dv, xv, gv := randF32(r, rows*cols), randF32(r, rows*cols), randF32(r, rows)
	gv[1], gv[2] = 30, -30 // saturated: the shared expert fully on, and off
	b := New(1)
	defer b.Close()
	dst, x, gate := scratch(t, b, dv, rows, cols), scratch(t, b, xv, rows, cols), scratch(t, b, gv, rows, 1)
	if err := b.GatedAdd(dst, x, gate, n); err != nil {
		t.Fatal(err)
	}
	got := dst.(*tensor).f32
	for i := range rows {
		g := 1 / (1 + math.Exp(-float64(gv[i])))
		for j := range cols {
			want := float64(dv[i*cols+j])
			if i < n {
				want += g * float64(xv[i*cols+j])
			}
			if d := math.Abs(float64(got[i*cols+j]) - want); d > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("row %d col %d: %g, want %g (gate %g)", i, j, got[i*cols+j], want, gv[i])
			}
		}
	}
	if err := b.GatedAdd(dst, x, x, n); err == nil {
		t.Fatal("a gate of 12 columns was accepted")
	}
}
