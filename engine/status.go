package engine

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/scheduler"
)

// Status is a detailed view of the loop: the Stats counters plus every live
// sequence's block table and the sequences that ended recently. The loop
// builds one per iteration (after the step, if one ran) while at least one
// StatusWatcher is open, and none at all while nobody watches. It is
// immutable and shared by every watcher: readers may keep it.
type Status struct {
	Stats
	Frame     uint64 // increases by one per built Status; a gap means frames were skipped
	BlockSize int    // token slots per block
	// StepPromptTokens and StepDecodeTokens split the rows of the step this
	// frame follows (both 0 when the loop iterated without stepping).
	StepPromptTokens, StepDecodeTokens int
	Seqs                               []StatusSeq // live sequences, by ID
	// Ends holds the most recent sequence ends (up to maxStatusEnds), oldest
	// first, so a watcher that skipped frames still sees the ends it missed
	// (dedupe by StatusEnd.N).
	Ends []StatusEnd
}

// StatusSeq is one live sequence in a Status.
type StatusSeq struct {
	ID       uint64
	ReqID    string // Request.ID
	Tenant   string // Request.Tenant: a server shows a key only its own
	Running  bool   // admitted and holding blocks; false: waiting (queued or preempted)
	Prompt   int    // prompt tokens, resumed output included
	Tokens   int    // known tokens: prompt + output so far
	Computed int    // leading tokens whose KV is in the cache
	Cached   int    // prompt tokens served from the prefix cache at admission
	Blocks   []int32
	// State and Checkpoint are a hybrid model's sequence's recurrent-state
	// slot and checkpoint slot (state.go), −1 when it holds none.
	State, Checkpoint int32
}

// StatusEnd is a sequence that left the loop.
type StatusEnd struct {
	N       uint64 // increases by one per end the status feed saw
	ID      uint64
	Tenant  string    // Request.Tenant
	Step    int64     // Stats.Steps of the first frame that no longer held it
	At      time.Time // when that frame was built
	Finish  FinishReason
	Cause   AbortCause
	Blocks  int           // blocks its table held in the frame before it ended
	Reclaim time.Duration // aborts: cancellation → blocks back in the pool
}

const maxStatusEnds = 32

// statusFrame links each Status to the next: next is closed once a newer
// frame is current, which wakes every waiting watcher with one close (the
// fan-out costs the loop O(1) however many watch). A frame with a nil status
// marks the snapshots as stale: nobody watched, so the loop stopped building.
type statusFrame struct {
	status *Status
	next   chan struct{}
}

// statusFeed is the Engine's side of the watchers.
type statusFeed struct {
	watchers atomic.Int64
	cur      atomic.Pointer[statusFrame]

	// Loop-owned.
	frame                uint64
	ends                 []StatusEnd
	endN                 uint64
	held, heldNext       map[*Sequence]int // blocks each live sequence held at the last frame
	lastPrompt, lastGen  int64             // counters at the last iteration: the step's split
	lastSteps            int64
	stepPrompt, stepRows int
}

func (f *statusFeed) init() {
	f.cur.Store(&statusFrame{next: make(chan struct{})})
	f.held, f.heldNext = map[*Sequence]int{}, map[*Sequence]int{}
}

// publishStatus runs on the loop after each iteration's Stats snapshot st.
// With no watcher it only notes the step's counters and, once, marks the
// feed stale.
func (e *Engine) publishStatus(st *Stats) {
	f := &e.status
	f.stepPrompt, f.stepRows = 0, 0
	if st.Steps != f.lastSteps {
		f.stepPrompt, f.stepRows = int(st.PromptTokens-f.lastPrompt), st.LastBatchRows
	}
	f.lastSteps, f.lastPrompt, f.lastGen = st.Steps, st.PromptTokens, st.GenTokens
	old := f.cur.Load()
	if f.watchers.Load() == 0 {
		if old.status != nil {
			clear(f.held) // the next watcher starts afresh: ends in between are not tracked
			f.cur.Store(&statusFrame{next: make(chan struct{})})
			close(old.next)
		}
		return
	}
	f.cur.Store(&statusFrame{status: e.buildStatus(st), next: make(chan struct{})})
	close(old.next)
}

