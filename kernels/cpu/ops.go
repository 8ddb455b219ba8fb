package cpu

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

func f32Of(t kernels.Tensor, what string) ([]float32, *tensor, error) {
	ct, err := asCPU(t)
	if err != nil {
		return nil, nil, err
	}
	if ct.f32 == nil {
		return nil, nil, fmt.Errorf("cpu backend: %s must be F32, got %v", what, ct.dtype)
	}
	return ct.f32, ct, nil
}

func (b *Backend) GetRows(dst, src kernels.Tensor, rows []int32) error {
	d, dt, err := f32Of(dst, "GetRows dst")
	if err != nil {
		return err
	}
	s, err := asCPU(src)
	if err != nil {
		return err
	}
	cols, nrows := s.cols(), s.rows()
	if dt.cols() != cols || len(rows)*cols > len(d) {
		return fmt.Errorf("cpu backend: GetRows: %d rows of %d into %v", len(rows), cols, dt.shape)
	}
	for _, r := range rows {
		if r < 0 || int(r) >= nrows {
			return fmt.Errorf("cpu backend: GetRows: row %d out of range [0,%d)", r, nrows)
		}
	}
	if s.raw == nil { // F32 scratch: picking logit rows out of the hidden state
		for i, r := range rows {
			copy(d[i*cols:(i+1)*cols], s.f32[int(r)*cols:(int(r)+1)*cols])
		}
		return nil
	}
	return getRows(d, s, rows, &b.rowScratch)
}

func (b *Backend) RMSNorm(dst, x, w kernels.Tensor, n int, eps float32) error {
	d, _, err := f32Of(dst, "RMSNorm dst")
	if err != nil {
		return err
	}
	xs, xt, err := f32Of(x, "RMSNorm x")
	if err != nil {
		return err
	}
	ws, _, err := f32Of(w, "RMSNorm weight")
	if err != nil {
		return err
	}
	cols := xt.cols()
	if len(ws) != cols || n*cols > len(xs) || n*cols > len(d) {
		return fmt.Errorf("cpu backend: RMSNorm: %d rows of %d, weight %d", n, cols, len(ws))
	}
	for i := range n {
		row := xs[i*cols : (i+1)*cols]
		var ss float64 // double accumulation, as ggml does, so long rows keep their precision
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(cols)+float64(eps)))
		out := d[i*cols : (i+1)*cols]
		for j, v := range row {
			out[j] = v * scale * ws[j]
		}
	}
	return nil
}

func (b *Backend) MatMul(dst, x, w, bias kernels.Tensor, n int) error {
	a, err := matArgsOf(dst, x, w, bias, n)
	if err != nil {
		return err
	}
	matMulPrompt(&b.workers, a.dst, a.x, n, a.in, a.wt, a.out, a.bias, b.promptFor(n))
	return nil
}

// MatMuls is kernels.SharedInput's: the weights' rows as one operation when
// they share a quantized type and take the row kernels (no prompt rows on
// a tiled type), one MatMul each otherwise.
func (b *Backend) MatMuls(dsts []kernels.Tensor, x kernels.Tensor, ws, biases []kernels.Tensor, n int) error {
	if len(dsts) != len(ws) || biases != nil && len(biases) != len(ws) {
		return fmt.Errorf("cpu backend: MatMuls: %d outputs, %d weights, %d biases", len(dsts), len(ws), len(biases))
	}
	args := b.matArgs[:0]
	for i := range ws {
		var bias kernels.Tensor
		if biases != nil {
			bias = biases[i]
		}
		a, err := matArgsOf(dsts[i], x, ws[i], bias, n)
		if err != nil {
			return err
		}
		args = append(args, a)
	}
	b.matArgs = args
	prompt := b.promptFor(n)
	shared := len(args) > 1 && quantKernels[args[0].wt.dtype] != nil && !tiledRows(args[0].wt.dtype, prompt)
	for _, a := range args[1:] {
		shared = shared && a.wt.dtype == args[0].wt.dtype
	}
	if shared {
		matMulShared(&b.workers, args, n)
	} else {
		for _, a := range args {
			matMulPrompt(&b.workers, a.dst, a.x, n, a.in, a.wt, a.out, a.bias, prompt)
		}
	}
	clear(args) // do not pin the caller's buffers
	return nil
}

