//go:build cuda

package cuda

import (
	"os"
	"testing"
)

// testBLAS on a GPU is the cuBLAS SLUICE_CUBLAS names (scripts/device sets
// it to the wheel's lib/); the tests skip without one.
func testBLAS(t *testing.T) string {
	t.Helper()
	spec := os.Getenv("SLUICE_CUBLAS")
	if spec == "" || spec == "off" {
		t.Skip("SLUICE_CUBLAS names no cuBLAS")
	}
	return spec
}
