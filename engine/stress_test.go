package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// TestAbortStress drives the engine on the tiny real model, step by step,
// through many sequences cancelled at chosen moments: before the loop has
// seen the arrival (context cancelled, Abort, or both, right after Submit or
// racing it), while queued, between prefill chunks, mid-decode, while
// preempted, in the step that produces the last token, and after the end.
// The pool is tiny (preemption is constant) and priorities differ (arrivals
// preempt). Every action is decided by a seeded RNG at a step boundary while
// the loop is parked inside Forward; synctest.Wait lets each context's
// AfterFunc reach the loop's channel before the step is released, so a run
// is reproducible. (The one exception: a request submitted while the loop is
// idle is taken at once, so a cancellation right after it races the loop;
// such cancellations are checked for their outcome, not their timing.)
//
// At every step, on the loop goroutine: the scheduler's and pool's
// invariants hold; the engine's live sequences are exactly the scheduler's
// running and waiting ones (nothing dropped without finishing, nothing
// finished but still scheduled); and every sequence cancelled or aborted
// before the previous step was released has ended (invariant 3). Each
// sequence's Tokens channel closes within a bounded number of steps of its
// submission; at the end the engine is idle (nothing running or waiting, no
// block in use) and the bubble is back to its baseline goroutines.
func TestAbortStress(t *testing.T) {
	path := tinyModelPath(t)
	runs := 16
	if testing.Short() {
		runs = 4
	}
	for run := range runs {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { stressRun(t, path, uint64(run)) })
		})
	}
}

// Cancellation plans for one stressed sequence.
const (
	planNone           = iota // runs to its end
	planCancelEarly           // ctx cancelled right after Submit, before the loop sees the arrival
	planAbortEarly            // Abort right after Submit
	planBothEarly             // Abort and ctx cancel right after Submit
	planCancelRacing          // ctx cancelled by a goroutine racing Submit
	planCancelLater           // ctx cancelled at a later boundary (queued, prefill or decode)
	planAbortLater            // Abort at a later boundary
	planBothLater             // Abort and ctx cancel together, at a later boundary
	planAtLastToken           // cancelled during the step that may produce its last token
	planWhilePreempted        // Abort while preempted back to the waiting queue
	planAfterEnd              // cancel and Abort after its stream closed: no-ops
	numPlans
)

type stressSeq struct {
	s        *Sequence
	cancel   context.CancelFunc
	plan     int
	at       int // boundary for the *Later plans
	max      int // MaxTokens
	resumed  int
	got      int  // tokens received
	stopped  bool // a cancellation was issued
	stopAt   int  // resumed+got tokens when it was
	inStep   bool // the loop was parked in a step then (not running concurrently)
	closed   bool
	born     int // boundary of its submission
	endedAt  int
	priority int
}

// stressStepBound is how many steps a sequence may take from submission to
// end. The workload keeps at most maxLive sequences of at most 48+24 tokens
// in a pool of 96 slots: a generous bound that a stuck sequence still hits.
const stressStepBound = 1500

