package cpu

import "sync"

// workers runs fn over [0, n) split into contiguous chunks, one per thread.
// With one thread it runs inline so single-threaded runs pay no hand-off.
type workers struct {
	threads int
	mm      matScratch // matMul's reusable buffers (matmul.go)
}

func (w *workers) parallelFor(n int, fn func(lo, hi int)) {
	t := w.threads
	if t > n {
		t = n
	}
	if t <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + t - 1) / t
	for lo := chunk; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() { defer wg.Done(); fn(lo, hi) }()
	}
	fn(0, min(chunk, n))
	wg.Wait()
}
