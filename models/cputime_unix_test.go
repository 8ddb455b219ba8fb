//go:build unix

package models

import "syscall"

// processCPU is the CPU time this process has used, in seconds: benchmarks
// report throughput per CPU-second beside wall-clock throughput because the
// development machines are shared, and wall time there measures the
// neighbours too.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
