package cpu

import "unsafe"

// Decode streams every weight once a token, so how the weights are paged
// matters as much as the kernels reading them: over 4 KiB pages a pass
// through SmolLM2's 92 MiB crosses 23,000 page boundaries, at each of them
// the hardware prefetchers stop and a TLB miss walks the page tables (on a
// VM, both the guest's and the host's). Backed by 2 MiB pages the same pass
// crosses 46. The Go heap is backed by small pages (the runtime gives no
// huge-page advice since Go 1.21.1, and most distributions set THP to
// "madvise"), so Upload places the weights it copies in chunks of its own,
// aligned to 2 MiB and advised as huge pages before anything touches them.
// Measured in kernels/cpu's BenchmarkWeightPages and BENCHMARKS.md
// (issue 26, session 14).

// hugePageBytes is the x86-64 and arm64 transparent huge page.
const hugePageBytes = 2 << 20

// arenaChunkBytes is the least a chunk takes: eight huge pages, so a model
// of many small matrices (SmolLM2's are 0.2–0.6 MiB) shares them. Pages of
// a chunk nothing writes are never faulted in, so a tiny model's chunk
// costs what it uses, rounded up to one huge page.
const arenaChunkBytes = 8 * hugePageBytes

// weightArena hands out the memory Upload copies weights into. Chunks are
// ordinary Go slices, so a chunk lives while any weight in it does and the
// collector frees it with the last one; nothing needs unmapping.
type weightArena struct {
	free      []byte // the unused tail of the newest chunk
	smallOnly bool   // Backend.SetHugePages(false)
}

// SetHugePages turns huge pages for the weights later Uploads copy on (the
// default) or off, when each copy is an ordinary Go slice, for benchmarks
// that decode with both in one process (models.BenchmarkDecodeHugePages).
func (b *Backend) SetHugePages(on bool) { b.weights.smallOnly = !on }

// take returns n bytes of zeroed weight memory, 64-byte aligned (a cache
// line, so no two weights share one).
func (a *weightArena) take(n int) []byte {
	if a.smallOnly {
		return make([]byte, n)
	}
	n = (n + 63) &^ 63
	if len(a.free) < n {
		size := max(arenaChunkBytes, (n+hugePageBytes-1)/hugePageBytes*hugePageBytes)
		buf := make([]byte, size+hugePageBytes)
		start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		skip := int((start+hugePageBytes-1)/hugePageBytes*hugePageBytes - start)
		a.free = buf[skip : skip+size : skip+size]
		adviseHugePages(a.free)
	}
	out := a.free[:n:n]
	a.free = a.free[n:]
	return out
}
