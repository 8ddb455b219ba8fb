package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func scratch(t *testing.T, b *Backend, vals []float32, shape ...int) kernels.Tensor {
	t.Helper()
	x, err := b.Alloc(shape...)
	if err != nil {
		t.Fatal(err)
	}
	copy(x.(*tensor).f32, vals)
	return x
}

// TestSlidingAttention checks every row of a prompt (and a later decode row)
// against attention computed directly over its window, in float64 from the
// F16-rounded K and V the cache holds, with the block table shuffled so that
// slot arithmetic is exercised; with a soft-cap (Gemma 2's
// attn_logit_softcapping, here tight enough to flatten most scores) each
// score is capped before the softmax.
func TestSlidingAttention(t *testing.T) {
	const (
		heads, kvHeads, hd = 4, 2, 16
		bs, blocks, n      = 4, 16, 37
	)
	r := rand.New(rand.NewPCG(1, 2))
	table := make([]int32, blocks)
	for i, p := range r.Perm(blocks) {
		table[i] = int32(p)
	}
	for _, tc := range []struct {
		window  int
		softcap float32
	}{{0, 0}, {1, 0}, {7, 0}, {16, 0}, {100, 0}, {0, 0.5}, {7, 0.5}, {16, 3}} {
		window := tc.window
		b := New(2)
		kv, err := b.NewKVStore(kernels.KVConfig{Layers: 1, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd})
		if err != nil {
			t.Fatal(err)
		}
		qv, kvals, vvals := randF32(r, n*heads*hd), randF32(r, n*kvHeads*hd), randF32(r, n*kvHeads*hd)
		q, k, v := scratch(t, b, qv, n, heads*hd), scratch(t, b, kvals, n, kvHeads*hd), scratch(t, b, vvals, n, kvHeads*hd)
		out := scratch(t, b, nil, n, heads*hd)
		batch := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: n, ContextLen: n, Blocks: table}}}
		for p := range n {
			batch.Tokens = append(batch.Tokens, 0)
			batch.Positions = append(batch.Positions, int32(p))
			batch.Slots = append(batch.Slots, table[p/bs]*bs+int32(p%bs))
		}
		const scale = 0.25
		call := b.SlidingAttention(out, q, k, v, kv, 0, batch, scale, window)
		if tc.softcap > 0 {
			call = b.CappedAttention(out, q, k, v, kv, 0, batch, scale, window, tc.softcap)
		}
		if err := call; err != nil {
			t.Fatal(err)
		}
		got := out.(*tensor).f32
		half := func(x float32) float64 { return float64(quant.F16ToF32(quant.F32ToF16(x))) }
		for p := range n {
			first := 0
			if window > 0 {
				first = max(0, p+1-window)
			}
			for h := range heads {
				kh := h / (heads / kvHeads)
				scores := make([]float64, p+1-first)
				mx := math.Inf(-1)
				for j := range scores {
					var s float64
					for d := range hd {
						s += float64(qv[p*heads*hd+h*hd+d]) * half(kvals[(first+j)*kvHeads*hd+kh*hd+d])
					}
					scores[j] = s * scale
					if c := float64(tc.softcap); c > 0 {
						scores[j] = c * math.Tanh(scores[j]/c)
					}
					mx = max(mx, scores[j])
				}
				var sum float64
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
						t.Fatalf("window %d cap %g: position %d head %d dim %d: %g, want %g", window, tc.softcap, p, h, d, g, o)
					}
				}
			}
		}
		b.Close()
	}
}

// TestSoftCap: cap·tanh(v/cap) to float32 precision, bounded by the cap,
// only the first n rows touched, and a cap that is not positive refused.
func TestSoftCap(t *testing.T) {
	const n, cols = 2, 5
	xv := []float32{-1e4, -31, -3, -0.001, 0, 0.001, 2.5, 29, 30, 1e6, 7, 7, 7, 7, 7}
	b := New(1)
	defer b.Close()
	x := scratch(t, b, xv, 3, cols)
	if err := b.SoftCap(x, n, 30); err != nil {
		t.Fatal(err)
	}
	got := x.(*tensor).f32
	for i, v := range xv[:n*cols] {
		want := 30 * math.Tanh(float64(v)/30)
		if math.Abs(float64(got[i])-want) > 1e-6*math.Max(1, math.Abs(want)) || math.Abs(float64(got[i])) > 30 {
			t.Errorf("SoftCap(%g) = %g, want %g", v, got[i], want)
		}
	}
	for i := n * cols; i < len(xv); i++ {
		if got[i] != xv[i] {
			t.Errorf("element %d beyond the %d rows changed: %g", i, n, got[i])
		}
	}
	for _, c := range []float32{0, -1, float32(math.NaN())} {
		if err := b.SoftCap(x, n, c); err == nil {
			t.Errorf("SoftCap accepted cap %g", c)
		}
	}
}

func TestHeadRMSNorm(t *testing.T) {
	const n, heads, hd = 3, 4, 8
	r := rand.New(rand.NewPCG(3, 4))
	b := New(1)
	defer b.Close()
	xv, wv := randF32(r, n*heads*hd), randF32(r, hd)
	x, w := scratch(t, b, xv, n, heads*hd), scratch(t, b, wv, hd)
	if err := b.HeadRMSNorm(x, w, n, heads, 1e-6); err != nil {
		t.Fatal(err)
	}
	got := x.(*tensor).f32
	for i := range n * heads {
		var ss float64
		for _, v := range xv[i*hd : (i+1)*hd] {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/hd+1e-6)
		for d := range hd {
			want := float64(xv[i*hd+d]) * inv * float64(wv[d])
			if math.Abs(float64(got[i*hd+d])-want) > 1e-5 {
				t.Fatalf("head %d dim %d: %g, want %g", i, d, got[i*hd+d], want)
			}
		}
	}
	if err := b.HeadRMSNorm(x, w, n, heads+1, 1e-6); err == nil {
		t.Fatal("HeadRMSNorm accepted 5 heads of 8 in a row of 32")
	}
}

// TestGeGLU: the F16 table stays within F16 rounding of the exact GELU, and
// the saturated ends are exact, as in ggml.
func TestGeGLU(t *testing.T) {
	xs := []float32{-12, -10, -3.5, -1, -0.01, 0, 0.01, 0.5, 1, 2.25, 9.99, 10, 40}
	up := make([]float32, len(xs))
	for i := range up {
		up[i] = 1.5
	}
	b := New(1)
	defer b.Close()
	g, u, d := scratch(t, b, xs, 1, len(xs)), scratch(t, b, up, 1, len(xs)), scratch(t, b, nil, 1, len(xs))
	if err := b.GeGLU(d, g, u, 1); err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		got := d.(*tensor).f32[i]
		exact := 0.5 * float64(x) * (1 + math.Tanh(math.Sqrt(2/math.Pi)*float64(x)*(1+0.044715*float64(x)*float64(x)))) * 1.5
		if math.Abs(float64(got)-exact) > 2e-3*math.Abs(exact)+1e-4 {
			t.Errorf("gelu(%g)·1.5 = %g, want %g", x, got, exact)
		}
	}
	if got := d.(*tensor).f32[len(xs)-1]; got != 60 {
		t.Errorf("gelu(40)·1.5 = %g, want exactly 60", got)
	}
}
