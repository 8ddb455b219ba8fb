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

func init() {
	if useAVX2 {
		mxfp4Kernel.rows = asmRows(dotMXFP4Q8_0Rows, 17, 34)
		if useVNNI512 {
			mxfp4Kernel.rows = asmRows(dotMXFP4Q8_0RowsVNNI, 17, 34)
		}
		// dot_amd64.go's init gives every Q8_0 partner the assembly
		// quantizer, but runs before dot_mxfp4.go's registers this kernel,
		// which kept quant.ActQ8_0 (the same bytes, a fifth of a tiny
		// gpt-oss's MoE time).
		mxfp4Kernel.quantize = asmQuantize(actQ8_0AVX2, quant.Q8_0BlockBytes)
	}
}
