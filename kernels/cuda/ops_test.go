//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kernels/quant"
)

// These tests run every op on the CUDA backend and on the CPU reference with
// the same random inputs and compare ‖cuda − cpu‖ / ‖cpu‖ against bounds the
// CUDA numerics allow (doc.go). They need a GPU: build them anywhere with
// `go test -tags cuda -c ./kernels/cuda/`.

type pair struct {
	t    *testing.T
	gpu  *Backend
	cpu  *cpu.Backend
	rand *rand.Rand
}

func newPair(t *testing.T) *pair {
	t.Helper()
	g, err := New(Options{})
	if err != nil {
		t.Fatalf("cuda backend: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &pair{t: t, gpu: g, cpu: cpu.New(4), rand: rand.New(rand.NewPCG(1, 2))}
}

func (p *pair) randn(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.rand.NormFloat64()) * scale
	}
	return v
}

// twin is one tensor on both backends.
type twin struct{ g, c kernels.Tensor }

func f32Bytes(v []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)) }

// upload stores vals as dt (quantized with quant's reference encoder) on both.
func (p *pair) upload(dt kernels.DType, vals []float32, shape ...int) twin {
	p.t.Helper()
	data, err := quant.Quantize(dt, vals)
	if err != nil {
		p.t.Fatal(err)
	}
	h := kernels.HostTensor{Name: "w", DType: dt, Shape: shape, Data: data}
	g, err := p.gpu.Upload(h)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := p.cpu.Upload(h)
	if err != nil {
		p.t.Fatal(err)
	}
	return twin{g, c}
}

// scratch is F32 scratch on both, filled with vals (via an F32 upload the
// ops treat as scratch) or zero when vals is nil.
func (p *pair) scratch(vals []float32, rows, cols int) twin {
	p.t.Helper()
	if vals == nil {
		g, err := p.gpu.Alloc(rows, cols)
		if err != nil {
			p.t.Fatal(err)
		}
		c, err := p.cpu.Alloc(rows, cols)
		if err != nil {
			p.t.Fatal(err)
		}
		return twin{g, c}
	}
	h := kernels.HostTensor{Name: "x", DType: kernels.F32, Shape: []int{rows, cols}, Data: f32Bytes(append([]float32(nil), vals...))}
	g, err := p.gpu.Upload(h)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := p.cpu.Upload(kernels.HostTensor{Name: "x", DType: kernels.F32, Shape: []int{rows, cols}, Data: f32Bytes(append([]float32(nil), vals...))})
	if err != nil {
		p.t.Fatal(err)
	}
	return twin{g, c}
}

// check reads n values of t from both backends and bounds their relative error.
func (p *pair) check(what string, t twin, n int, bound float64) {
	p.t.Helper()
	g, c := make([]float32, n), make([]float32, n)
	if err := p.gpu.Read(t.g, g); err != nil {
		p.t.Fatalf("%s: cuda read: %v", what, err)
	}
	if err := p.cpu.Read(t.c, c); err != nil {
		p.t.Fatalf("%s: cpu read: %v", what, err)
	}
	if e := relErr(g, c); !(e <= bound) {
		p.t.Errorf("%s: ‖cuda−cpu‖/‖cpu‖ = %.3g, bound %.3g (cuda[:4] %v cpu[:4] %v)", what, e, bound, g[:min(4, n)], c[:min(4, n)])
	}
}

func relErr(got, want []float32) float64 {
	var d, w float64
	for i := range want {
		x := float64(got[i]) - float64(want[i])
		d += x * x
		w += float64(want[i]) * float64(want[i])
	}
	if w == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / w)
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

var weightTypes = []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_1,
	kernels.Q5_0, kernels.Q5_1, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K, kernels.MXFP4}

