//go:build amd64 && !noasm

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// useAVX2 selects the assembly kernels in dot_amd64.s. F16C converts the
// blocks' f16 scales; every AVX2 CPU has it, but it is checked all the same.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// useVNNI512 selects the Q8_0 and Q5_0 multi-activation kernels of
// dotq8v_amd64.s and dotq5v_amd64.s, which give the AVX2 kernels' bits at
// two products a zmm (x/sys/cpu reports the AVX-512 flags only where the OS
// saves the zmm state).
var useVNNI512 = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func expF32AVX2(dst, x *float32, n int, sub float32) float32

//go:noescape
func siluMulF32AVX2(dst, gate, up *float32, n int)

// expF32Fast and siluMulF32Fast: assembly for the multiple-of-8 prefix, the
// generic code for the tail.
func expF32Fast(dst, x []float32, sub float32) float32 {
	n := len(x)
	dst = dst[:n]
	m := n &^ 7
	return expF32AVX2(&dst[0], &x[0], m, sub) + expF32Generic(dst[m:], x[m:], sub)
}

func siluMulF32Fast(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	m := n &^ 7
	siluMulF32AVX2(&dst[0], &gate[0], &up[0], m)
	siluMulF32Generic(dst[m:], gate[m:], up[m:])
}

// dotF32Fast: the assembly covers the multiple-of-8 prefix, Go the tail.
func dotF32Fast(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	m := n &^ 7
	s := dotF32AVX2(&a[0], &b[0], m)
	for i := m; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

//go:noescape
func dotF16F32AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16F32AVX2(w *byte, x *float32, n int) float32

// dotF16F32Fast and dotBF16F32Fast: assembly for the multiple-of-8 prefix, Go
// for the tail; w holds len(x) halves.
func dotF16F32Fast(w []byte, x []float32) float32 {
	n := len(x)
	w = w[:2*n]
	m := n &^ 7
	return dotF16F32AVX2(&w[0], &x[0], m) + dotF16F32Generic(w[2*m:], x[m:])
}

func dotBF16F32Fast(w []byte, x []float32) float32 {
	n := len(x)
	w = w[:2*n]
	m := n &^ 7
	return dotBF16F32AVX2(&w[0], &x[0], m) + dotBF16F32Generic(w[2*m:], x[m:])
}

//go:noescape
func dotQ4_1Q8_1Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ4_1Q8_1RowsVNNI(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ8_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ8_0Q8_0Rows8VNNI1(w *byte, wstride int, x *byte, nb int, dst *float32, groups int)

//go:noescape
func dotQ5_0Q8_0Rows8VNNI1(w *byte, wstride int, x *byte, nb int, dst *float32, groups int)

// groupsOf8 makes a row kernel of an AVX-512 kernel for whole groups of
// eight rows (groups8) and the AVX2 kernel giving the same bits (rest),
// which takes the rows past the last group.
func groupsOf8(groups8, rest func(w *byte, wstride int, x *byte, nb int, dst *float32, n int)) func(w *byte, wstride int, x *byte, nb int, dst *float32, rows int) {
	return func(w *byte, wstride int, x *byte, nb int, dst *float32, rows int) {
		if g := rows / 8; g > 0 {
			groups8(w, wstride, x, nb, dst, g)
			if rows == 8*g { // no rest: w and dst stay inside their allocations (checkptr)
				return
			}
			w = (*byte)(unsafe.Add(unsafe.Pointer(w), 8*g*wstride))
			dst = (*float32)(unsafe.Add(unsafe.Pointer(dst), 4*8*g))
			rows -= 8 * g
		}
		if rows > 0 {
			rest(w, wstride, x, nb, dst, rows)
		}
	}
}

var (
	dotQ8_0Q8_0RowsVNNI = groupsOf8(dotQ8_0Q8_0Rows8VNNI1, dotQ8_0Q8_0Rows)
	dotQ5_0Q8_0RowsVNNI = groupsOf8(dotQ5_0Q8_0Rows8VNNI1, dotQ5_0Q8_0Rows)
)

//go:noescape
func dotQ4_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ5_0Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ5_1Q8_1Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

//go:noescape
func dotQ4_KQ8_K(w, x *byte, nb int) float32

//go:noescape
func dotQ5_KQ8_K(w, x *byte, nb int) float32

//go:noescape
func dotQ6_KQ8_K(w, x *byte, nb int) float32

//go:noescape
func dotQ8_KQ8_K(w, x *byte, nb int) float32

//go:noescape
func actQ8_0AVX2(dst *byte, x *float32, nb int)

//go:noescape
func actQ8_1AVX2(dst *byte, x *float32, nb int)

//go:noescape
func actQ8_KAVX512(dst *byte, x *float32, nb int)

// quantizeQ8_KAVX512 is quant.ActQ8_K in AVX-512 (actk_amd64.s).
func quantizeQ8_KAVX512(dst []byte, x []float32) {
	nb := len(x) / 256
	if nb == 0 {
		return
	}
	_ = dst[nb*quant.Q8_KBlockBytes-1]
	actQ8_KAVX512(&dst[0], &x[0], nb)
}

// asmQuantize wraps an activation quantizer (blocks of 32 floats, bb bytes).
func asmQuantize(kernel func(dst *byte, x *float32, nb int), bb int) func(dst []byte, x []float32) {
	return func(dst []byte, x []float32) {
		nb := len(x) / 32
		if nb == 0 {
			return
		}
		_ = dst[nb*bb-1]
		kernel(&dst[0], &x[0], nb)
	}
}

//go:noescape
func dotQ4_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)

//go:noescape
func dotQ5_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)