func (e *Engine) buildStatus(st *Stats) *Status {
	f := &e.status
	f.frame++
	s := &Status{
		Stats: *st, Frame: f.frame, BlockSize: e.cfg.BlockSize,
		StepPromptTokens: f.stepPrompt, StepDecodeTokens: f.stepRows - f.stepPrompt,
		Seqs: make([]StatusSeq, 0, len(e.live)),
	}
	for q := range e.live {
		blocks := slices.Clone(q.sq.Blocks())
		ck, _, _ := q.sq.Checkpoint()
		s.Seqs = append(s.Seqs, StatusSeq{
			ID: q.id, ReqID: q.req.ID, Tenant: q.req.Tenant, Running: q.sq.State() == scheduler.StateRunning,
			Prompt: len(q.req.Prompt) + len(q.req.Resume), Tokens: len(q.sq.Tokens),
			Computed: q.sq.NumComputed(), Cached: q.sq.CachedTokens(), Blocks: blocks,
			State: q.sq.StateSlot(), Checkpoint: ck,
		})
		f.heldNext[q] = len(blocks)
	}
	slices.SortFunc(s.Seqs, func(a, b StatusSeq) int { return cmpUint(a.ID, b.ID) })
	for q, n := range f.held {
		if _, ok := f.heldNext[q]; ok {
			continue
		}
		f.endN++
		f.ends = append(f.ends, StatusEnd{
			N: f.endN, ID: q.id, Tenant: q.req.Tenant, Step: st.Steps, At: st.At, Finish: q.result.Finish,
			Cause: q.result.Cause, Blocks: n, Reclaim: q.reclaim,
		})
	}
	if over := len(f.ends) - maxStatusEnds; over > 0 {
		f.ends = slices.Delete(f.ends, 0, over)
	}
	s.Ends = slices.Clone(f.ends)
	clear(f.held)
	f.held, f.heldNext = f.heldNext, f.held
	return s
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// StatusWatcher receives the loop's Status frames. Not safe for concurrent
// use; Close it when done, or the loop keeps building frames.
type StatusWatcher struct {
	e      *Engine
	last   *statusFrame
	closed bool
}

// WatchStatus starts a watcher. Frames are built only while some watcher is
// open; every watcher shares the same immutable frames.
func (e *Engine) WatchStatus() *StatusWatcher {
	e.status.watchers.Add(1)
	return &StatusWatcher{e: e}
}

// Next returns the newest frame the watcher has not seen, waiting for one if
// needed: a slow watcher skips the frames published meanwhile (Status.Frame
// shows the gap), so the loop never waits for it. The first call returns at
// once when the loop is idle. Errors: ErrClosed once the engine has stopped
// and the last frame was seen, or ctx's error.
func (w *StatusWatcher) Next(ctx context.Context) (*Status, error) {
	f := &w.e.status
	for {
		cur := f.cur.Load()
		if cur != w.last {
			if cur.status != nil {
				w.last = cur
				return cur.status, nil
			}
			// Stale: nobody watched when the loop last iterated. Counted as a
			// watcher before loading cur, so if the loop is still going it will
			// build a frame at its next iteration; if the Stats published with
			// the stale mark say it is idle, there is none coming, and with
			// nothing live an accurate frame needs no loop state.
			if st := w.e.Stats(); st.Running+st.Waiting == 0 {
				w.last = cur
				return &Status{Stats: *st, BlockSize: w.e.cfg.BlockSize}, nil
			}
		}
		select {
		case <-cur.next:
		case <-w.e.done:
			if f.cur.Load() == w.last {
				return nil, ErrClosed
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the watcher; once none is open the loop stops building frames.
func (w *StatusWatcher) Close() {
	if !w.closed {
		w.closed = true
		w.e.status.watchers.Add(-1)
	}
}
