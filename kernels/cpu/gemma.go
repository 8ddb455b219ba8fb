package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

var (
	_ kernels.GemmaOps   = (*Backend)(nil)
	_ kernels.SoftCapOps = (*Backend)(nil)
)

// HeadRMSNorm normalises each head of each row in place (QK-norm).
func (b *Backend) HeadRMSNorm(x, w kernels.Tensor, n, heads int, eps float32) error {
	xs, xt, err := f32Of(x, "HeadRMSNorm x")
	if err != nil {
		return err
	}
	ws, _, err := f32Of(w, "HeadRMSNorm weight")
	if err != nil {
		return err
	}
	hd := len(ws)
	if heads <= 0 || xt.cols() != heads*hd || n*xt.cols() > len(xs) {
		return fmt.Errorf("cpu backend: HeadRMSNorm: %d rows of %v as %d heads of %d", n, xt.shape, heads, hd)
	}
	for i := range n * heads {
		rmsNormRow(xs[i*hd:(i+1)*hd], xs[i*hd:(i+1)*hd], ws, eps)
	}
	return nil
}

// rmsNormRow is RMSNorm's row, shared with HeadRMSNorm; out may alias row.
func rmsNormRow(out, row, w []float32, eps float32) {
	var ss float64 // double accumulation, as ggml does
	for _, v := range row {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(row))+float64(eps)))
	for j, v := range row {
		out[j] = v * scale * w[j]
	}
}

// Scale multiplies the first n rows of x by s.
func (b *Backend) Scale(x kernels.Tensor, n int, s float32) error {
	xs, xt, err := f32Of(x, "Scale x")
	if err != nil {
		return err
	}
	m := n * xt.cols()
	if m > len(xs) {
		return fmt.Errorf("cpu backend: Scale: %d rows exceed %v", n, xt.shape)
	}
	for i := range xs[:m] {
		xs[i] *= s
	}
	return nil
}

// SoftCap caps the first n rows of x: v → cap·tanh(v/cap), in float32 as
// ggml's scale, tanh, scale sequence rounds it.
func (b *Backend) SoftCap(x kernels.Tensor, n int, cap float32) error {
	xs, xt, err := f32Of(x, "SoftCap x")
	if err != nil {
		return err
	}
	m := n * xt.cols()
	if m > len(xs) || !(cap > 0) {
		return fmt.Errorf("cpu backend: SoftCap: %d rows of %v, cap %g", n, xt.shape, cap)
	}
	inv := 1 / cap
	for i, v := range xs[:m] {
		xs[i] = cap * float32(math.Tanh(float64(v*inv)))
	}
	return nil
}

// GeGLU: dst = gelu_tanh(gate) ⊙ up. The GELU comes from a table over every
// F16 input, as ggml's CPU backend computes it (GGML_GELU_FP16): the input is
// rounded to F16 and the table holds F16 results. Matching that rounding keeps
// the feed-forward within float error of llama.cpp's rather than ~1e-3 apart.
func (b *Backend) GeGLU(dst, gate, up kernels.Tensor, n int) error {
	d, dt, err := f32Of(dst, "GeGLU dst")
	if err != nil {
		return err
	}
	g, _, err := f32Of(gate, "GeGLU gate")
	if err != nil {
		return err
	}
	u, _, err := f32Of(up, "GeGLU up")
	if err != nil {
		return err
	}
	m := n * dt.cols()
	if m > len(g) || m > len(u) || m > len(d) {
		return fmt.Errorf("cpu backend: GeGLU: %d rows exceed the tensors", n)
	}
	s := &b.geglu
	if s.fn == nil {
		s.fn, s.table = s.run, geluTable()
	}
	s.d, s.g, s.u = d, g, u
	b.parallelFor(m, 8192, s.fn)
	s.d, s.g, s.u = nil, nil, nil // do not pin the caller's buffers
	return nil
}

// gegluScratch is GeGLU's call and its one closure, kept on the backend (as
// swigluScratch) so that a call allocates nothing.
type gegluScratch struct {
	d, g, u []float32
	table   *[1 << 16]float32
	fn      func(lo, hi int)
}

func (s *gegluScratch) run(lo, hi int) {
	gegluRow(s.d[lo:hi], s.g[lo:hi], s.u[lo:hi], s.table)
}

// gegluRow is GeGLU over one run of values; d may alias g.
func gegluRow(d, g, u []float32, table *[1 << 16]float32) {
	for i, x := range g {
		switch {
		case x <= -10:
			d[i] = 0
		case x >= 10:
			d[i] = x * u[i]
		default:
			d[i] = table[quant.F32ToF16(x)] * u[i]
		}
	}
}

// geluTable maps each F16 bit pattern to gelu_tanh of its value, rounded to F16.
var geluTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = quant.F16ToF32(quant.F32ToF16(GELUTanh(quant.F16ToF32(uint16(h)))))
	}
	return &t
})

// GELUTanh is the tanh approximation of GELU, in float32 as ggml_gelu_f32
// evaluates it: 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))).
func GELUTanh(x float32) float32 {
	const sqrt2OverPi = 0.79788456080286535587989211986876
	inner := float32(sqrt2OverPi) * x * (1 + 0.044715*x*x)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}
