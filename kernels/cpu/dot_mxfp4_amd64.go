//go:build amd64 && !noasm

package cpu

import "github.com/sluicehq/sluice/kernels/quant"

// dotMXFP4Q8_0Rows is dotmx_amd64.s: MXFP4 weight rows against one Q8_0
// activation row.
//
//go:noescape
func dotMXFP4Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

// dotMXFP4Q8_0RowsVNNI is dotmx_amd64.s's same kernel on AVX-512 VNNI
// (256-bit forms), with dotMXFP4Q8_0Rows's bits.
//
//go:noescape
func dotMXFP4Q8_0RowsVNNI(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

// dotMXFP4Q8_0Rows4VNNI is dotmxv_amd64.s: four activation rows at once,
// each product with the one-row kernels' bits (TestMXFP4Rows4VNNI).
//
//go:noescape
func dotMXFP4Q8_0Rows4VNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

func init() {
	if useAVX2 {
		mxfp4Kernel.rows = asmRows(dotMXFP4Q8_0Rows, 17, 34)
		if useVNNI512 {
			mxfp4Kernel.rows = asmRows(dotMXFP4Q8_0RowsVNNI, 17, 34)
			mxfp4Kernel.rows4 = mxfp4Rows4(asmRowsM(dotMXFP4Q8_0Rows4VNNI, 4, 17, 34), mxfp4Kernel.rows)
		}
		// dot_amd64.go's init gives every Q8_0 partner the assembly
		// quantizer, but runs before dot_mxfp4.go's registers this kernel,
		// which kept quant.ActQ8_0 (the same bytes, a fifth of a tiny
		// gpt-oss's MoE time).
		mxfp4Kernel.quantize = asmQuantize(actQ8_0AVX2, quant.Q8_0BlockBytes)
	}
}

// mxfp4Rows4MinBlocks: below this many blocks a row, the four-row kernel's
// setup and its per-pair horizontal sums cost more than its shared weight
// loads save (BenchmarkMXFP4Rows4, 64 weight rows × 4: at 2 blocks 1.2 µs
// against 1.05 µs for the one-row kernel four times; at 90 blocks 23 µs
// against 59 µs). Either way gives the same bits.
const mxfp4Rows4MinBlocks = 8

// mxfp4Rows4 is the four-row kernel k4 for rows of mxfp4Rows4MinBlocks
// blocks or more, the one-row kernel four times below that.
func mxfp4Rows4(k4 rowsMDot, rows1 rowsDot) rowsMDot {
	return func(dst []float32, dstride int, w []byte, wstride, rows int, x []byte, xstride int, sc []float32, nb int) {
		if nb >= mxfp4Rows4MinBlocks {
			k4(dst, dstride, w, wstride, rows, x, xstride, sc, nb)
			return
		}
		for j := range 4 {
			rows1(dst[j*dstride:j*dstride+rows], w, wstride, x[j*xstride:], nb)
		}
	}
}
