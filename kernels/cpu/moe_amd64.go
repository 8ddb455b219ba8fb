//go:build amd64 && !noasm

package cpu

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// moePads reports whether MoEFFN pads an expert's last 3 or 7 rows to a
// group of 4 or 8 for weights of type dt: where the AVX-512 VNNI kernels
// serve rows4 and rows8 and no offset kernels (moeOffsetRows) exist, four
// rows cost less than three through rows2 and rows (Q8_0, BenchmarkRowsKernels:
// rows4 167 ns an activation row, rows2 276, rows 308).
func moePads(dt kernels.DType) bool {
	return useVNNI512 && dt == kernels.Q5_0
}

// The kernels after moe_amd64.s's header are written by moe_amd64_gen.py.
//go:generate python3 moe_amd64_gen.py

//go:noescape
func dotQ8_0Q8_0Rows1U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows2U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows3U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows4U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows5U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows6U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows7U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ8_0Q8_0Rows8U(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

// q8OffsetRows are the kernels of moe_amd64.s by activation rows (1–8).
var q8OffsetRows = [9]rowsMDot{
	1: asmRowsM(dotQ8_0Q8_0Rows1U, 1, 34, 34),
	2: asmRowsM(dotQ8_0Q8_0Rows2U, 2, 34, 34),
	3: asmRowsM(dotQ8_0Q8_0Rows3U, 3, 34, 34),
	4: asmRowsM(dotQ8_0Q8_0Rows4U, 4, 34, 34),
	5: asmRowsM(dotQ8_0Q8_0Rows5U, 5, 34, 34),
	6: asmRowsM(dotQ8_0Q8_0Rows6U, 6, 34, 34),
	7: asmRowsM(dotQ8_0Q8_0Rows7U, 7, 34, 34),
	8: asmRowsM(dotQ8_0Q8_0Rows8U, 8, 34, 34),
}

// moeOffsetRows returns the kernels for m activation rows whose quants are
// offset by 128 (moeOffset), for weights of type dt, or nil where there are
// none.
func moeOffsetRows(dt kernels.DType) *[9]rowsMDot {
	if useVNNI512 && dt == kernels.Q8_0 {
		return &q8OffsetRows
	}
	return nil
}

// moeOffset adds 128 to every quant of the Q8_0 blocks in q (XOR 0x80: int8
// to the same value + 128 as uint8), leaving their scales.
func moeOffset(q []byte) {
	const flip = 0x8080808080808080
	for ; len(q) >= quant.Q8_0BlockBytes; q = q[quant.Q8_0BlockBytes:] {
		for i := 2; i < quant.Q8_0BlockBytes; i += 8 {
			binary.LittleEndian.PutUint64(q[i:], binary.LittleEndian.Uint64(q[i:])^flip)
		}
	}
}
