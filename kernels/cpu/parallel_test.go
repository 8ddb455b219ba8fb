package cpu

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestParallelFor: every index is covered exactly once, and the chunks are
// the same from call to call whichever thread runs them (results that
// depend on chunk edges, like a SIMD kernel's tail, stay reproducible).
func TestParallelFor(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		for _, n := range []int{0, 1, 2, 7, 100, 1001} {
			t.Run(fmt.Sprintf("t%d/n%d", threads, n), func(t *testing.T) {
				w := &workers{threads: threads}
				var chunks [2][][2]int
				for run := range chunks {
					seen := make([]atomic.Int32, n)
					var mu sync.Mutex
					w.parallelFor(n, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							seen[i].Add(1)
						}
						mu.Lock()
						chunks[run] = append(chunks[run], [2]int{lo, hi})
						mu.Unlock()
					})
					for i := range seen {
						if c := seen[i].Load(); c != 1 {
							t.Fatalf("index %d ran %d times", i, c)
						}
					}
					slices.SortFunc(chunks[run], func(a, b [2]int) int { return a[0] - b[0] })
				}
				if !slices.Equal(chunks[0], chunks[1]) {
					t.Fatalf("chunks differ between calls: %v, %v", chunks[0], chunks[1])
				}
			})
		}
	}
}
