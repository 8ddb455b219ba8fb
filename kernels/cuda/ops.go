//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernels"
)

// Every op checks its arguments as kernels/cpu does, then records its
// launches; none touches the device (see doc.go).

// kernelSuffix names a weight type in kernel names (get_rows_q4_k, gemv_bf16_4).
var kernelSuffix = map[kernels.DType]string{
	kernels.F32: "f32", kernels.F16: "f16", kernels.BF16: "bf16",
	kernels.Q4_0: "q4_0", kernels.Q4_1: "q4_1", kernels.Q5_0: "q5_0", kernels.Q5_1: "q5_1",
	kernels.Q8_0: "q8_0", kernels.Q4_K: "q4_k", kernels.Q5_K: "q5_k", kernels.Q6_K: "q6_k",
	kernels.MXFP4: "mxfp4",
}

func f32Of(t kernels.Tensor, what string) (*tensor, error) {
	ct, err := asCUDA(t)
	if err != nil {
		return nil, err
	}
	if ct.dtype != kernels.F32 {
		return nil, fmt.Errorf("cuda backend: %s must be F32, got %v", what, ct.dtype)
	}
	return ct, nil
}

func (t *tensor) elems() int64 { return t.bytes / 4 }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (b *Backend) GetRows(dst, src kernels.Tensor, rows []int32) error {
	d, err := f32Of(dst, "GetRows dst")
	if err != nil {
		return err
	}
	s, err := asCUDA(src)
	if err != nil {
		return err
	}
	cols, nrows := s.cols(), s.rows()
	if d.cols() != cols || int64(len(rows)*cols) > d.elems() {
		return fmt.Errorf("cuda backend: GetRows: %d rows of %d into %v", len(rows), cols, d.shape)
	}
	for _, r := range rows {
		if r < 0 || int(r) >= nrows {
			return fmt.Errorf("cuda backend: GetRows: row %d out of range [0,%d)", r, nrows)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	off := b.step.push(rows)
	grid, block := [3]int{len(rows), 1, 1}, [3]int{128, 1, 1}
	if s.dtype == kernels.F32 {
		return b.launch("get_rows_f32_any", grid, block, ptrArg(d.ptr), ptrArg(s.ptr), tabArg(off), intArg(cols))
	}
	suffix, ok := kernelSuffix[s.dtype]
	if !ok || cols%16 != 0 {
		return fmt.Errorf("cuda backend: GetRows: %v rows of %d elements are not supported", s.dtype, cols)
	}
	return b.launch("get_rows_"+suffix, grid, block, ptrArg(d.ptr), ptrArg(s.ptr), tabArg(off), intArg(cols),
		intArg(s.dtype.RowBytes(cols)))
}

func (b *Backend) RMSNorm(dst, x, w kernels.Tensor, n int, eps float32) error {
	d, err := f32Of(dst, "RMSNorm dst")
	if err != nil {
		return err
	}
	xt, err := f32Of(x, "RMSNorm x")
	if err != nil {
		return err
	}
	wt, err := f32Of(w, "RMSNorm weight")
	if err != nil {
		return err
	}
	cols := xt.cols()
	if wt.elems() != int64(cols) || int64(n*cols) > xt.elems() || int64(n*cols) > d.elems() {
		return fmt.Errorf("cuda backend: RMSNorm: %d rows of %d, weight %d", n, cols, wt.elems())
	}
	if n <= 0 {
		return nil
	}
	// x += o just before, over exactly these rows: one pass does both.
	if l := b.step.last(); l != nil && l.fn == "add" && l.args[0] == uint64(xt.ptr) && l.args[2] == uint64(n*cols) && l.args[1] != uint64(d.ptr) {
		o := l.args[1]
		*l = launch{fn: "add_rms_norm", grid: [3]int{n, 1, 1}, block: [3]int{256, 1, 1}, nargs: 6,
			args: [maxArgs]uint64{uint64(d.ptr), uint64(xt.ptr), o, uint64(wt.ptr), uint64(cols), f32Arg(eps).v}}
		return nil
	}
	return b.launch("rms_norm", [3]int{n, 1, 1}, [3]int{256, 1, 1},
		ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(wt.ptr), intArg(cols), f32Arg(eps))
}

func (b *Backend) MatMul(dst, x, w, bias kernels.Tensor, n int) error {
	d, err := f32Of(dst, "MatMul dst")
	if err != nil {
		return err
	}
	xt, err := f32Of(x, "MatMul x")
	if err != nil {
		return err
	}
	wt, err := asCUDA(w)
	if err != nil {
		return err
	}
	in, out := xt.cols(), wt.rows()
	if wt.cols() != in || d.cols() != out || int64(n*in) > xt.elems() || int64(n*out) > d.elems() {
		return fmt.Errorf("cuda backend: MatMul: x %v (n=%d) · w %v → dst %v", xt.shape, n, wt.shape, d.shape)
	}
	var biasArg arg
	if bias != nil {
		bt, err := f32Of(bias, "MatMul bias")
		if err != nil {
			return err
		}
		if bt.elems() != int64(out) {
			return fmt.Errorf("cuda backend: MatMul: bias of %d for %d outputs", bt.elems(), out)
		}
		biasArg = ptrArg(bt.ptr)
	}
	suffix, ok := kernelSuffix[wt.dtype]
	if !ok || in%32 != 0 {
		return fmt.Errorf("cuda backend: MatMul: %v weights with rows of %d elements are not supported (rows must be a multiple of 32)", wt.dtype, in)
	}
	if n <= 0 {
		return nil
	}
	if ok, err := b.blasMatMul(d, xt, wt, devPtr(biasArg.v), n, in, out); ok {
		return err
	}
	rowBytes := intArg(wt.dtype.RowBytes(in))
	if n > b.opts.GEMVMaxRows && n <= skinnyMaxRows && wt.dtype != kernels.F32 {
		return b.launch(skinnyKernel(n, suffix), [3]int{ceilDiv(out, 32), 1, 1}, [3]int{128, 1, 1},
			ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(wt.ptr), biasArg, intArg(n), intArg(in), intArg(out), rowBytes)
	}
	if n > b.opts.GEMVMaxRows && wt.dtype != kernels.F32 {
		return b.launch("mma_"+suffix, [3]int{ceilDiv(out, 64), ceilDiv(n, 64), 1}, [3]int{128, 1, 1},
			ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(wt.ptr), biasArg, intArg(n), intArg(in), intArg(out), rowBytes)
	}
	// Decode kernels: up to 8 rows per pass (F32 weights take this path at
	// any n: they are rare and small, norms aside).
	for r0 := 0; r0 < n; r0 += 8 {
		rows := min(8, n-r0)
		nr := 8
		switch {
		case rows == 1:
			nr = 1
		case rows == 2:
			nr = 2
		case rows <= 4:
			nr = 4
		}
		fn := fmt.Sprintf("gemv_%s_%d", suffix, nr)
		x, dst := ptrArg(xt.ptr+devOff(4*r0*in)), ptrArg(d.ptr+devOff(4*r0*out))
		if n <= 8 && b.fuseGEMV(fn, x, intArg(rows), intArg(in), rowBytes, dst, ptrArg(wt.ptr), biasArg, out) {
			continue
		}
		if in > onesLen {
			return fmt.Errorf("cuda backend: MatMul: rows of %d elements; the decode kernels take at most %d", in, onesLen)
		}
		normW, eps, normOut := ptrArg(b.ones), arg{}, arg{}
		if n <= 8 {
			if nx, nw, ne, ok := b.foldNorm(xt, n, in, dst); ok {
				x, normW, eps, normOut = nx, nw, ne, ptrArg(xt.ptr)
			}
		}
		err := b.launch(fn, [3]int{ceilDiv(out, gemvRowsPerBlock(fn)), 1, 1}, [3]int{128, 1, 1},
			x, intArg(rows), intArg(in), rowBytes, dst, ptrArg(wt.ptr), biasArg, intArg(out),
			arg{}, arg{}, arg{}, arg{}, arg{}, arg{}, arg{}, arg{}, arg{}, arg{}, normW, eps, normOut)
		if err != nil {
			return err
		}
	}
	return nil
}

// onesLen is the length of the backend's buffer of ones (Backend.ones), the
// norm weight of a GEMV without a folded RMSNorm: the longest row a decode
// kernel takes.
const onesLen = 1 << 17

// foldNorm takes the step's last launch off when it is the RMSNorm that
// wrote x (not in place, n rows of in) and returns its input, weight and
// eps, for the GEMV about to read x to apply itself (gemv_fold_norm): one launch
// fewer, and no pass of its own over the hidden state. The GEMV still writes
// x, for any later reader. dst must not be the norm's input.
func (b *Backend) foldNorm(x *tensor, n, in int, dst arg) (raw, w, eps arg, ok bool) {
	s := &b.step
	l := s.last()
	if l == nil || l.fn != "rms_norm" || l.args[0] != uint64(x.ptr) || l.args[1] == l.args[0] || l.grid[0] != n ||
		l.args[3] != uint64(in) || l.args[1] == dst.v {
		return arg{}, arg{}, arg{}, false
	}
	raw, w, eps = arg{v: l.args[1]}, arg{v: l.args[2]}, arg{v: l.args[4]}
	s.launches = s.launches[:len(s.launches)-1]
	return raw, w, eps, true
}

// GEMV launch arguments (matmul.cu's GEMV_PARAMS): x, n, in, rowBytes, then
// up to gemvSets matrices of (dst, w, bias, out), then the fused epilogues'
// res (residual added to) and glu (SwiGLU output), then the folded RMSNorm's
// weight, eps and output (gemv_fold_norm; normOut 0 when there is none).
const (
	gemvSets    = 3
	gemvRes     = 4 + 4*gemvSets
	gemvGLU     = gemvRes + 1
	gemvNormOut = gemvGLU + 3
)

// gemvRowsPerBlock is how many rows of each matrix a GEMV block takes (R in
// matmul.cu's GEMV_HALF/GEMV_BLOCKS; the glu variants take as many of gate
// and of up).
func gemvRowsPerBlock(fn string) int {
	if strings.Contains(fn, "f16_") { // f16 and bf16
		return 4
	}
	return 2
}

// plainGEMV is the step's last launch when it is a GEMV nothing has been
// fused into yet.
func (s *step) plainGEMV() *launch {
	l := s.last()
	if l == nil || !strings.HasPrefix(l.fn, "gemv_") || strings.HasPrefix(l.fn, "gemv_glu_") ||
		l.args[gemvRes] != 0 || l.args[gemvGLU] != 0 {
		return nil
	}
	return l
}

// fuseGEMV adds a matrix to the step's last launch when that is a GEMV of the
// same kernel over the same input (q, k and v; gate and up), so one launch
// streams them all. The new output must not overlap the launch's input or
// outputs: the matrices then run in any order with the same results.
func (b *Backend) fuseGEMV(fn string, x, n, in, rowBytes, dst, w, bias arg, out int) bool {
	l := b.step.plainGEMV()
	// x is the launch's input, or the output of the RMSNorm folded into it
	sameX := l != nil && (l.args[0] == x.v || (l.args[gemvNormOut] != 0 && l.args[gemvNormOut] == x.v))
	if !sameX || l.fn != fn || l.args[1] != n.v || l.args[2] != in.v || l.args[3] != rowBytes.v || dst.v == x.v ||
		dst.v == l.args[0] {
		return false
	}
	rpb, blocks := gemvRowsPerBlock(fn), 0
	for i := range gemvSets {
		set := l.args[4+4*i : 8+4*i]
		if set[3] == 0 { // free set
			set[0], set[1], set[2], set[3] = dst.v, w.v, bias.v, uint64(out)
			l.grid[0] = blocks + ceilDiv(out, rpb)
			return true
		}
		if set[0] == dst.v {
			return false
		}
		blocks += ceilDiv(int(set[3]), rpb)
	}
	return false
}

// fuseResidual makes the step's last launch, a one-matrix GEMV that wrote x
// ([n, cols] like dst), also add its result into dst: the residual Add
// dst += x of the forward pass, without a launch or a pass over x of its own.
// The GEMV must not read dst (it is written while other blocks still read).
func (b *Backend) fuseResidual(d, x *tensor, n int) bool {
	l := b.step.plainGEMV()
	if l == nil || l.args[4] != uint64(x.ptr) || l.args[8+3] != 0 || l.args[1] != uint64(n) ||
		l.args[7] != uint64(d.cols()) || l.args[0] == uint64(d.ptr) || l.args[gemvNormOut] == uint64(d.ptr) || d.ptr == x.ptr {
		return false
	}
	l.args[gemvRes] = uint64(d.ptr)
	return true
}

// fuseSwiGLU turns the step's last launch, the gate and up GEMV of one input
// (exactly those two matrices, of one size), into its glu variant: each
// block takes the same rows of both, writes gate and up as before and dst =
// silu(gate)·up, so SwiGLU needs no launch or pass of its own.
func (b *Backend) fuseSwiGLU(d, gate, up *tensor, n int) bool {
	l := b.step.plainGEMV()
	if l == nil || l.args[4] != uint64(gate.ptr) || l.args[8] != uint64(up.ptr) || l.args[7] != l.args[11] ||
		l.args[12+3] != 0 || l.args[1] != uint64(n) || l.args[7] != uint64(d.cols()) || l.args[0] == uint64(d.ptr) ||
		l.args[gemvNormOut] == uint64(d.ptr) {
		return false
	}
	glu := "gemv_glu_" + strings.TrimPrefix(l.fn, "gemv_")
	if !b.drv.has(glu) { // glu kernels take one row of x
		return false
	}
	l.fn = glu
	l.args[gemvGLU] = uint64(d.ptr)
	l.grid[0] = ceilDiv(int(l.args[7]), gemvRowsPerBlock(l.fn))
	return true
}

func (b *Backend) RoPE(x, invFreq kernels.Tensor, pos []int32, heads int, style kernels.RoPEStyle) error {
	xt, err := f32Of(x, "RoPE x")
	if err != nil {
		return err
	}
	ft, err := f32Of(invFreq, "RoPE invFreq")
	if err != nil {
		return err
	}
	cols := xt.cols()
	if heads <= 0 || cols%heads != 0 {
		return fmt.Errorf("cuda backend: RoPE: %d columns do not split into %d heads", cols, heads)
	}
	headDim, half := cols/heads, int(ft.elems())
	if 2*half > headDim || int64(len(pos)*cols) > xt.elems() {
		return fmt.Errorf("cuda backend: RoPE: %d frequencies for head size %d, %d rows", half, headDim, len(pos))
	}
	for _, p := range pos {
		if p < 0 {
			return fmt.Errorf("cuda backend: RoPE: negative position %d", p)
		}
	}
	if len(pos) == 0 {
		return nil
	}
	halves := 0
	if style == kernels.RoPEHalves {
		halves = 1
	}
	off := b.step.pushPositions(pos)
	// q then k at the same positions: one launch rotates both.
	if l := b.step.last(); l != nil && l.fn == "rope" && l.args[3] == 0 && l.tables == 1<<5 && l.args[5] == uint64(off) &&
		l.args[4] == uint64(ft.ptr) && l.args[6] == uint64(headDim) && l.args[8] == uint64(halves) &&
		l.args[0] != uint64(xt.ptr) && l.grid[1] == len(pos) {
		l.args[2], l.args[3] = uint64(xt.ptr), uint64(heads)
		l.grid[0] = ceilDiv((int(l.args[1])+heads)*half, 128)
		return nil
	}
	return b.launch("rope", [3]int{ceilDiv(heads*half, 128), len(pos), 1}, [3]int{128, 1, 1},
		ptrArg(xt.ptr), intArg(heads), arg{}, intArg(0), ptrArg(ft.ptr), tabArg(off), intArg(headDim), intArg(half), intArg(halves))
}

func (b *Backend) SwiGLU(dst, gate, up kernels.Tensor, n int) error {
	d, err := f32Of(dst, "SwiGLU dst")
	if err != nil {
		return err
	}
	g, err := f32Of(gate, "SwiGLU gate")
	if err != nil {
		return err
	}
	u, err := f32Of(up, "SwiGLU up")
	if err != nil {
		return err
	}
	m := int64(n * d.cols())
	if m > g.elems() || m > u.elems() || m > d.elems() {
		return fmt.Errorf("cuda backend: SwiGLU: %d rows exceed the tensors", n)
	}
	if m <= 0 {
		return nil
	}
	if n <= 8 && b.fuseSwiGLU(d, g, u, n) {
		return nil
	}
	return b.launch("swiglu", elementGrid(m), [3]int{256, 1, 1}, ptrArg(d.ptr), ptrArg(g.ptr), ptrArg(u.ptr), arg{v: uint64(m)})
}

func (b *Backend) Add(dst, x kernels.Tensor, n int) error {
	d, err := f32Of(dst, "Add dst")
	if err != nil {
		return err
	}
	xt, err := f32Of(x, "Add x")
	if err != nil {
		return err
	}
	m := int64(n * d.cols())
	if m > xt.elems() || m > d.elems() {
		return fmt.Errorf("cuda backend: Add: %d rows exceed the tensors", n)
	}
	if m <= 0 {
		return nil
	}
	if n <= 8 && b.fuseResidual(d, xt, n) {
		return nil
	}
	return b.launch("add", elementGrid(m), [3]int{256, 1, 1}, ptrArg(d.ptr), ptrArg(xt.ptr), arg{v: uint64(m)})
}

// elementGrid covers m elements with 256-thread blocks, at most 8192 of
// them: the element-wise kernels stride over the rest.
func elementGrid(m int64) [3]int {
	return [3]int{int(min((m+255)/256, 8192)), 1, 1}
}
