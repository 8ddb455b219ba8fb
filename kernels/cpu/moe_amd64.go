//go:build amd64 && !noasm

package cpu

import "github.com/sluicehq/sluice/kernels"

// moePads reports whether MoEFFN pads an expert's last 3 or 7 rows to a
// group of 4 or 8 for weights of type dt: where the AVX-512 VNNI kernels
// serve rows4 and rows8 (BenchmarkRowsKernels, Q8_0: rows4 167 ns an
// activation row against rows 308 and rows2 276), four rows cost less than
// three through rows2 and rows.
func moePads(dt kernels.DType) bool {
	return useVNNI512 && (dt == kernels.Q8_0 || dt == kernels.Q5_0)
}
