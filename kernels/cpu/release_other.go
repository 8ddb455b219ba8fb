//go:build !linux

package cpu

// releaseSource is a no-op where the kernel takes no page-out advice.
func releaseSource([]byte) {}
