//go:build !unix

package cpu

// processCPU is unavailable here; benchmarks then omit the per-CPU figures.
func processCPU() float64 { return 0 }
