package cpu

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels/quant"
)

// getRows gathers src's rows into dst, dequantized: dst[i,:] = src[rows[i],:].
// The caller has checked that every row index is in range and dst is large
// enough; an error here means src's bytes do not match its shape and type.
// scratch holds a grouped Q4_1 row in the file's layout (q41pack.go), kept by the
// caller so a token lookup allocates nothing once it has grown.
func getRows(dst []float32, src *tensor, rows []int32, scratch *[]byte) error {
	cols := src.cols()
	rb := src.dtype.RowBytes(cols)
	var canon []byte
	if src.q41x16 {
		canon = growBytes(*scratch, rb)
		*scratch = canon
	}
	for i, r := range rows {
		off := int(r) * rb
		row := src.raw[off : off+rb]
		if src.q41x16 {
			row = canon[:rb]
			q41x16Row(row, src.raw, rb/q41Block, int(r))
		}
		if err := quant.Dequantize(src.dtype, row, dst[i*cols:(i+1)*cols]); err != nil {
			return fmt.Errorf("cpu backend: GetRows row %d: %w", r, err)
		}
	}
	return nil
}
