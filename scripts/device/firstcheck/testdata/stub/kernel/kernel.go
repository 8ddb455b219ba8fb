// Package kernel stands in for the CUDA backend's launch path in first.sh's
// stub test binary: Launch never returns, as a hung kernel's wait would not,
// so that a goroutine dump names a frame of the module.
package kernel

import "time"

// Launch blocks for good (time.Sleep, so that the runtime sees no deadlock).
func Launch(name string) {
	for {
		time.Sleep(time.Hour)
	}
}
