//go:build amd64 && !noasm

package cpu

import "github.com/sluicehq/sluice/kernels"

//go:noescape
func dotQ4_1Q8_1RowsGVNNI(w *byte, wstride int, x *byte, nb int, dst *float32, groups int)

//go:noescape
func dotQ4_1Q8_1Rows4GVNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows8GVNNI(w *byte, wstride int, x *byte, xstride int, sc *float32, nb int, dst *float32, dstride int, rows int)

//go:noescape
func dotQ4_1Q8_1Rows8x2GVNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

//go:noescape
func dotQ4_1Q8_1Rows8x3GVNNI(w *byte, wstride int, x *byte, xstride int, nb int, dst *float32, dstride int, groups int)

// asmRowsQ41x8 runs a grouped one-row kernel over a grouped matrix's whole
// groups and the canonical kernel over the rows after them.
func asmRowsQ41x8(groups func(w *byte, wstride int, x *byte, nb int, dst *float32, groups int), tail rowsDot) rowsDot {
	return func(dst []float32, w []byte, wstride int, x []byte, nb int) {
		g := len(dst) / 8
		if g > 0 && nb > 0 {
			_, _ = w[8*g*wstride-1], x[nb*36-1]
			groups(&w[0], wstride, &x[0], nb, &dst[0], g)
		} else {
			clear(dst[:8*g])
		}
		if len(dst) > 8*g {
			tail(dst[8*g:], w[8*g*wstride:], wstride, x, nb)
		}
	}
}

func init() {
	if !useVNNI512 {
		return
	}
	c := quantKernels[kernels.Q4_1]
	q41x8Kernels = &quantKernel{
		actBlockBytes: c.actBlockBytes,
		quantize:      c.quantize,
		generic:       c.generic,
		rows:          asmRowsQ41x8(dotQ4_1Q8_1RowsGVNNI, c.rows),
		// rowsMOf8's tail rows are past the last group: the file's layout.
		rows2M: rowsMOf8(dotQ4_1Q8_1Rows8x2GVNNI, 2, asmRowsM(dotQ4_1Q8_1Rows2VNNI, 2, 20, 36), 20, 36),
		rows3:  rowsMOf8(dotQ4_1Q8_1Rows8x3GVNNI, 3, asmRowsM(dotQ4_1Q8_1Rows3VNNI, 3, 20, 36), 20, 36),
		rows4:  q41GroupsThen(asmRowsM(dotQ4_1Q8_1Rows4GVNNI, 4, 20, 36), c.rows4),
		rows8:  q41GroupsThen(asmRowsM(dotQ4_1Q8_1Rows8GVNNI, 8, 20, 36), c.rows8),
		pad:    c.pad,
	}
}
