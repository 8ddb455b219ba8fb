package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testWorkers returns workers whose helpers stop when the test ends.
func testWorkers(tb testing.TB, threads int) *workers {
	w := newWorkers(threads)
	tb.Cleanup(w.close)
	return &w
}

// TestParallelFor: every index is covered exactly once, chunks are whole
// multiples of the grain (bar the last), and they are the same from call to
// call whichever thread runs them (results that depend on chunk edges, like
// a SIMD kernel's tail, stay reproducible).
func TestParallelFor(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		w := testWorkers(t, threads)
		for _, n := range []int{0, 1, 2, 7, 100, 1001} {
			for _, grain := range []int{1, 16} {
				t.Run(fmt.Sprintf("t%d/n%d/g%d", threads, n, grain), func(t *testing.T) {
					var chunks [2][][2]int
					for run := range chunks {
						seen := make([]atomic.Int32, n)
						var mu sync.Mutex
						w.parallelFor(n, grain, func(lo, hi int) {
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
						for _, c := range chunks[run] {
							if c[0]%grain != 0 || (c[1]%grain != 0 && c[1] != n) {
								t.Fatalf("chunk %v is not on the grain %d", c, grain)
							}
						}
					}
					if !slices.Equal(chunks[0], chunks[1]) {
						t.Fatalf("chunks differ between calls: %v, %v", chunks[0], chunks[1])
					}
					if threads > 1 && n > grain && len(chunks[0]) < 2 {
						t.Fatalf("%d items over %d threads ran as one chunk", n, threads)
					}
				})
			}
		}
	}
}

// TestParallelForStress: many operations of random sizes back to back, some
// after pauses long enough for the helpers to fall asleep, with more threads
// than CPUs too; each must see all its items done when it returns. Under
// -race this also checks that the job hand-off orders memory.
func TestParallelForStress(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, threads := range []int{2, 3, 2 * runtime.GOMAXPROCS(0)} {
		w := testWorkers(t, threads)
		ops := 3000
		if testing.Short() || raceEnabled {
			ops = 300
		}
		buf := make([]int, 5000)
		for op := range ops {
			n := r.IntN(len(buf))
			if op%500 == 499 {
				time.Sleep(2 * spinFor) // let the helpers sleep
			}
			w.parallelFor(n, 1+r.IntN(8), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					buf[i] = op
				}
			})
			for i := range n {
				if buf[i] != op {
					t.Fatalf("threads %d, op %d: item %d of %d not done on return", threads, op, i, n)
				}
			}
		}
	}
}

// settledGoroutines waits up to a few seconds for the goroutine count to
// fall to at most want, and returns the last count seen.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBackendCloseStopsHelpers: Close ends every helper goroutine, a second
// Close is harmless, and the backend still works afterwards, inline.
func TestBackendCloseStopsHelpers(t *testing.T) {
	base := runtime.NumGoroutine()
	b := New(4)
	if n := runtime.NumGoroutine(); n < base+3 {
		t.Fatalf("New(4): %d goroutines, want %d", n, base+3)
	}
	sum := func() int64 {
		var s atomic.Int64
		b.parallelFor(1000, 1, func(lo, hi int) { s.Add(int64(hi - lo)) })
		return s.Load()
	}
	if s := sum(); s != 1000 {
		t.Fatalf("before Close: %d items", s)
	}
	b.Close()
	b.Close()
	if n := settledGoroutines(base); n > base {
		t.Fatalf("after Close: %d goroutines, want %d", n, base)
	}
	if s := sum(); s != 1000 {
		t.Fatalf("after Close: %d items", s)
	}
}

// TestBackendDroppedStopsHelpers: a backend nobody closes still lets its
// helpers go once it is garbage.
func TestBackendDroppedStopsHelpers(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		b := New(3)
		b.parallelFor(100, 1, func(lo, hi int) {})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("dropped backend: %d goroutines, want %d", n, base)
	}
}

// TestIdleBackendUsesNoCPU: helpers spin only briefly after an operation;
// a backend with nothing to do must cost (next to) no CPU, or an idle
// server would keep cores busy.
func TestIdleBackendUsesNoCPU(t *testing.T) {
	if processCPU() == 0 {
		t.Skip("no process CPU time on this platform")
	}
	b := New(runtime.GOMAXPROCS(0) + 1)
	defer b.Close()
	for range 100 {
		b.parallelFor(1000, 1, func(lo, hi int) {})
	}
	time.Sleep(10 * time.Millisecond)
	cpu0 := processCPU()
	const idle = 500 * time.Millisecond
	time.Sleep(idle)
	if used := processCPU() - cpu0; used > 0.05*idle.Seconds() {
		t.Fatalf("idle backend used %.3f CPU-seconds in %v", used, idle)
	}
}

// BenchmarkParallelFor: the cost of one operation split over the threads,
// for work of a few sizes (items of ~10 ns each): what a hand-off adds, and
// from what size splitting pays.
func BenchmarkParallelFor(b *testing.B) {
	for _, threads := range []int{1, 2} {
		for _, n := range []int{2, 64, 512, 4096} {
			b.Run(fmt.Sprintf("t%d/n%d", threads, n), func(b *testing.B) {
				w := testWorkers(b, threads)
				x := make([]float32, n*16)
				fn := func(lo, hi int) {
					for i := lo * 16; i < hi*16; i++ {
						x[i] = x[i]*0.5 + 1
					}
				}
				cpu0 := processCPU()
				for b.Loop() {
					w.parallelFor(n, 1, fn)
				}
				if cpu := processCPU() - cpu0; cpu > 0 {
					b.ReportMetric(cpu*1e9/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}
