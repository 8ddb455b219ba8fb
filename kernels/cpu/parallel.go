package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// workers splits an operation over threads: the calling goroutine and a
// persistent pool of threads-1 helpers. With one thread, or an operation
// too small to be worth a hand-off, fn runs inline.
//
// Why a pool and not a goroutine per call: a decode step of a small model is
// a few hundred operations of tens of microseconds each (SmolLM2-135M: 271
// per token, median 35 µs). A fresh goroutine per operation is readied on
// the caller's P, so another P must wake (a futex) and steal it (runqsteal
// waits 3 µs before taking a P's next goroutine) every time; that costs
// about as much as the operation, and two threads decoded slower than one.
// The helpers instead spin on an atomic for a while after each operation,
// so back-to-back operations are picked up within a cache-line transfer,
// and sleep on a channel once nothing has come for spinFor, so an idle
// backend costs no CPU.
type workers struct {
	threads int
	pool    *pool      // nil with one thread, and after close
	edges   []int      // parallelFor's chunk edges, kept to reuse
	mm      matScratch // matMul's reusable buffers (matmul.go)

	// Reading ahead (readahead.go): the first weight of the last product,
	// and what the helpers read once they run out of chunks.
	prev        *tensor
	after       readAhead
	noReadAhead bool // Backend.SetReadAhead(false)
}

// newWorkers starts the helpers; close stops them.
func newWorkers(threads int) workers {
	threads = max(threads, 1)
	w := workers{threads: threads}
	if threads > 1 {
		w.pool = newPool(threads - 1)
	}
	return w
}

// close stops the helpers and waits for them to exit. Later operations run
// inline on the caller.
func (w *workers) close() {
	if w.pool != nil {
		w.pool.stop()
		w.pool = nil
	}
}

// Chunking. Work is cut into chunks claimed one at a time by whichever
// thread is free, rather than one fixed share per thread: a helper that is
// late (asleep after an idle spell, or its OS thread preempted by another
// process on a busy machine) then costs only the chunks others could not
// take over, instead of the caller waiting for its whole share. Four chunks
// a thread was as fast as one on a quiet machine for single-stream decode
// (the difference was within the noise), and about 10% faster for a
// 128-token prompt. Chunk edges depend only on n, the thread count and the
// grain, never on timing, so results that depend on where a chunk ends (a
// SIMD tail) are reproducible.
const (
	chunksPerThread = 4
	maxChunks       = 1<<16 - 1 // the claim word's chunk fields are 16 bits
)

// plan fills w.edges with the chunk edges for n items (chunk i is
// [edges[i], edges[i+1])): whole multiples of grain, and a single chunk
// when n is no more than grain or there is one thread.
func (w *workers) plan(n, grain int) []int {
	grain = max(grain, 1)
	e := append(w.edges[:0], 0)
	if n <= grain || w.threads <= 1 {
		if n > 0 {
			e = append(e, n)
		}
		w.edges = e
		return e
	}
	want := min(w.threads*chunksPerThread, maxChunks)
	chunk := (n + want - 1) / want
	chunk = (chunk + grain - 1) / grain * grain
	for lo := chunk; lo < n; lo += chunk {
		e = append(e, lo)
	}
	e = append(e, n)
	w.edges = e
	return e
}

// parallelFor runs fn over [0, n) in chunks of whole multiples of grain.
// grain is the least work worth handing to another thread: an n no larger
// runs inline. fn must be safe to run concurrently on disjoint ranges.
func (w *workers) parallelFor(n, grain int, fn func(lo, hi int)) {
	e := w.plan(n, grain)
	if len(e) < 2 {
		return
	}
	if len(e) == 2 || w.pool == nil {
		fn(0, n)
		return
	}
	w.pool.run(fn, e, &w.after)
}

// Spinning. A thread with nothing to do polls for spinFor before it sleeps
// on a channel. Measured on SmolLM2-135M with 2 threads: between the
// operations of a decode step the caller's serial work (norms, residual
// adds, quantizing activations) leaves gaps of 1 µs typically and 40 µs at
// the 99th percentile, and the engine's work between steps (sampling,
// scheduling) 150 µs at the 99th percentile with 4 sequences. A 5 µs
// spin decoded a fifth slower than a 50 µs one; 200 µs was 10-15% faster
// than 50 µs with 4 sequences, 1 ms no better. An idle backend pays one
// spinFor per helper after its last operation, then nothing. spinChecks
// bounds the spin where time does not advance (a testing/synctest bubble
// freezes the clock).
const (
	spinFor    = 200 * time.Microsecond
	spinChecks = 1 << 16
)

// Claim word layout: generation (32 bits) | chunks (16) | next chunk (16).
// Packing the chunk count with the generation lets a helper that wakes late
// check "is there anything left in the operation I saw" in the same atomic
// load that it claims with, without reading the job fields, which the caller
// may already be rewriting for the next operation.
const (
	genShift    = 32
	chunksShift = 16
	fieldMask   = 1<<16 - 1
)

type pool struct {
	claim atomic.Uint64
	_     [56]byte // claim is hammered by CAS; keep done off its cache line
	done  atomic.Int64
	_     [56]byte

	// The current operation, written by the caller before the claim word
	// announces it and read by a helper only once it holds a chunk of it.
	fn    func(lo, hi int)
	edges []int // chunk i is [edges[i], edges[i+1])
	after readAhead
	gen   uint64 // caller-only copy of the current generation

	callerAsleep atomic.Bool
	callerWake   chan struct{} // capacity 1: one token per successful sleep→awake CAS
	quit         atomic.Bool
	helpers      []helper
	exited       sync.WaitGroup
}