//go:noescape
func dotQ6_KQ8_KRows2(w, x0, x1 *byte, nb int, dst0, dst1 *float32)

// asmDot2 makes a two-activation row kernel of a one-row, two-activation
// assembly kernel.
func asmDot2(kernel func(w, x0, x1 *byte, nb int, dst0, dst1 *float32), wbb, xbb int) rows2Dot {
	return func(dst0, dst1 []float32, w []byte, wstride int, x0, x1 []byte, nb int) {
		dst1 = dst1[:len(dst0)]
		if nb == 0 {
			clear(dst0)
			clear(dst1)
			return
		}
		_, _ = x0[nb*xbb-1], x1[nb*xbb-1]
		for r := range dst0 {
			_ = w[r*wstride+nb*wbb-1]
			kernel(&w[r*wstride], &x0[0], &x1[0], nb, &dst0[r], &dst1[r])
		}
	}
}

// asmDot makes a row kernel of a one-row assembly kernel: with 256-element
// super-blocks the call is a small part of a row's work.
func asmDot(kernel func(w, x *byte, nb int) float32, wbb, xbb int) rowsDot {
	return func(dst []float32, w []byte, wstride int, x []byte, nb int) {
		if nb == 0 {
			clear(dst)
			return
		}
		_ = x[nb*xbb-1]
		for r := range dst {
			_ = w[r*wstride+nb*wbb-1]
			dst[r] = kernel(&w[r*wstride], &x[0], nb)
		}
	}
}

//go:noescape
func dotQ4_1Q8_1Rows2(w *byte, wstride int, x0, x1 *byte, nb int, dst0, dst1 *float32, pairs int)

//go:noescape
func dotQ8_0Q8_0Rows2(w *byte, wstride int, x0, x1 *byte, nb int, dst0, dst1 *float32, pairs int)

// asmRows2 wraps a two-activation kernel that takes weight rows in pairs; an
// odd last row goes through the one-activation kernel, which gives the same bits.
func asmRows2(kernel func(w *byte, wstride int, x0, x1 *byte, nb int, dst0, dst1 *float32, pairs int), one rowsDot, wbb, xbb int) rows2Dot {
	return func(dst0, dst1 []float32, w []byte, wstride int, x0, x1 []byte, nb int) {
		rows := len(dst0)
		if rows == 0 {
			return
		}
		if nb == 0 {
			clear(dst0)
			clear(dst1)
			return
		}
		_, _, _ = w[(rows-1)*wstride+nb*wbb-1], x0[nb*xbb-1], x1[nb*xbb-1]
		dst1 = dst1[:rows]
		if pairs := rows / 2; pairs > 0 {
			kernel(&w[0], wstride, &x0[0], &x1[0], nb, &dst0[0], &dst1[0], pairs)
		}
		if rows%2 == 1 {
			last := w[(rows-1)*wstride:]
			one(dst0[rows-1:], last, wstride, x0, nb)
			one(dst1[rows-1:], last, wstride, x1, nb)
		}
	}
}

