package cpu

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// releaseSource asks the kernel to reclaim the whole pages of b, the file's
// bytes of a weight Upload copied: a GGUF's weights are a read-only file
// mapping, whose clean pages then stop counting against the process (the
// copy would otherwise hold the weight twice). MADV_PAGEOUT, unlike
// MADV_DONTNEED, never changes what b reads, so it is safe where b is
// ordinary memory (a test's slice), which it leaves where it is without
// swap. An older kernel's EINVAL leaves the pages mapped: nothing else
// depends on the advice.
func releaseSource(b []byte) {
	if len(b) == 0 {
		return
	}
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + ps - 1) / ps * ps
	hi := (start + uintptr(len(b))) / ps * ps
	if hi > lo {
		_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_PAGEOUT)
	}
}
