package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
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

// TestMoEFFNGrouped checks the grouped products of quantized experts: with
// experts taking 1 to 9 rows (every group of rows8/rows4/rows2/rows, the
// padded 3 and 7 included), each row of the batch must equal the same row
// run alone bit for bit, and stay within quantization error of the same
// mixture over the dequantized weights (the float path). The cases cover
// each activation format (Q8_0, Q8_1, Q8_K), down in another type than gate
// and up, and gate and up wanting different formats.
func TestMoEFFNGrouped(t *testing.T) {
	cases := []struct {
		name           string
		gate, up, down kernels.DType
		hidden, ffn    int
	}{
		{"q8_0", kernels.Q8_0, kernels.Q8_0, kernels.Q8_0, 64, 96},
		{"q4_0+q5_0-down", kernels.Q4_0, kernels.Q4_0, kernels.Q5_0, 64, 96},
		{"q4_1", kernels.Q4_1, kernels.Q4_1, kernels.Q4_1, 64, 96},
		{"q8_0-gate+q4_1-up", kernels.Q8_0, kernels.Q4_1, kernels.Q8_0, 64, 96},
		{"q4_k+q6_k-down", kernels.Q4_K, kernels.Q4_K, kernels.Q6_K, 256, 256},
	}
	counts := []int{1, 2, 3, 4, 5, 6, 7, 9} // rows per expert with k = 1
	const experts = 8
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, uint64(tc.hidden)))
			b := New(2)
			defer b.Close()
			weight := func(dt kernels.DType, rows, cols int) (q, f kernels.Tensor) {
				v := randF32(r, experts*rows*cols)
				data := mustQuantize(t, dt, v)
				deq := make([]float32, len(v))
				if err := quant.Dequantize(dt, data, deq); err != nil {
					t.Fatal(err)
				}
				w, err := b.Upload(kernels.HostTensor{Name: "w", DType: dt, Shape: []int{experts, rows, cols}, Data: data})
				if err != nil {
					t.Fatal(err)
				}
				return w, f32Weight(t, b, deq, experts, rows, cols)
			}
			gq, gf := weight(tc.gate, tc.ffn, tc.hidden)
			uq, uf := weight(tc.up, tc.ffn, tc.hidden)
			dq, df := weight(tc.down, tc.hidden, tc.ffn)
			for _, k := range []int{1, 2} {
				var order []int // row i's first expert, interleaved so groups gather from afar
				for e, c := range counts {
					for range c {
						order = append(order, e)
					}
				}
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				n := len(order)
				lv := randF32(r, n*experts)
				for i, e := range order {
					lv[i*experts+e] = 20 // first choice; with k = 2 the second is random
				}
				xv := randF32(r, n*tc.hidden)
				x, logits := scratch(t, b, xv, n, tc.hidden), scratch(t, b, lv, n, experts)
				dst, ref := scratch(t, b, nil, n, tc.hidden), scratch(t, b, nil, n, tc.hidden)
				if err := b.MoEFFN(dst, x, logits, gq, uq, dq, n, k, true); err != nil {
					t.Fatal(err)
				}
				if err := b.MoEFFN(ref, x, logits, gf, uf, df, n, k, true); err != nil {
					t.Fatal(err)
				}
				got, want := dst.(*tensor).f32, ref.(*tensor).f32
				one := scratch(t, b, nil, 1, tc.hidden)
				for i := range n {
					xi := scratch(t, b, xv[i*tc.hidden:(i+1)*tc.hidden], 1, tc.hidden)
					li := scratch(t, b, lv[i*experts:(i+1)*experts], 1, experts)
					if err := b.MoEFFN(one, xi, li, gq, uq, dq, 1, k, true); err != nil {
						t.Fatal(err)
					}
					row := got[i*tc.hidden : (i+1)*tc.hidden]
					for o, v := range one.(*tensor).f32 {
						if math.Float32bits(v) != math.Float32bits(row[o]) {
							t.Fatalf("k %d row %d (expert %d) output %d: batched %g, alone %g", k, i, order[i], o, row[o], v)
						}
					}
					var num, den float64
					for o, v := range row {
						d := float64(v - want[i*tc.hidden+o])
						num, den = num+d*d, den+float64(want[i*tc.hidden+o])*float64(want[i*tc.hidden+o])
					}
					if e := math.Sqrt(num / den); e > 0.05 {
						t.Fatalf("k %d row %d: relative RMS error %.3g from the dequantized mixture", k, i, e)
					}
				}
			}
		})
	}
}