// The four- and eight-activation kernels (dotq4_amd64.s, dotq5_amd64.s,
// dotq8_amd64.s) share one signature.
type rowsMKernel func(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ5_0Q8_0Rows4(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ5_0Q8_0Rows8(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ5_0Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ5_0Q8_0Rows8VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows2VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows8x2VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1Rows8x3VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0Rows8x2VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

//go:noescape
func dotQ8_0Q8_0Rows8x3VNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

// rowsMOf8 makes an m-activation kernel of groups8, which takes whole
// groups of eight weight rows and unpacks each block once for all m
// activations (the pair kernels unpack a block per two weight rows and
// activation, so a two-row verify step cost two steps' arithmetic), and
// pairs, the pair kernel giving the same bits, which takes the rows past
// the last group. groups8 reads the activations' scales from their blocks,
// as the one-row kernel does; pairs gets the scale table. wbb and xbb are
// the weight and activation block bytes.
func rowsMOf8(groups8 func(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int), m int, pairs rowsMDot, wbb, xbb int) rowsMDot {
	return func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, sc []float32, nb int) {
		g := rows / 8
		if g == 0 || nb == 0 {
			pairs(dst, dstride, w, wstride, rows, x, xstride, sc, nb)
			return
		}
		_ = dst[(m-1)*dstride+8*g-1]
		_, _ = w[(8*g-1)*wstride+nb*wbb-1], x[(m-1)*xstride+nb*xbb-1]
		groups8(&w[0], wstride, &x[0], xstride, nb, &dst[0], dstride, g)
		if rows > 8*g {
			pairs(dst[8*g:], dstride, w[8*g*wstride:], wstride, rows-8*g, x, xstride, sc, nb)
		}
	}
}

//go:noescape
func dotQ4_1Q8_1Rows3VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows2VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows3VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_KQ8_KRows4(w, x *byte, xstride, nb int, dst *float32, dstride int)

//go:noescape
func dotQ6_KQ8_KRows4(w, x *byte, xstride, nb int, dst *float32, dstride int)

// asmDot4 makes a four-activation row kernel of a one-row, four-activation
// assembly kernel (K-quants: super-blocks make the call a small part of a
// row's work). It reads the activations' scales itself; sc goes unused.
func asmDot4(kernel func(w, x *byte, xstride, nb int, dst *float32, dstride int), wbb, xbb int) rowsMDot {
	return func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, _ []float32, nb int) {
		if rows <= 0 {
			return
		}
		_ = dst[3*dstride+rows-1]
		if nb == 0 {
			for j := range 4 {
				clear(dst[j*dstride : j*dstride+rows])
			}
			return
		}
		_, _ = w[(rows-1)*wstride+nb*wbb-1], x[3*xstride+nb*xbb-1]
		for r := range rows {
			kernel(&w[r*wstride], &x[0], xstride, nb, &dst[r], dstride)
		}
	}
}

// asmRowsM wraps an m-activation assembly kernel, checking the bounds of
// the last weight row, activation row, scale and result once.
func asmRowsM(kernel rowsMKernel, m, wbb, xbb int) rowsMDot {
	return func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, sc []float32, nb int) {
		if rows <= 0 {
			return
		}
		_ = dst[(m-1)*dstride+rows-1]
		if nb == 0 {
			for j := range m {
				clear(dst[j*dstride : j*dstride+rows])
			}
			return
		}
		_, _, _ = w[(rows-1)*wstride+nb*wbb-1], x[(m-1)*xstride+nb*xbb-1], sc[nb*2*m-1]
		kernel(&w[0], wstride, &x[0], xstride, &sc[0], nb, &dst[0], dstride, rows)
	}
}

