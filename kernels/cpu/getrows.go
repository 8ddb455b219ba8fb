package cpu

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels/quant"
)

// getRows gathers src's rows into dst, dequantized: dst[i,:] = src[rows[i],:].
// The caller has checked that every row index is in range and dst is large
// enough; an error here means src's bytes do not match its shape and type.
// scratch holds a grouped matrix's row in the file's layout (x16pack.go), kept by the
// caller so a token lookup allocates nothing once it has grown.
func getRows(dst []float32, src *tensor, rows []int32, scratch *[]byte) error {
	cols := src.cols()
	rb := src.dtype.RowBytes(cols)
	var canon []byte
	if src.x16 {
		canon = growBytes(*scratch, rb)
		*scratch = canon
	}
	for i, r := range rows {
		off := int(r) * rb
		row := src.raw[off : off+rb]
		if src.x16 {
			row = canon[:rb]
			x16Row(src.dtype, row, src.raw, rb/src.dtype.BlockBytes(), int(r))
		}
		if err := quant.Dequantize(src.dtype, row, dst[i*cols:(i+1)*cols]); err != nil {
			return fmt.Errorf("cpu backend: GetRows row %d: %w", r, err)
		}
	}
	return nil
}