func TestGetRows(t *testing.T) {
	p := newPair(t)
	const vocab, cols = 300, 512
	rows := []int32{0, 299, 17, 17, 150}
	for _, dt := range weightTypes {
		w := p.upload(dt, p.randn(vocab*cols, 1), vocab, cols)
		dst := p.scratch(nil, 8, cols)
		must(t, p.gpu.GetRows(dst.g, w.g, rows), p.cpu.GetRows(dst.c, w.c, rows))
		p.check("GetRows "+dt.String(), dst, len(rows)*cols, 1e-6)
	}
	// F32 scratch as the source: picking logit rows out of the hidden state
	x := p.scratch(p.randn(10*100, 1), 10, 100)
	dst := p.scratch(nil, 3, 100)
	must(t, p.gpu.GetRows(dst.g, x.g, []int32{9, 0, 4}), p.cpu.GetRows(dst.c, x.c, []int32{9, 0, 4}))
	p.check("GetRows scratch", dst, 300, 0)
}

func TestRMSNorm(t *testing.T) {
	p := newPair(t)
	for _, cols := range []int{576, 4096} {
		x := p.scratch(p.randn(7*cols, 3), 7, cols)
		w1 := p.upload(kernels.F32, p.randn(cols, 1), cols)
		dst := p.scratch(nil, 7, cols)
		must(t, p.gpu.RMSNorm(dst.g, x.g, w1.g, 5, 1e-5), p.cpu.RMSNorm(dst.c, x.c, w1.c, 5, 1e-5))
		p.check(fmt.Sprintf("RMSNorm %d", cols), dst, 7*cols, 1e-6)
		// in place, as the forward pass normalises the logit rows
		must(t, p.gpu.RMSNorm(x.g, x.g, w1.g, 7, 1e-6), p.cpu.RMSNorm(x.c, x.c, w1.c, 7, 1e-6))
		p.check(fmt.Sprintf("RMSNorm in place %d", cols), x, 7*cols, 1e-6)
	}
}

func TestMatMul(t *testing.T) {
	p := newPair(t)
	shapes := []struct{ out, in int }{{192, 576}, {1001, 256}} // 1001: a last GEMV warp with fewer rows than it takes
	for _, dt := range weightTypes {
		for _, sh := range shapes {
			if sh.in%dt.BlockElems() != 0 {
				continue
			}
			w := p.upload(dt, p.randn(sh.out*sh.in, 0.05), sh.out, sh.in)
			bias := p.upload(kernels.F32, p.randn(sh.out, 1), sh.out)
			for _, n := range []int{1, 2, 3, 8, 9, 64, 100} {
				x := p.scratch(p.randn(n*sh.in, 1), n, sh.in)
				dst := p.scratch(nil, n, sh.out)
				var bg, bc kernels.Tensor
				if n%2 == 1 {
					bg, bc = bias.g, bias.c
				}
				must(t, p.gpu.MatMul(dst.g, x.g, w.g, bg, n), p.cpu.MatMul(dst.c, x.c, w.c, bc, n))
				p.check(fmt.Sprintf("MatMul %v %dx%d n=%d", dt, sh.out, sh.in, n), dst, n*sh.out, matmulBound(dt, n))
			}
		}
	}
}

// matmulBound: the CPU quantizes activations for quantized weights (Q8
// blocks), the GPU rounds them to 16 bits on the tensor-core path; both are
// a fraction of a percent on random data.
func matmulBound(dt kernels.DType, n int) float64 {
	switch {
	case dt == kernels.F32:
		return 1e-5
	case n <= 8 && (dt == kernels.F16 || dt == kernels.BF16):
		return 1e-4
	case dt == kernels.BF16:
		return 8e-3
	}
	return 2e-2
}

func TestRoPE(t *testing.T) {
	p := newPair(t)
	for _, style := range []kernels.RoPEStyle{kernels.RoPEInterleaved, kernels.RoPEHalves} {
		const heads, hd, n = 9, 64, 6
		freq := make([]float32, hd/2)
		for i := range freq {
			freq[i] = float32(math.Pow(10000, -2*float64(i)/hd))
		}
		f := p.upload(kernels.F32, freq, hd/2)
		x := p.scratch(p.randn(n*heads*hd, 1), n, heads*hd)
		pos := []int32{0, 1, 2, 511, 4000, 77}
		must(t, p.gpu.RoPE(x.g, f.g, pos, heads, style), p.cpu.RoPE(x.c, f.c, pos, heads, style))
		p.check("RoPE "+style.String(), x, n*heads*hd, 1e-6)
	}
}