type helper struct {
	asleep atomic.Bool
	wake   chan struct{} // capacity 1, as callerWake
	sink   byte          // keeps the read-ahead's loads (readahead.go)
	_      [40]byte      // one helper's flag per cache line
}

func newPool(helpers int) *pool {
	p := &pool{callerWake: make(chan struct{}, 1), helpers: make([]helper, helpers)}
	p.exited.Add(helpers)
	for i := range p.helpers {
		h := &p.helpers[i]
		h.wake = make(chan struct{}, 1)
		go p.work(h)
	}
	return p
}

// stop ends the helpers and waits for them. Not concurrent with run.
func (p *pool) stop() {
	p.quit.Store(true)
	for i := range p.helpers {
		p.helpers[i].awaken()
	}
	p.exited.Wait()
}

// run is one operation: announce it, take chunks alongside the helpers, and
// return once every chunk has finished.
func (p *pool) run(fn func(lo, hi int), edges []int, after *readAhead) {
	chunks := len(edges) - 1
	p.fn, p.edges, p.after = fn, edges, *after
	p.done.Store(0)
	p.gen = (p.gen + 1) & (1<<32 - 1)
	p.claim.Store(p.gen<<genShift | uint64(chunks)<<chunksShift)
	// Spinning helpers see the claim word change by themselves; wake only
	// sleepers, and no more than there are chunks for besides the caller's.
	for i, need := 0, chunks-1; i < len(p.helpers) && need > 0; i++ {
		if p.helpers[i].awaken() {
			need--
		}
	}
	p.take(p.gen, nil)
	p.waitDone(int64(chunks))
	p.fn, p.edges = nil, nil // do not pin the caller's closure and what it refers to
}

// take runs chunks of operation gen until none are left, and reports
// whether it ran any. A helper passes ahead to get the operation's
// read-ahead, copied while the job fields are still gen's.
func (p *pool) take(gen uint64, ahead *readAhead) bool {
	ran := false
	for {
		c := p.claim.Load()
		chunks := int(c >> chunksShift & fieldMask)
		i := int(c & fieldMask)
		if c>>genShift != gen || i >= chunks {
			return ran
		}
		if !p.claim.CompareAndSwap(c, c+1) {
			continue
		}
		// Holding an unfinished chunk of gen keeps the caller inside run for
		// gen, so the job fields are still gen's.
		if !ran && ahead != nil {
			*ahead = p.after
		}
		ran = true
		p.fn(p.edges[i], p.edges[i+1])
		if p.done.Add(1) == int64(chunks) && p.callerAsleep.CompareAndSwap(true, false) {
			p.callerWake <- struct{}{}
		}
	}
}

// waitDone returns when chunks chunks of the current operation are done.
func (p *pool) waitDone(chunks int64) {
	sp := newSpin()
	for p.done.Load() < chunks {
		if sp.step() {
			continue
		}
		// The Store/Load pair here and the Add/CAS pair in take are
		// sequentially consistent: either the finisher sees callerAsleep
		// and sends a token, or this Load sees the last chunk done.
		p.callerAsleep.Store(true)
		if p.done.Load() >= chunks {
			if !p.callerAsleep.CompareAndSwap(true, false) {
				<-p.callerWake // a finisher's token is on its way: take it
			}
			return
		}
		// A token may also come from a finisher of an earlier operation
		// that ran late; the loop checks done again either way.
		<-p.callerWake
		sp = newSpin()
	}
}

// work is a helper's life: wait for an operation, take chunks of it, repeat.
func (p *pool) work(h *helper) {
	defer p.exited.Done()
	var seen uint64 // the generation last taken part in
	for {
		gen, ok := p.await(h, seen)
		if !ok {
			return
		}
		seen = gen
		var ahead readAhead
		if p.take(gen, &ahead) {
			h.sink += p.readAheadUntil(&ahead, gen)
		}
	}
}

// await waits for an operation newer than seen; false means stop.
func (p *pool) await(h *helper, seen uint64) (uint64, bool) {
	sp := newSpin()
	for {
		if gen := p.claim.Load() >> genShift; gen != seen {
			return gen, true
		}
		if p.quit.Load() {
			return 0, false
		}
		if sp.step() {
			continue
		}
		// Same protocol as waitDone: the caller changes claim (or quit)
		// before it looks at asleep, this goroutine sets asleep before it
		// looks at claim (and quit) again.
		h.asleep.Store(true)
		if p.claim.Load()>>genShift != seen || p.quit.Load() {
			if h.asleep.CompareAndSwap(true, false) {
				continue
			}
		}
		<-h.wake
		sp = newSpin()
	}
}

// awaken wakes h if it is asleep, and reports whether it was.
func (h *helper) awaken() bool {
	if h.asleep.CompareAndSwap(true, false) {
		h.wake <- struct{}{}
		return true
	}
	return false
}

// spin is the spinning half of waitDone's and await's waits: a thread
// calls step until it reports false, then sleeps, and after a sleep starts
// a fresh spin.
type spin struct {
	i     int // steps taken
	start time.Time
}

func newSpin() spin { return spin{start: time.Now()} }

// step takes one step of the spin and reports true, or reports false once
// the spin has lasted spinFor (or spinChecks steps; the clock is read every
// 64th step). A step is a CPU pause (about 30 ns on Zen 3), and every 64th,
// when it also looks at the clock, a yield to the Go scheduler, so that
// with more spinning goroutines than Ps (threads above GOMAXPROCS, or the
// server's other goroutines) one with real work is not kept waiting for
// long by a spinner holding its P.
func (s *spin) step() bool {
	s.i++
	if s.i >= spinChecks || s.i%64 == 0 && time.Since(s.start) >= spinFor {
		return false
	}
	if s.i%64 == 0 {
		runtime.Gosched()
	} else {
		cpuRelax()
	}
	return true
}
