package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// TestOAISwiGLU: gpt-oss's clamped SwiGLU, as ggml's swiglu_oai: the gate
// capped above at the limit only, the up clamped both ways, then
// x·σ(alpha·x)·(y + 1); over more than one 256-element chunk with a SIMD
// tail, gates from −120 (σ underflows, e^(alpha·120) overflows f32) to past
// the limit.
func TestOAISwiGLU(t *testing.T) {
	g := []float32{10, -10, 0.5, 7, -3, -120, -60, 7.0001, 0}
	u := []float32{9, -9, 0.25, -8, 100, 3, -1, 2, 5}
	r := rand.New(rand.NewPCG(7, 8))
	for len(g) < 600 {
		g, u = append(g, float32(r.NormFloat64()*6)), append(u, float32(r.NormFloat64()*6))
	}
	want := make([]float64, len(g))
	for i := range g {
		x := math.Min(float64(g[i]), 7)
		y := math.Max(math.Min(float64(u[i]), 7), -7)
		want[i] = x / (1 + math.Exp(-1.702*x)) * (y + 1)
	}
	oaiSwiGLU(g, u, 1.702, 7)
	for i := range g {
		if math.Abs(float64(g[i])-want[i]) > 1e-6*math.Max(1, math.Abs(want[i])) {
			t.Errorf("element %d: %g, want %g", i, g[i], want[i])
		}
	}
}

// TestOAIMoEFFNGrouped: quantized experts take the grouped path, which must
// give the bits of the per-expert matMuls (oaiMoEEach) on the same weights,
// biases included, for every row of a batch and for the row alone; and stay
// within quantization error of the float64 mixture over the dequantized
// weights. Rows per expert run 1 to 9 (k = 1) so every group size occurs.
func TestOAIMoEFFNGrouped(t *testing.T) {
	cases := []struct {
		name           string
		gate, up, down kernels.DType
		hidden, ffn    int
	}{
		{"mxfp4", kernels.MXFP4, kernels.MXFP4, kernels.MXFP4, 64, 96},
		{"q8_0+q4_k-down", kernels.Q8_0, kernels.Q8_0, kernels.Q4_K, 256, 256},
	}
	const experts = 8
	counts := []int{1, 2, 3, 4, 5, 6, 7, 9}
	const alpha, limit = 1.702, 7
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(25, uint64(tc.hidden)))
			b := New(2)
			defer b.Close()
			var deq [3][]float32
			weight := func(i int, dt kernels.DType, rows, cols int) *tensor {
				v := randF32(r, experts*rows*cols)
				data := mustQuantize(t, dt, v)
				deq[i] = mustDequantize(t, dt, data, len(v))
				w, err := b.Upload(kernels.HostTensor{Name: "w", DType: dt, Shape: []int{experts, rows, cols}, Data: data})
				if err != nil {
					t.Fatal(err)
				}
				return w.(*tensor)
			}
			gq, uq, dq := weight(0, tc.gate, tc.ffn, tc.hidden), weight(1, tc.up, tc.ffn, tc.hidden), weight(2, tc.down, tc.hidden, tc.ffn)
			// Gate values around the limit, so both sides of the clamp occur.
			gbv, ubv, dbv := randF32(r, experts*tc.ffn), randF32(r, experts*tc.ffn), randF32(r, experts*tc.hidden)
			for i := range gbv {
				gbv[i] *= 6
				ubv[i] *= 6
			}
			gb, ub, db := scratch(t, b, gbv, experts, tc.ffn), scratch(t, b, ubv, experts, tc.ffn), scratch(t, b, dbv, experts, tc.hidden)
			for _, k := range []int{1, 3} {
				var order []int
				for e, c := range counts {
					for range c {
						order = append(order, e)
					}
				}
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				n := len(order)
				lv := randF32(r, n*experts)
				for i, e := range order {
					lv[i*experts+e] = 20
				}
				xv := randF32(r, n*tc.hidden)
				for i := range xv {
					xv[i] *= 3
				}
				x, logits := scratch(t, b, xv, n, tc.hidden), scratch(t, b, lv, n, experts)
				dst := scratch(t, b, nil, n, tc.hidden)
				if err := b.OAIMoEFFN(dst, x, logits, gq, uq, dq, gb, ub, db, n, k, alpha, limit); err != nil {
					t.Fatal(err)
				}
				got := dst.(*tensor).f32
				each := make([]float32, n*tc.hidden)
				b.moe.route(lv, n, experts, k, true)
				b.oaiMoEEach(each, xv, n, gq, uq, dq, gbv, ubv, dbv, alpha, limit)
				one := scratch(t, b, nil, 1, tc.hidden)
				for i := range n {
					row := got[i*tc.hidden : (i+1)*tc.hidden]
					xi := scratch(t, b, xv[i*tc.hidden:(i+1)*tc.hidden], 1, tc.hidden)
					li := scratch(t, b, lv[i*experts:(i+1)*experts], 1, experts)
					if err := b.OAIMoEFFN(one, xi, li, gq, uq, dq, gb, ub, db, 1, k, alpha, limit); err != nil {
						t.Fatal(err)
					}
					for o, v := range row {
						if w := each[i*tc.hidden+o]; math.Float32bits(v) != math.Float32bits(w) {
							t.Fatalf("k %d row %d output %d: grouped %g, per-expert matMuls %g", k, i, o, v, w)
						}
						if w := one.(*tensor).f32[o]; math.Float32bits(v) != math.Float32bits(w) {
							t.Fatalf("k %d row %d output %d: batched %g, alone %g", k, i, o, v, w)
						}
					}
					want := oaiMoEReference(deq, gbv, ubv, dbv, xv[i*tc.hidden:(i+1)*tc.hidden], lv[i*experts:(i+1)*experts], tc.hidden, tc.ffn, k, alpha, limit)
					var num, den float64
					for o, v := range row {
						d := float64(v) - want[o]
						num, den = num+d*d, den+want[o]*want[o]
					}
					if e := math.Sqrt(num / den); e > 0.05 {
						t.Fatalf("k %d row %d: relative RMS error %.3g from the dequantized mixture", k, i, e)
					}
				}
			}
		})
	}
}

