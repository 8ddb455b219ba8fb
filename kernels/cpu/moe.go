package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/kernels"
)

var (
	_ kernels.MoEOps          = (*Backend)(nil)
	_ kernels.SharedExpertOps = (*Backend)(nil)
)

// moeScratch is MoEFFN's reusable state: the routing of the current call,
// the grouped products of quantized experts (moe_group.go), and for float
// experts the gathered rows of one expert at a time.
type moeScratch struct {
	rows    [][]int32   // by expert: the batch rows routed to it
	weights [][]float32 // by expert: those rows' weights
	probs   []float32   // [experts] one row's softmax
	pick    []int       // [k] one row's experts
	grp     moeGroups
	x, g, u []float32 // [m, hidden], [m, ffn] ×2: one float expert's rows
	o       []float32 // [m, hidden]

	// OAIMoEFFN's clamped SwiGLU as moeGrouped's act, made once so that a
	// call allocates no closure; alpha and limit are the current call's.
	oaiAct       func(h, g, u []float32)
	alpha, limit float32
}

func (b *Backend) MoEFFN(dst, x, logits, gate, up, down kernels.Tensor, n, k int, norm bool) error {
	return b.moeFFN("MoEFFN", dst, x, logits, gate, up, down, nil, n, k, norm, siluMulF32)
}

// moeFFN is MoEFFN with the gated activation act(h, g, u) (h = act(g) ⊙ u
// row by row) and, where downScale is set ([experts] F32), each expert's
// output scaled by its entry: folded into the routing weights, which
// multiply the same output. With up nil, gate is gate and up fused,
// [experts, 2·ffn, hidden] with each expert's gate rows before its up rows,
// multiplied as one matrix.
func (b *Backend) moeFFN(name string, dst, x, logits, gate, up, down, downScale kernels.Tensor, n, k int, norm bool, act func(h, g, u []float32)) error {
	d, dt, err := f32Of(dst, name+" dst")
	if err != nil {
		return err
	}
	xs, xt, err := f32Of(x, name+" x")
	if err != nil {
		return err
	}
	ls, lt, err := f32Of(logits, name+" logits")
	if err != nil {
		return err
	}
	gt, err := asCPU(gate)
	if err != nil {
		return err
	}
	var ut *tensor
	if up != nil {
		if ut, err = asCPU(up); err != nil {
			return err
		}
	}
	wd, err := asCPU(down)
	if err != nil {
		return err
	}
	var scale []float32
	if downScale != nil {
		if scale, _, err = f32Of(downScale, name+" down scale"); err != nil {
			return err
		}
	}
	hidden, experts := xt.cols(), lt.cols()
	fused := ut == nil
	if fused {
		ut = gt // the shapes' check below and the grouped path's kernels
	}
	if len(gt.shape) != 3 || len(ut.shape) != 3 || len(wd.shape) != 3 {
		return fmt.Errorf("cpu backend: %s: expert tensors %v %v %v are not [experts, rows, cols]", name, gt.shape, ut.shape, wd.shape)
	}
	ffn := gt.shape[1]
	if fused {
		ffn /= 2
	}
	switch {
	case gt.shape[0] != experts || gt.shape[2] != hidden || !slices.Equal(gt.shape, ut.shape) || fused && gt.shape[1] != 2*ffn,
		wd.shape[0] != experts || wd.shape[1] != hidden || wd.shape[2] != ffn,
		dt.cols() != hidden || n*hidden > len(xs) || n*hidden > len(d) || n*experts > len(ls),
		k <= 0 || k > experts, downScale != nil && len(scale) != experts:
		return fmt.Errorf("cpu backend: %s: x %v logits %v gate %v down %v dst %v, %d rows, top %d, %d down scales",
			name, xt.shape, lt.shape, gt.shape, wd.shape, dt.shape, n, k, len(scale))
	}
	s := &b.moe
	s.route(ls, n, experts, k, norm)
	for e, sc := range scale {
		for i := range s.weights[e] {
			s.weights[e][i] *= sc
		}
	}
	if kg, ku, kd, ok := moeKernels(gt, ut, wd); ok {
		if fused {
			ut = nil
		}
		b.moeGrouped(d, xs, n, gt, ut, wd, kg, ku, kd, act, nil)
		return nil
	}
	clear(d[:n*hidden])
	for e := range experts {
		m := len(s.rows[e])
		if m == 0 {
			continue
		}
		s.x, s.g, s.u, s.o = grow(s.x, m*hidden), grow(s.g, m*ffn), grow(s.u, m*ffn), grow(s.o, m*hidden)
		for i, r := range s.rows[e] {
			copy(s.x[i*hidden:(i+1)*hidden], xs[int(r)*hidden:(int(r)+1)*hidden])
		}
		if fused {
			// s.g holds each row's gate then up; h goes to s.u.
			s.g = grow(s.g, m*2*ffn)
			matMul(&b.workers, s.g, s.x, m, hidden, expertView(gt, e), 2*ffn, nil)
			for i := range m {
				gu := s.g[i*2*ffn : (i+1)*2*ffn]
				act(s.u[i*ffn:(i+1)*ffn], gu[:ffn], gu[ffn:])
			}
			matMul(&b.workers, s.o, s.u, m, ffn, expertView(wd, e), hidden, nil)
		} else {
			matMul(&b.workers, s.g, s.x, m, hidden, expertView(gt, e), ffn, nil)
			matMul(&b.workers, s.u, s.x, m, hidden, expertView(ut, e), ffn, nil)
			act(s.g[:m*ffn], s.g[:m*ffn], s.u[:m*ffn])
			matMul(&b.workers, s.o, s.g, m, ffn, expertView(wd, e), hidden, nil)
		}
		for i, r := range s.rows[e] {
			axpy(d[int(r)*hidden:(int(r)+1)*hidden], s.weights[e][i], s.o[i*hidden:(i+1)*hidden])
		}
	}
	return nil
}

