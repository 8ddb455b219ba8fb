//go:build !linux

package cpu

// adviseHugePages is a no-op where the kernel takes no huge-page advice.
func adviseHugePages([]byte) {}
