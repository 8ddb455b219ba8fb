//go:build amd64 && !noasm

package cpu

// cpuRelax pauses the core briefly inside a spin-wait (relax_amd64.s).
func cpuRelax()