func stressRun(t *testing.T, path string, run uint64) {
	r := rand.New(rand.NewPCG(run, 0x5eed))
	// Runs alternate between a tiny pool (12 blocks of 8, steps of 16
	// tokens: constant preemption) and one shaped like the server's (blocks
	// of 16, a shared 40-token "system prompt" in most requests: prefix-cache
	// hits on blocks freed by aborts).
	blocks, bs, batch, system := 12, 8, 16, 8
	if run%2 == 1 {
		blocks, bs, batch, system = 24, 16, 64, 40
	}
	maxSeqs := 1 + int(run/2%4)
	m := loadModel(t, path, 1, blocks, bs, batch, maxSeqs)
	e, err := New(m, Config{Blocks: blocks, BlockSize: bs, MaxBatchTokens: batch, MaxSeqs: maxSeqs, MaxQueue: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(bg)

	var (
		stopped  = make(chan struct{})
		quit     = make(chan struct{})
		resume   = make(chan struct{})
		mustEnd  []*stressSeq // cancelled before the last release: ended before this step (loop reads)
		stepErrs []error      // found by the loop inside Forward
		steps    int
	)
	m.hook = func(b *kernels.Batch) error {
		steps++
		if err := e.sched.CheckInvariants(); err != nil {
			stepErrs = append(stepErrs, fmt.Errorf("step %d: %w", steps, err))
		}
		if err := e.checkLive(); err != nil {
			stepErrs = append(stepErrs, fmt.Errorf("step %d: %w", steps, err))
		}
		for _, q := range mustEnd {
			if !q.s.finished {
				stepErrs = append(stepErrs, fmt.Errorf("step %d: seq %d (plan %d) was cancelled before the previous step was released but is still %v", steps, q.s.id, q.plan, q.s.sq.State()))
			}
		}
		select {
		case stopped <- struct{}{}:
			select {
			case <-resume:
			case <-quit:
			}
		case <-quit: // the test failed: let Close end the loop
		}
		return nil
	}
	defer close(quit)
	synctest.Wait()
	baseline := bubbleGoroutines()

	var seqs []*stressSeq
	where := map[string]int{} // what state cancellations found their sequence in
	live := func() int {
		n := 0
		for _, q := range seqs {
			if !q.closed {
				n++
			}
		}
		return n
	}
	const maxLive, submitBoundaries = 10, 400
	parked := false // the loop is inside Forward, waiting for resume
	for k := 0; ; k++ {
		// Drain what arrived; note the ends.
		for _, q := range seqs {
		drain:
			for !q.closed {
				select {
				case tok, ok := <-q.s.Tokens():
					if !ok {
						q.closed, q.endedAt = true, k
						break drain
					}
					if tok.Index != q.resumed+q.got {
						t.Fatalf("seq %d: token index %d, want %d", q.s.id, tok.Index, q.resumed+q.got)
					}
					q.got++
				default:
					break drain
				}
			}
			if !q.closed && !parked {
				t.Fatalf("seq %d (plan %d) is open but the loop is idle: stats %+v", q.s.id, q.plan, *e.Stats())
			}
			if !q.closed && k-q.born > stressStepBound {
				t.Fatalf("seq %d (plan %d) still open %d boundaries after its submission: state %v, stats %+v", q.s.id, q.plan, k-q.born, q.s.sq.State(), *e.Stats())
			}
		}
		if k >= submitBoundaries && live() == 0 {
			if parked {
				t.Fatal("the loop is inside a step with every sequence ended")
			}
			break
		}
		// Act: the loop is parked inside Forward or idle, so nothing moves.
		mustEnd = mustEnd[:0]
		cancelNow := func(q *stressSeq, ctx, abort bool) {
			q.stopped, q.stopAt, q.inStep = true, q.resumed+q.got, parked
			if parked {
				where[stressWhere(q)]++
			}
			if abort {
				q.s.Abort(CauseStall)
			}
			if ctx {
				q.cancel()
			}
			if !q.closed && parked { // else the loop runs concurrently: no promise
				mustEnd = append(mustEnd, q)
			}
		}
		for _, q := range seqs {
			if q.stopped || q.plan == planNone {
				continue
			}
			switch {
			case q.closed && q.plan == planAfterEnd:
				cancelNow(q, true, true)
			case q.closed:
			case q.plan == planCancelLater && k >= q.at:
				cancelNow(q, true, false)
			case q.plan == planAbortLater && k >= q.at:
				cancelNow(q, false, true)
			case q.plan == planBothLater && k >= q.at:
				cancelNow(q, true, true)
			case q.plan == planAtLastToken && q.resumed+q.got == q.max-1:
				cancelNow(q, true, false)
			case q.plan == planWhilePreempted && q.s.started && q.s.sq.State() == scheduler.StateWaiting:
				cancelNow(q, false, true)
			}
		}
		for k < submitBoundaries && live() < maxLive && r.IntN(3) > 0 {
			q := &stressSeq{plan: r.IntN(numPlans), born: k, priority: r.IntN(2)}
			p := make([]int32, 1+r.IntN(40))
			for i := range p {
				p[i] = int32(r.IntN(tinySpec.Vocab))
			}
			if r.IntN(3) < 1+int(run%2) { // a shared prefix: exercises the prefix cache
				p = append(prompt(system+r.IntN(2)*8, 3, tinySpec.Vocab), p...)
			}
			q.max = 1 + r.IntN(24)
			req := Request{Prompt: p, MaxTokens: q.max, Priority: q.priority}
			if r.IntN(4) == 0 {
				req.Sampling = SamplingParams{Temperature: 0.8, TopP: 0.9, Seed: seed(r.Uint64())}
			}
			if q.max > 1 && r.IntN(5) == 0 {
				req.Resume = prompt(r.IntN(q.max), 4, tinySpec.Vocab)
				q.resumed = len(req.Resume)
			}
			q.at = k + r.IntN(12)
			ctx, cancel := context.WithCancel(bg)
			q.cancel = cancel
			if q.plan == planCancelRacing {
				go cancel()
			}
			s, err := e.Submit(ctx, req)
			if err != nil {
				cancel()
				if q.plan == planCancelRacing {
					continue // the cancel won the race
				}
				t.Fatalf("submit: %v", err)
			}
			q.s = s
			seqs = append(seqs, q)
			switch q.plan {
			case planCancelEarly:
				cancelNow(q, true, false)
			case planAbortEarly:
				cancelNow(q, false, true)
			case planBothEarly:
				cancelNow(q, true, true)
			case planCancelRacing:
				q.stopped, q.stopAt, q.inStep = true, q.resumed, parked
				if parked {
					mustEnd = append(mustEnd, q) // the racing cancel is done by synctest.Wait
				}
			}
			if !parked {
				// The idle loop took the arrival at once and runs concurrently
				// until it parks in its first Forward (or, all ended, idles).
				synctest.Wait()
				select {
				case <-stopped:
					parked = true
				default:
				}
			}
		}
		synctest.Wait() // AfterFuncs have handed their aborts to the loop
		if parked {
			resume <- struct{}{}
		}
		synctest.Wait() // the loop is parked in its next Forward, or idle
		select {
		case <-stopped:
			parked = true
		default:
			parked = false
		}
		if len(stepErrs) > 0 {
			t.Fatal(stepErrs[0])
		}
	}

	synctest.Wait()
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.KV.Used != 0 {
		t.Fatalf("not idle at the end: %+v", *st)
	}
	if n := bubbleGoroutines(); n != baseline {
		t.Fatalf("%d goroutines at the end, baseline %d", n, baseline)
	}
	for _, q := range seqs {
		res := q.s.Result()
		// A cancellation issued while the loop was parked in the step that
		// produced the last token, or while it ran concurrently, may come
		// after the end.
		late := !q.inStep || q.stopAt == q.max-1
		switch {
		case q.stopped && q.plan != planAfterEnd && !(late && res.Finish == FinishLength):
			if res.Finish != FinishAbort {
				t.Fatalf("seq %d (plan %d, cancelled after %d of %d tokens) ended %+v", q.s.id, q.plan, q.stopAt, q.max, res)
			}
		case q.plan == planAfterEnd || q.plan == planNone:
			if res.Finish != FinishLength && res.Finish != FinishStop {
				t.Fatalf("seq %d (plan %d) ended %+v", q.s.id, q.plan, res)
			}
		}
		if res.Finish == FinishLength && q.resumed+q.got != q.max {
			t.Fatalf("seq %d: %d+%d tokens, max %d", q.s.id, q.resumed, q.got, q.max)
		}
	}
	counts := make([]int, numPlans)
	for _, q := range seqs {
		counts[q.plan]++
	}
	t.Logf("blocks %d×%d, max seqs %d: %d sequences (per plan %v), %d steps, %d preemptions, %d aborts, %d prefix-hit tokens; cancelled when %v",
		blocks, bs, maxSeqs, len(seqs), counts, st.Steps, st.Preemptions, st.Aborted, st.PrefixHitTokens, where)
	if st.Preemptions == 0 && maxSeqs > 1 {
		t.Errorf("no preemption: the pool is not small enough to test it")
	}
}

// stressWhere names the state a sequence is in; the loop must be parked.
func stressWhere(q *stressSeq) string {
	s := q.s
	switch st := s.sq.State(); {
	case q.closed || s.finished:
		return "ended"
	case st == scheduler.StateNew:
		return "unseen"
	case st == scheduler.StateWaiting && s.started:
		return "preempted"
	case st == scheduler.StateWaiting:
		return "queued"
	case s.sq.NumComputed() < len(s.req.Prompt)+len(s.req.Resume):
		return "prefill"
	}
	return "decode"
}

// checkLive verifies, on the loop goroutine, that the sequences the engine
// holds open are exactly those the scheduler holds: none dropped from the
// scheduler without finishing, none finished but still scheduled.
func (e *Engine) checkLive() error {
	if n := e.sched.NumRunning() + e.sched.NumWaiting(); n != len(e.live) {
		return fmt.Errorf("%d live sequences, the scheduler holds %d (running %d, waiting %d)", len(e.live), n, e.sched.NumRunning(), e.sched.NumWaiting())
	}
	for s := range e.live {
		if st := s.sq.State(); s.finished || (st != scheduler.StateRunning && st != scheduler.StateWaiting) {
			return fmt.Errorf("live seq %d: finished %v, state %v", s.id, s.finished, st)
		}
	}
	return nil
}
