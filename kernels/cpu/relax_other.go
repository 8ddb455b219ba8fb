//go:build !amd64 || noasm

package cpu

// cpuRelax is a no-op where there is no pause instruction to call: the spin
// loop around it still checks the clock and yields now and then.
func cpuRelax() {}