// asmRows wraps an assembly row kernel: it checks the bounds once, since the
// assembly trusts its arguments.
func asmRows(kernel func(w *byte, wstride int, x *byte, nb int, dst *float32, rows int), wbb, xbb int) rowsDot {
	return func(dst []float32, w []byte, wstride int, x []byte, nb int) {
		rows := len(dst)
		if rows == 0 {
			return
		}
		if nb == 0 {
			clear(dst)
			return
		}
		_, _ = w[(rows-1)*wstride+nb*wbb-1], x[nb*xbb-1]
		kernel(&w[0], wstride, &x[0], nb, &dst[0], rows)
	}
}

func init() {
	if !useAVX2 {
		return
	}
	quantKernels[kernels.Q4_1].rows = asmRows(dotQ4_1Q8_1Rows, 20, 36)
	if useVNNI512 {
		// Decode's kernel: the same bits at about 1.5× the AVX2 rate.
		quantKernels[kernels.Q4_1].rows = asmRows(dotQ4_1Q8_1RowsVNNI, 20, 36)
	}
	quantKernels[kernels.Q4_1].rows2 = asmRows2(dotQ4_1Q8_1Rows2, quantKernels[kernels.Q4_1].rows, 20, 36)
	quantKernels[kernels.Q8_0].rows = asmRows(dotQ8_0Q8_0Rows, 34, 34)
	if useVNNI512 {
		quantKernels[kernels.Q8_0].rows = asmRows(dotQ8_0Q8_0RowsVNNI, 34, 34)
	}
	quantKernels[kernels.Q4_1].rows4 = asmRowsM(dotQ4_1Q8_1Rows4, 4, 20, 36)
	quantKernels[kernels.Q8_0].rows4 = asmRowsM(dotQ8_0Q8_0Rows4, 4, 34, 34)
	quantKernels[kernels.Q4_1].rows8 = asmRowsM(dotQ4_1Q8_1Rows8, 8, 20, 36)
	quantKernels[kernels.Q8_0].rows8 = asmRowsM(dotQ8_0Q8_0Rows8, 8, 34, 34)
	if useVNNI512 {
		// Speculative verify steps' kernels: the AVX2 bits at two products a zmm.
		quantKernels[kernels.Q4_1].rows4 = asmRowsM(dotQ4_1Q8_1Rows4VNNI, 4, 20, 36)
		quantKernels[kernels.Q4_1].rows8 = asmRowsM(dotQ4_1Q8_1Rows8VNNI, 8, 20, 36)
		quantKernels[kernels.Q8_0].rows4 = asmRowsM(dotQ8_0Q8_0Rows4VNNI, 4, 34, 34)
		quantKernels[kernels.Q8_0].rows8 = asmRowsM(dotQ8_0Q8_0Rows8VNNI, 8, 34, 34)
	}
	quantKernels[kernels.Q8_0].rows2 = asmRows2(dotQ8_0Q8_0Rows2, quantKernels[kernels.Q8_0].rows, 34, 34)
	if useVNNI512 {
		// Verify steps of 2, 3, 6 and 7 rows (issue 26): one pass over the
		// weights where rows2 + rows took two; whole groups of eight weight
		// rows unpack each block once for all the activations (rowsMOf8:
		// SmolLM2 at 2 threads, BenchmarkSpecStepRows, a two-row step 1.19-1.21
		// one-row steps from 1.25-1.28, three rows 1.35-1.39 from 1.48-1.56).
		quantKernels[kernels.Q4_1].rows2M = rowsMOf8(dotQ4_1Q8_1Rows8x2VNNI, 2, asmRowsM(dotQ4_1Q8_1Rows2VNNI, 2, 20, 36), 20, 36)
		quantKernels[kernels.Q4_1].rows3 = rowsMOf8(dotQ4_1Q8_1Rows8x3VNNI, 3, asmRowsM(dotQ4_1Q8_1Rows3VNNI, 3, 20, 36), 20, 36)
		quantKernels[kernels.Q8_0].rows2M = rowsMOf8(dotQ8_0Q8_0Rows8x2VNNI, 2, asmRowsM(dotQ8_0Q8_0Rows2VNNI, 2, 34, 34), 34, 34)
		quantKernels[kernels.Q8_0].rows3 = rowsMOf8(dotQ8_0Q8_0Rows8x3VNNI, 3, asmRowsM(dotQ8_0Q8_0Rows3VNNI, 3, 34, 34), 34, 34)
		// One rows8 call over a 16-row tile costs less than rows4 + rows3
		// (Zen 4, BenchmarkRowsSmall: Q4_1 1527 ns against 908 + 804, Q8_0
		// 1481 against 914 + 693), and over a SmolLM2 step
		// (BenchmarkVerifyPad) 7 rows padded cost 7% less, 6 and 5 more.
		quantKernels[kernels.Q4_1].pad = padding{7, 4}
		quantKernels[kernels.Q8_0].pad = padding{7, 4}
		// Q5_0 has no two- or three-row kernels: one rows8 call costs less
		// than rows4 + two or three rows calls, one rows4 call less than
		// three rows calls (BenchmarkVerifyPad's Q5_0 step).
		quantKernels[kernels.Q5_0].pad = padding{6, 3}
	}
	quantKernels[kernels.Q4_0].rows = asmRows(dotQ4_0Q8_0Rows, 18, 34)
	quantKernels[kernels.Q5_0].rows = asmRows(dotQ5_0Q8_0Rows, 22, 34)
	if useVNNI512 {
		quantKernels[kernels.Q5_0].rows = asmRows(dotQ5_0Q8_0RowsVNNI, 22, 34)
	}
	quantKernels[kernels.Q5_0].rows4 = asmRowsM(dotQ5_0Q8_0Rows4, 4, 22, 34)
	quantKernels[kernels.Q5_0].rows8 = asmRowsM(dotQ5_0Q8_0Rows8, 8, 22, 34)
	if useVNNI512 {
		quantKernels[kernels.Q5_0].rows4 = asmRowsM(dotQ5_0Q8_0Rows4VNNI, 4, 22, 34)
		quantKernels[kernels.Q5_0].rows8 = asmRowsM(dotQ5_0Q8_0Rows8VNNI, 8, 22, 34)
	}
	quantKernels[kernels.Q5_1].rows = asmRows(dotQ5_1Q8_1Rows, 24, 36)
	for _, k := range quantKernels {
		switch k.actBlockBytes {
		case quant.Q8_0BlockBytes:
			k.quantize = asmQuantize(actQ8_0AVX2, quant.Q8_0BlockBytes)
		case quant.Q8_1BlockBytes:
			k.quantize = asmQuantize(actQ8_1AVX2, quant.Q8_1BlockBytes)
		case quant.Q8_KBlockBytes:
			if useVNNI512 {
				k.quantize = quantizeQ8_KAVX512
			}
		}
	}
	quantKernels[kernels.Q4_K].rows = asmDot(dotQ4_KQ8_K, 144, 292)
	quantKernels[kernels.Q5_K].rows = asmDot(dotQ5_KQ8_K, 176, 292)
	quantKernels[kernels.Q6_K].rows = asmDot(dotQ6_KQ8_K, 210, 292)
	quantKernels[kernels.Q4_K].rows2 = asmDot2(dotQ4_KQ8_KRows2, 144, 292)
	quantKernels[kernels.Q4_K].rows4 = asmDot4(dotQ4_KQ8_KRows4, 144, 292)
	quantKernels[kernels.Q6_K].rows4 = asmDot4(dotQ6_KQ8_KRows4, 210, 292)
	quantKernels[kernels.Q5_K].rows2 = asmDot2(dotQ5_KQ8_KRows2, 176, 292)
	quantKernels[kernels.Q6_K].rows2 = asmDot2(dotQ6_KQ8_KRows2, 210, 292)
	quantKernels[kernels.Q8_K].rows = asmDot(dotQ8_KQ8_K, 292, 292)
}