// oaiMoEReference is one row's gpt-oss mixture in float64 over float
// weights w (gate, up, down).
func oaiMoEReference(w [3][]float32, gb, ub, db, x, logits []float32, hidden, ffn, k int, alpha, limit float64) []float64 {
	experts := len(logits)
	var top []int
	for range k {
		best := -1
		for e := range experts {
			if !slices.Contains(top, e) && (best < 0 || logits[e] > logits[best]) {
				best = e
			}
		}
		top = append(top, best)
	}
	var sum float64
	for _, e := range top {
		sum += math.Exp(float64(logits[e] - logits[top[0]]))
	}
	out := make([]float64, hidden)
	for _, e := range top {
		a := make([]float64, ffn)
		for j := range ffn {
			g, u := float64(gb[e*ffn+j]), float64(ub[e*ffn+j])
			for i := range hidden {
				g += float64(w[0][(e*ffn+j)*hidden+i]) * float64(x[i])
				u += float64(w[1][(e*ffn+j)*hidden+i]) * float64(x[i])
			}
			g, u = math.Min(g, limit), math.Max(math.Min(u, limit), -limit)
			a[j] = g / (1 + math.Exp(-alpha*g)) * (u + 1)
		}
		wt := math.Exp(float64(logits[e]-logits[top[0]])) / sum
		for o := range hidden {
			y := float64(db[e*hidden+o])
			for j := range ffn {
				y += float64(w[2][(e*hidden+o)*ffn+j]) * a[j]
			}
			out[o] += wt * y
		}
	}
	return out
}

// TestSinkAttention checks every row of a prompt against attention with
// sinks computed directly over its window in float64 from the F16-rounded
// K and V the cache holds (the block table shuffled), with sinks from far
// below the scores (no effect) to far above (the head attends to almost
// nothing); and the call on one backend twice in a row, with a 2-row batch
// between, gives the same bits (pooled state carries nothing over).
func TestSinkAttention(t *testing.T) {
	const (
		heads, kvHeads, hd = 4, 2, 16
		bs, blocks, n      = 4, 16, 37
	)
	r := rand.New(rand.NewPCG(3, 4))
	table := make([]int32, blocks)
	for i, p := range r.Perm(blocks) {
		table[i] = int32(p)
	}
	sinkv := []float32{-30, 0.5, 2, 12}
	for _, window := range []int{0, 1, 5, 16} {
		b := New(2)
		kv, err := b.NewKVStore(kernels.KVConfig{Layers: 2, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd})
		if err != nil {
			t.Fatal(err)
		}
		qv, kvals, vvals := randF32(r, n*heads*hd), randF32(r, n*kvHeads*hd), randF32(r, n*kvHeads*hd)
		q, k, v := scratch(t, b, qv, n, heads*hd), scratch(t, b, kvals, n, kvHeads*hd), scratch(t, b, vvals, n, kvHeads*hd)
		sinks := scratch(t, b, sinkv, heads)
		batch := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: n, ContextLen: n, Blocks: table}}}
		for p := range n {
			batch.Tokens = append(batch.Tokens, 0)
			batch.Positions = append(batch.Positions, int32(p))
			batch.Slots = append(batch.Slots, table[p/bs]*bs+int32(p%bs))
		}
		const scale = 0.25
		out, again := scratch(t, b, nil, n, heads*hd), scratch(t, b, nil, n, heads*hd)
		if err := b.SinkAttention(out, q, k, v, kv, 1, batch, scale, window, sinks); err != nil {
			t.Fatal(err)
		}
		small := &kernels.Batch{Tokens: []int32{0, 0}, Positions: []int32{0, 1}, Slots: []int32{0, 1},
			Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: 1, Blocks: []int32{0}}, {Start: 1, End: 2, ContextLen: 2, Blocks: []int32{0}}}}
		if err := b.SinkAttention(scratch(t, b, nil, 2, heads*hd), q, k, v, kv, 0, small, scale, window, sinks); err != nil {
			t.Fatal(err)
		}
		if err := b.SinkAttention(again, q, k, v, kv, 1, batch, scale, window, sinks); err != nil {
			t.Fatal(err)
		}
		got := out.(*tensor).f32
		for i, g := range again.(*tensor).f32 {
			if math.Float32bits(g) != math.Float32bits(got[i]) {
				t.Fatalf("window %d: output %d is %g, then %g", window, i, got[i], g)
			}
		}
		half := func(x float32) float64 { return float64(quant.F16ToF32(quant.F32ToF16(x))) }
		for p := range n {
			first := 0
			if window > 0 {
				first = max(0, p+1-window)
			}
			for h := range heads {
				kh := h / (heads / kvHeads)
				scores := make([]float64, p+1-first)
				mx := float64(sinkv[h])
				for j := range scores {
					var s float64
					for d := range hd {
						s += float64(qv[p*heads*hd+h*hd+d]) * half(kvals[(first+j)*kvHeads*hd+kh*hd+d])
					}
					scores[j] = s * scale
					mx = max(mx, scores[j])
				}
				sum := math.Exp(float64(sinkv[h]) - mx)
				for j := range scores {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for d := range hd {
					var o float64
					for j, e := range scores {
						o += e / sum * half(vvals[(first+j)*kvHeads*hd+kh*hd+d])
					}
					if g := got[p*heads*hd+h*hd+d]; math.Abs(float64(g)-o) > 1e-4 {
						t.Fatalf("window %d: position %d head %d dim %d: %g, want %g", window, p, h, d, g, o)
					}
				}
			}
		}
		b.Close()
	}
}

