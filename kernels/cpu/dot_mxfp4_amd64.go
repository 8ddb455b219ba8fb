//go:build amd64 && !noasm

package cpu

// dotMXFP4Q8_0Rows is dotmx_amd64.s: MXFP4 weight rows against one Q8_0
// activation row.
//
//go:noescape
func dotMXFP4Q8_0Rows(w *byte, wstride int, x *byte, nb int, dst *float32, rows int)

func init() {
	if useAVX2 {
		mxfp4Kernel.rows = asmRows(dotMXFP4Q8_0Rows, 17, 34)
	}
}
