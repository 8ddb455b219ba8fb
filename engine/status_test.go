package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// nextFrame is Next with the test's deadline.
func nextFrame(t testing.TB, w *StatusWatcher) *Status {
	t.Helper()
	st, err := w.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Nobody watching: the loop builds no Status at all, only the Stats it
// always publishes; once the last watcher closes it stops again.
func TestStatusNotBuiltWithoutWatchers(t *testing.T) {
	m := newHashModel(64, 1024, 64, 4)
	e := newTestEngine(t, m, Config{})
	collect(t, submit(t, e, Request{Prompt: prompt(20, 1, 64), MaxTokens: 100}), 0)
	before := e.Stats().Steps
	w := e.WatchStatus()
	collect(t, submit(t, e, Request{Prompt: prompt(20, 2, 64), MaxTokens: 20}), 0)
	nextFrame(t, w)
	w.Close()
	// Iterations while watched (each builds at most one frame): the steps,
	// the one that may have ended before Stats showed it, and an idle wake-up
	// for the arrival.
	bound := uint64(e.Stats().Steps - before + 3)
	collect(t, submit(t, e, Request{Prompt: prompt(20, 3, 64), MaxTokens: 200}), 0)
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	// The loop has ended: its fields are safe to read.
	if f := e.status.frame; f < 1 || f > bound {
		t.Fatalf("%d frames built; want ≥ 1 while watched, ≤ %d (the watched iterations)", f, bound)
	}
	if e.status.cur.Load().status != nil {
		t.Fatal("feed not marked stale after the last watcher left")
	}
}

// An idle engine answers a new watcher at once, with nothing live.
func TestStatusIdleFirstFrame(t *testing.T) {
	m := newHashModel(64, 1024, 64, 4)
	e := newTestEngine(t, m, Config{})
	collect(t, submit(t, e, Request{Prompt: prompt(20, 1, 64), MaxTokens: 5}), 0)
	w := e.WatchStatus()
	defer w.Close()
	st := nextFrame(t, w)
	if len(st.Seqs) != 0 || st.KV.Used != 0 || st.Finished != 1 || st.BlockSize != 4 {
		t.Fatalf("idle frame %+v", st)
	}
}

// Every frame's tables account for every used block (no prefix sharing, so
// no block is in two tables) and its step split adds up to the step's rows;
// an aborted sequence leaves the frames with an end record naming its cause
// and blocks. The abort is applied before the step after the one in flight
// when it was sent: with S the last step published then, S+1 may be
// running, the blocks are free before S+2, and the frame that follows S+2
// is the first without the sequence.
func TestStatusTracksTablesAndReclaims(t *testing.T) {
	m := newHashModel(64, 1<<14, 256, 4)
	e := newTestEngine(t, m, Config{DisablePrefixCache: true, MaxBatchTokens: 16})
	// The hash model runs hundreds of steps in a millisecond, so a watcher
	// left to itself may see none of the victim's life (frame 0, then the
	// idle frame after every sequence ended). The loop is held inside each
	// step until the test has read the frame of the step before.
	ls := newLockstep(m, e)
	w := e.WatchStatus()
	defer w.Close()
	var keep []*Sequence
	for i := range 3 {
		keep = append(keep, submit(t, e, Request{Prompt: prompt(30, int32(i), 64), MaxTokens: 300}))
	}
	defer func() {
		ls.release() // the loop is held in a step whenever the test is not reading
		stop := ls.freeRun()
		defer stop()
		for _, s := range keep {
			s.Abort(CauseShutdown)
			s.Result()
		}
	}()
	victim := submit(t, e, Request{Prompt: prompt(30, 9, 64), MaxTokens: 300, Tenant: "b"})
	var abortStep int64 = -1
	var held int
	var sawDecode bool
	ls.next()
	for {
		// Let one step finish; once the loop is inside the next, the
		// finished step's frame is the newest.
		ls.release()
		ls.next()
		st := nextFrame(t, w)
		used := 0
		var vs *StatusSeq
		for i, q := range st.Seqs {
			used += len(q.Blocks)
			if q.ID == victim.ID() {
				vs = &st.Seqs[i]
			}
			if want := map[bool]string{true: "b"}[q.ID == victim.ID()]; q.Tenant != want {
				t.Fatalf("frame %d: seq %d of tenant %q, want %q", st.Frame, q.ID, q.Tenant, want)
			}
		}
		if used != st.KV.Used {
			t.Fatalf("frame %d: tables hold %d blocks, pool says %d used", st.Frame, used, st.KV.Used)
		}
		if split := st.StepPromptTokens + st.StepDecodeTokens; split != 0 && split != st.LastBatchRows {
			t.Fatalf("frame %d: %d prompt + %d decode tokens, %d rows", st.Frame, st.StepPromptTokens, st.StepDecodeTokens, st.LastBatchRows)
		}
		sawDecode = sawDecode || st.StepDecodeTokens > 0
		if abortStep < 0 {
			if vs != nil && vs.Running && vs.Tokens > vs.Prompt+4 {
				held = len(vs.Blocks)
				victim.Abort(CauseClientDisconnect)
				abortStep = e.Stats().Steps
			}
			continue
		}
		if vs != nil {
			if st.Steps > abortStep+2 {
				t.Fatalf("victim still live at step %d, aborted after step %d", st.Steps, abortStep)
			}
			continue
		}
		end := st.Ends[len(st.Ends)-1]
		if end.ID != victim.ID() || end.Tenant != "b" || end.Cause != CauseClientDisconnect || end.Finish != FinishAbort ||
			end.Blocks < held || end.Step > abortStep+2 || end.Reclaim <= 0 {
			t.Fatalf("end %+v; aborted after step %d holding %d blocks", end, abortStep, held)
		}
		break
	}
	if !sawDecode { // prefill steps are few and a watcher may skip them all
		t.Fatal("no frame split a step into decode tokens")
	}
}

// A watcher that stops reading does not hold the loop back: the engine runs
// on, and the next read returns the newest frame, skipping the rest.
func TestStatusSlowWatcherSkips(t *testing.T) {
	m := newHashModel(64, 1<<14, 256, 4)
	e := newTestEngine(t, m, Config{})
	slow := e.WatchStatus()
	defer slow.Close()
	first := nextFrame(t, slow)
	collect(t, submit(t, e, Request{Prompt: prompt(10, 1, 64), MaxTokens: 100}), 0)
	st := nextFrame(t, slow)
	if st.Frame < first.Frame+50 || st.Steps < 99 {
		t.Fatalf("after 100 steps unread: frame %d (first %d), steps %d", st.Frame, first.Frame, st.Steps)
	}
	for len(st.Seqs) != 0 { // the frame after the last step may still be on its way
		st = nextFrame(t, slow)
	}
	if len(st.Ends) != 1 || st.Ends[0].Finish != FinishLength {
		t.Fatalf("skipped frames lost the end: %+v", st.Ends)
	}
}

// Many watchers share each frame (one snapshot, pointer-equal), and each
// sees frames in order; a closed engine ends them with ErrClosed.
func TestStatusFanOut(t *testing.T) {
	m := newHashModel(64, 1<<14, 256, 4)
	e, err := New(m, Config{Blocks: 256, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	seen := make([]map[uint64]*Status, n)
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	errs := make(chan error, n)
	for i := range n {
		w := e.WatchStatus()
		seen[i] = map[uint64]*Status{}
		wg.Go(func() {
			defer w.Close()
			var last uint64
			for k := 0; ; k++ {
				st, err := w.Next(bg)
				if err != nil {
					if err != ErrClosed {
						errs <- err
					}
					return
				}
				if k == 0 {
					ready <- struct{}{}
				}
				if st.Frame != 0 && st.Frame <= last {
					errs <- fmt.Errorf("frame %d after %d", st.Frame, last)
				}
				last = st.Frame
				seen[i][st.Frame] = st
			}
		})
	}
	for range n {
		<-ready
	}
	collect(t, submit(t, e, Request{Prompt: prompt(10, 1, 64), MaxTokens: 50}), 0)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	shared := 0
	for f, st := range seen[0] {
		for i := 1; i < n; i++ {
			if o, ok := seen[i][f]; ok && f != 0 {
				if o != st {
					t.Fatalf("frame %d: watchers got different snapshots", f)
				}
				shared++
			}
		}
	}
	if shared == 0 {
		t.Fatal("no frame seen by two watchers")
	}
}

// BenchmarkStatusWatchers is the loop's cost of the status feed: 8
// sequences decoding on the hash model (steps of a few µs, so the
// publisher's share is as visible as it can be) with 0, 1 and 50 watchers
// reading every frame they can. loop-ns/step is wall time per step.
func BenchmarkStatusWatchers(b *testing.B) {
	for _, n := range []int{0, 1, 50} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			m := newHashModel(64, 1<<16, 4096, 16)
			e := newTestEngine(b, m, Config{MaxSeqs: 16, DisablePrefixCache: true})
			ctx, cancel := context.WithCancel(bg)
			var wg sync.WaitGroup
			for range n {
				w := e.WatchStatus()
				wg.Go(func() {
					defer w.Close()
					for {
						if _, err := w.Next(ctx); err != nil {
							return
						}
					}
				})
			}
			b.ReportAllocs()
			steps0, start := e.Stats().Steps, time.Now()
			for b.Loop() {
				seqs := make([]*Sequence, 8)
				for i := range seqs {
					seqs[i] = submit(b, e, Request{Prompt: prompt(16, int32(i), 64), MaxTokens: 64})
				}
				for _, s := range seqs {
					for range s.Tokens() {
					}
				}
			}
			steps := e.Stats().Steps - steps0
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(steps), "loop-ns/step")
			cancel()
			wg.Wait()
		})
	}
}
