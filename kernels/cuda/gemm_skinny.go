//go:build cuda || cudaemu

package cuda

import "fmt"

// skinnyMaxRows is the most rows of x the skinny kernels take (matmul.cu's
// skinny64_*); above it the 64×64 mma tiles fill the GPU on their own.
const skinnyMaxRows = 64

// skinnyKernel names the skinny GEMM for n rows of x (9–64, past the
// GEMV's rows) and a weight type's kernel suffix: the smallest of the 16-,
// 32- and 64-row variants that holds n, so no m tile is computed for rows
// that do not exist beyond the last 16.
func skinnyKernel(n int, suffix string) string {
	m := 64
	switch {
	case n <= 16:
		m = 16
	case n <= 32:
		m = 32
	}
	return fmt.Sprintf("skinny%d_%s", m, suffix)
}