// TestOAISwiGLULoops: the SIMD loops around oaiSwiGLU's exponentials give
// the generic loops' bits over every length to 40 and a long run, on
// values at and around the limit, ±0, ±Inf and NaN (which must pass
// through min and max as Go's do).
func TestOAISwiGLULoops(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	special := []float32{7, -7, 7.0000005, -7.0000005, 0, float32(math.Copysign(0, -1)), inf, -inf, nan, 1e30, -1e30}
	const alpha, limit = 1.702, 7
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
	}
	for _, n := range append(func() (ns []int) {
		for n := range 41 {
			ns = append(ns, n)
		}
		return
	}(), 603) {
		g, u, tv := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			g[i], u[i], tv[i] = float32(r.NormFloat64()*8), float32(r.NormFloat64()*8), float32(r.ExpFloat64()*3)
			if r.IntN(4) == 0 {
				g[i] = special[r.IntN(len(special))]
			}
			if r.IntN(4) == 0 {
				u[i] = special[r.IntN(len(special))]
			}
		}
		t1, t2 := make([]float32, n), make([]float32, n)
		oaiSwiGLUPre(t1, g, alpha, limit)
		oaiSwiGLUPreGeneric(t2, g, alpha, limit)
		for i := range n {
			if !same(t1[i], t2[i]) {
				t.Fatalf("n %d: pre of g %g: %g, generic %g", n, g[i], t1[i], t2[i])
			}
		}
		g1, g2 := slices.Clone(g), slices.Clone(g)
		oaiSwiGLUPost(g1, u, tv, limit)
		oaiSwiGLUPostGeneric(g2, u, tv, limit)
		for i := range n {
			if !same(g1[i], g2[i]) {
				t.Fatalf("n %d: post of g %g, u %g, t %g: %g, generic %g", n, g[i], u[i], tv[i], g1[i], g2[i])
			}
		}
	}
}

// TestSinkScoresValues: the one-call score and value loops give the
// per-position calls' bits (sinkScoresGeneric, sinkValuesGeneric) for head
// sizes 8 to 72 (the 32- and 8-wide loops of the dot), a head at an offset
// inside the cache row, and slots in any order.
func TestSinkScoresValues(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, hd := range []int{8, 16, 24, 64, 72, 12} {
		kvCols, slotsN := 3*hd, 40
		off := hd
		cache := make([]uint16, slotsN*kvCols)
		for i := range cache {
			cache[i] = quant.F32ToF16(float32(r.NormFloat64()))
		}
		for _, n := range []int{1, 7, 33} {
			slots := make([]int32, n)
			for i := range slots {
				slots[i] = int32(r.IntN(slotsN))
			}
			q := randF32(r, hd)
			got, want := make([]float32, n), make([]float32, n)
			sinkScores(got, cache, slots, kvCols, off, q, 0.3)
			sinkScoresGeneric(want, cache, slots, kvCols, off, q, 0.3)
			for i := range n {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("hd %d n %d: score %d %g, per position %g", hd, n, i, got[i], want[i])
				}
			}
			o1, o2 := randF32(r, hd), make([]float32, hd)
			copy(o2, o1)
			sinkValues(o1, cache, slots, kvCols, off, want, 0.7)
			sinkValuesGeneric(o2, cache, slots, kvCols, off, want, 0.7)
			for j := range hd {
				if math.Float32bits(o1[j]) != math.Float32bits(o2[j]) {
					t.Fatalf("hd %d n %d: output %d %g, per position %g", hd, n, j, o1[j], o2[j])
				}
			}
		}
	}
}