func (b *Backend) GatedAdd(dst, x, gate kernels.Tensor, n int) error {
	d, dt, err := f32Of(dst, "GatedAdd dst")
	if err != nil {
		return err
	}
	xs, xt, err := f32Of(x, "GatedAdd x")
	if err != nil {
		return err
	}
	gs, gt, err := f32Of(gate, "GatedAdd gate")
	if err != nil {
		return err
	}
	cols := dt.cols()
	if xt.cols() != cols || gt.cols() != 1 || n*cols > len(d) || n*cols > len(xs) || n > len(gs) {
		return fmt.Errorf("cpu backend: GatedAdd: dst %v, x %v, gate %v, %d rows", dt.shape, xt.shape, gt.shape, n)
	}
	for i := range n {
		g := float32(1 / (1 + math.Exp(-float64(gs[i]))))
		axpy(d[i*cols:(i+1)*cols], g, xs[i*cols:(i+1)*cols])
	}
	return nil
}

// route fills s.rows and s.weights from the router logits of n rows.
func (s *moeScratch) route(logits []float32, n, experts, k int, norm bool) {
	if len(s.rows) < experts {
		s.rows, s.weights = make([][]int32, experts), make([][]float32, experts)
	}
	for e := range experts {
		s.rows[e], s.weights[e] = s.rows[e][:0], s.weights[e][:0]
	}
	s.probs, s.pick = grow(s.probs, experts), growInts(s.pick, k)
	for r := range n {
		row := logits[r*experts : (r+1)*experts]
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var sum float32
		for e, v := range row {
			s.probs[e] = float32(math.Exp(float64(v - mx)))
			sum += s.probs[e]
		}
		// Top k by repeated selection: k is small (2–8), experts tens to hundreds.
		var picked float32
		for j := range k {
			best := -1
			for e := range experts {
				if s.probs[e] >= 0 && (best < 0 || s.probs[e] > s.probs[best]) {
					best = e
				}
			}
			s.pick[j] = best
			picked += s.probs[best]
			s.probs[best] = -1 - s.probs[best] // taken; −1−p keeps p recoverable
		}
		div := sum
		if norm {
			div = picked
		}
		for _, e := range s.pick[:k] {
			s.rows[e] = append(s.rows[e], int32(r))
			s.weights[e] = append(s.weights[e], (-1-s.probs[e])/div)
		}
	}
}

// expertView is expert e's matrix of a [experts, rows, cols] weight: rows
// consecutive rows of the same bytes.
func expertView(t *tensor, e int) *tensor {
	rows, cols := t.shape[1], t.shape[2]
	rb := t.dtype.RowBytes(cols)
	v := &tensor{shape: []int{rows, cols}, dtype: t.dtype, raw: t.raw[e*rows*rb : (e+1)*rows*rb]}
	if t.f32 != nil {
		v.f32 = t.f32[e*rows*cols : (e+1)*rows*cols]
	}
	return v
}

func axpy(dst []float32, a float32, x []float32) {
	for i, v := range x {
		dst[i] += a * v
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}