// matArgs is one checked MatMul: its operands as the kernels take them.
type matArgs struct {
	dst, x, bias []float32
	wt           *tensor
	in, out      int
}

func matArgsOf(dst, x, w, bias kernels.Tensor, n int) (matArgs, error) {
	d, dt, err := f32Of(dst, "MatMul dst")
	if err != nil {
		return matArgs{}, err
	}
	xs, xt, err := f32Of(x, "MatMul x")
	if err != nil {
		return matArgs{}, err
	}
	wt, err := asCPU(w)
	if err != nil {
		return matArgs{}, err
	}
	in, out := xt.cols(), wt.rows()
	if wt.cols() != in || dt.cols() != out || n*in > len(xs) || n*out > len(d) {
		return matArgs{}, fmt.Errorf("cpu backend: MatMul: x %v (n=%d) · w %v → dst %v", xt.shape, n, wt.shape, dt.shape)
	}
	var bs []float32
	if bias != nil {
		if bs, _, err = f32Of(bias, "MatMul bias"); err != nil {
			return matArgs{}, err
		}
		if len(bs) != out {
			return matArgs{}, fmt.Errorf("cpu backend: MatMul: bias of %d for %d outputs", len(bs), out)
		}
	}
	return matArgs{dst: d, x: xs, bias: bs, wt: wt, in: in, out: out}, nil
}

// promptFor is the batch's prompt flags for a MatMul over n rows: the
// flags when n is the batch's row count, none otherwise.
func (b *Backend) promptFor(n int) []bool {
	if len(b.prompt) == n { // a MatMul over the batch's rows
		return b.prompt
	}
	return nil
}

func (b *Backend) SwiGLU(dst, gate, up kernels.Tensor, n int) error {
	d, dt, err := f32Of(dst, "SwiGLU dst")
	if err != nil {
		return err
	}
	g, _, err := f32Of(gate, "SwiGLU gate")
	if err != nil {
		return err
	}
	u, _, err := f32Of(up, "SwiGLU up")
	if err != nil {
		return err
	}
	m := n * dt.cols()
	if m > len(g) || m > len(u) || m > len(d) {
		return fmt.Errorf("cpu backend: SwiGLU: %d rows exceed the tensors", n)
	}
	// A decode row (SmolLM2: 1536 elements) takes about a microsecond, not
	// much more than a hand-off (0.4–0.8 µs); a prompt's rows are worth sharing.
	s := &b.swiglu
	if s.fn == nil {
		s.fn = s.run
	}
	s.d, s.g, s.u = d, g, u
	b.parallelFor(m, 8192, s.fn)
	s.d, s.g, s.u = nil, nil, nil // do not pin the caller's buffers
	return nil
}

// swigluScratch is SwiGLU's call and the one closure handed to parallelFor,
// kept on the backend (as matScratch, attnScratch) so that a call, once
// per layer per step, allocates nothing.
type swigluScratch struct {
	d, g, u []float32
	fn      func(lo, hi int)
}

func (s *swigluScratch) run(lo, hi int) { siluMulF32(s.d[lo:hi], s.g[lo:hi], s.u[lo:hi]) }

func (b *Backend) Add(dst, x kernels.Tensor, n int) error {
	d, dt, err := f32Of(dst, "Add dst")
	if err != nil {
		return err
	}
	xs, _, err := f32Of(x, "Add x")
	if err != nil {
		return err
	}
	m := n * dt.cols()
	if m > len(xs) || m > len(d) {
		return fmt.Errorf("cpu backend: Add: %d rows exceed the tensors", n)
	}
	for i, v := range xs[:m] {
		d[i] += v
	}
	return nil
}