func TestSwiGLUAdd(t *testing.T) {
	p := newPair(t)
	const n, cols = 5, 1536
	g := p.scratch(p.randn(n*cols, 2), n, cols)
	u := p.scratch(p.randn(n*cols, 1), n, cols)
	must(t, p.gpu.SwiGLU(g.g, g.g, u.g, 4), p.cpu.SwiGLU(g.c, g.c, u.c, 4))
	p.check("SwiGLU", g, n*cols, 1e-6)
	must(t, p.gpu.Add(u.g, g.g, 3), p.cpu.Add(u.c, g.c, 3))
	p.check("Add", u, n*cols, 1e-6)
}

// TestFusion runs the op sequences the backend fuses into one launch (see
// fuseGEMV, RoPE, RMSNorm): q/k/v and gate/up projections of one input, RoPE
// of q then k, and the residual Add before an RMSNorm.
func TestFusion(t *testing.T) {
	p := newPair(t)
	const hidden, heads, kvHeads, hd = 256, 4, 2, 64
	for _, n := range []int{1, 3} {
		h := p.scratch(p.randn(n*hidden, 1), n, hidden)
		q, k, v := p.scratch(nil, n, heads*hd), p.scratch(nil, n, kvHeads*hd), p.scratch(nil, n, kvHeads*hd)
		wq := p.upload(kernels.Q8_0, p.randn(heads*hd*hidden, 0.05), heads*hd, hidden)
		wk := p.upload(kernels.Q8_0, p.randn(kvHeads*hd*hidden, 0.05), kvHeads*hd, hidden)
		wv := p.upload(kernels.Q8_0, p.randn(kvHeads*hd*hidden, 0.05), kvHeads*hd, hidden)
		bk := p.upload(kernels.F32, p.randn(kvHeads*hd, 1), kvHeads*hd)
		freq := p.upload(kernels.F32, p.randn(hd/2, 0.1), hd/2)
		must(t, p.gpu.MatMul(q.g, h.g, wq.g, nil, n), p.gpu.MatMul(k.g, h.g, wk.g, bk.g, n), p.gpu.MatMul(v.g, h.g, wv.g, nil, n),
			p.cpu.MatMul(q.c, h.c, wq.c, nil, n), p.cpu.MatMul(k.c, h.c, wk.c, bk.c, n), p.cpu.MatMul(v.c, h.c, wv.c, nil, n))
		pos := []int32{5, 6, 7}[:n]
		must(t, p.gpu.RoPE(q.g, freq.g, pos, heads, kernels.RoPEHalves), p.gpu.RoPE(k.g, freq.g, pos, kvHeads, kernels.RoPEHalves),
			p.cpu.RoPE(q.c, freq.c, pos, heads, kernels.RoPEHalves), p.cpu.RoPE(k.c, freq.c, pos, kvHeads, kernels.RoPEHalves))
		if got := len(p.gpu.step.launches); got != 2 {
			t.Errorf("n=%d: q/k/v projections and two RoPEs recorded %d launches, want 2 (fused)", n, got)
		}
		p.check(fmt.Sprintf("fused q n=%d", n), q, n*heads*hd, 2e-2)
		p.check(fmt.Sprintf("fused k n=%d", n), k, n*kvHeads*hd, 2e-2)
		p.check(fmt.Sprintf("fused v n=%d", n), v, n*kvHeads*hd, 2e-2)

		x := p.scratch(p.randn(n*hidden, 1), n, hidden)
		o := p.scratch(p.randn(n*hidden, 1), n, hidden)
		w := p.upload(kernels.F32, p.randn(hidden, 1), hidden)
		must(t, p.gpu.Add(x.g, o.g, n), p.gpu.RMSNorm(h.g, x.g, w.g, n, 1e-5),
			p.cpu.Add(x.c, o.c, n), p.cpu.RMSNorm(h.c, x.c, w.c, n, 1e-5))
		if got := len(p.gpu.step.launches); got != 1 {
			t.Errorf("n=%d: Add then RMSNorm recorded %d launches, want 1 (fused)", n, got)
		}
		p.check(fmt.Sprintf("fused add (residual) n=%d", n), x, n*hidden, 1e-6)
		p.check(fmt.Sprintf("fused add+norm n=%d", n), h, n*hidden, 1e-6)
	}
}
