package cpu

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels/quant"
)

// getRows gathers src's rows into dst, dequantized: dst[i,:] = src[rows[i],:].
// The caller has checked that every row index is in range and dst is large
// enough; an error here means src's bytes do not match its shape and type.
// scratch holds a grouped matrix's row in the file's layout (canonicalRows),
// kept by the caller so a token lookup allocates nothing once it has grown.
func getRows(dst []float32, src *tensor, rows []int32, scratch *[]byte) error {
	cols := src.cols()
	rb := src.dtype.RowBytes(cols)
	for i, r := range rows {
		row := src.canonicalRows(scratch, int(r), int(r)+1, rb)
		if err := quant.Dequantize(src.dtype, row, dst[i*cols:(i+1)*cols]); err != nil {
			return fmt.Errorf("cpu backend: GetRows row %d: %w", r, err)
		}
	}
	return nil
}
