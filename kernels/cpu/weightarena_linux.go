package cpu

import "golang.org/x/sys/unix"

// adviseHugePages marks b, whole 2 MiB pages of fresh memory, for
// transparent huge pages, so its first writes fault in huge pages. Where
// THP is "never" (or the kernel predates the advice) the call fails and b
// stays on small pages: slower, never wrong.
func adviseHugePages(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
