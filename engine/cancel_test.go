package engine

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/kernels"
)

// stepRecord is what the model saw at one Forward, read on the loop goroutine.
type stepRecord struct {
	seqs       int
	tableBlock int // blocks in the batch's block tables
	used       int // blocks in use in the pool
	lastRows   int // rows and context of the batch's last sequence
	lastCtx    int
}

// lockstep makes the engine loop stop inside every Forward until the test
// lets it go, so a test can act (cancel a context) at an exact step. Every
// step is recorded first. Every running sequence is in every batch in these
// tests and no prompt shares blocks, so used blocks must equal the batch's
// table blocks: a leaked block shows.
type lockstep struct {
	rec     []stepRecord // written by the loop before it signals stopped
	stopped chan struct{}
	resume  chan struct{}
}

func newLockstep(m *hashModel, e *Engine) *lockstep {
	return newLockstepHook(func(h func(*kernels.Batch) error) { m.onForward = h }, e)
}

// newLockstepHook installs the lockstep hook with install (before any Submit).
func newLockstepHook(install func(func(*kernels.Batch) error), e *Engine) *lockstep {
	ls := &lockstep{stopped: make(chan struct{}), resume: make(chan struct{})}
	install(func(b *kernels.Batch) error {
		r := stepRecord{seqs: len(b.Seqs), used: e.pool.Usage().Used}
		for _, s := range b.Seqs {
			r.tableBlock += len(s.Blocks)
		}
		last := b.Seqs[len(b.Seqs)-1]
		r.lastRows, r.lastCtx = last.End-last.Start, last.ContextLen
		ls.rec = append(ls.rec, r)
		ls.stopped <- struct{}{}
		<-ls.resume
		return nil
	})
	return ls
}

// next waits until the loop is inside its next Forward and returns that step's record.
func (ls *lockstep) next() stepRecord {
	<-ls.stopped
	return ls.rec[len(ls.rec)-1]
}

func (ls *lockstep) release() { ls.resume <- struct{}{} }

// freeRun lets the loop run on until the returned function is called; stop
// returns once nothing is releasing steps any more.
func (ls *lockstep) freeRun() (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-ls.stopped:
				ls.resume <- struct{}{}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-exited }
}

// bubbleGoroutines counts the goroutines of the calling synctest bubble
// (runtime.NumGoroutine would also count other tests' goroutines still
// winding down).
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	self := string(buf[:runtime.Stack(buf, false)])
	i := strings.Index(self, "synctest bubble ")
	if i < 0 {
		panic("bubbleGoroutines outside a synctest bubble")
	}
	tag := self[i:strings.IndexByte(self[i:], ']')+i] + "]"
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), tag)
}

// The three cancellation points: while queued, between the prefill chunks of
// a long prompt (prefill must not run to its end first), and mid-decode. In
// each, the sequence has ended with client_disconnect before the next step
// starts, no later step includes it, its blocks are free by then, and no
// goroutine is left behind.
func TestCancelFreesBlocksBeforeNextStep(t *testing.T) {
	testCancel(t, func(t *testing.T) (Model, func(func(*kernels.Batch) error), Config) {
		m := newHashModel(64, 4096, 64, 16)
		return m, func(h func(*kernels.Batch) error) { m.onForward = h }, Config{Blocks: 64, BlockSize: 16}
	})
}

// testCancel runs the cancellation cases on the model mk makes; install
// sets a hook run at the start of each Forward; cfg carries the pool size.
func testCancel(t *testing.T, mk func(t *testing.T) (Model, func(func(*kernels.Batch) error), Config)) {
	for _, tc := range []struct {
		name    string
		maxSeqs int
		bPrompt int
		cancel  func(r stepRecord, stepsSinceSubmit int) bool // cancel b inside this step
		bSteps  int                                           // steps b took part in
	}{
		{"queued", 1, 40, func(r stepRecord, n int) bool { return n == 2 }, 0},
		{"between prefill chunks", 4, 300, func(r stepRecord, n int) bool { return r.seqs == 2 }, 1},
		{"mid-decode", 4, 10, func(r stepRecord, n int) bool { return r.seqs == 2 && r.lastRows == 1 && r.lastCtx == 13 }, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, install, cfg := mk(t)
				cfg.MaxBatchTokens, cfg.MaxSeqs, cfg.DisablePrefixCache = 32, tc.maxSeqs, true
				e := newEngineOn(t, m, cfg)
				ls := newLockstepHook(install, e)
				synctest.Wait()
				baseline := bubbleGoroutines()

				a := submit(t, e, Request{Prompt: prompt(8, 1, 64), MaxTokens: 200})
				ls.next()
				ls.release()
				ctx, cancel := context.WithCancel(bg)
				b, err := e.Submit(ctx, Request{Prompt: prompt(tc.bPrompt, 2, 64), MaxTokens: 100})
				if err != nil {
					t.Fatal(err)
				}
				for n := 1; !tc.cancel(ls.next(), n); n++ {
					ls.release()
				}
				cancelStep := len(ls.rec) - 1
				cancel()
				synctest.Wait() // the abort is in the loop's channel; the loop is parked in Forward
				ls.release()

				r := ls.next() // the loop is inside the next step
				select {
				case <-b.Done():
				default:
					t.Fatal("b not ended before the next step")
				}
				if r.seqs != 1 || r.used != r.tableBlock {
					t.Fatalf("next step: %+v", r)
				}
				if res := b.Result(); res.Finish != FinishAbort || res.Cause != CauseClientDisconnect {
					t.Fatalf("b: %+v", res)
				}
				ls.release()
				ls.next()
				a.Abort(CauseStall)
				ls.release()
				if res := a.Result(); res.Finish != FinishAbort || res.Cause != CauseStall {
					t.Fatalf("a: %+v", res)
				}
				synctest.Wait()
				if n := bubbleGoroutines(); n != baseline {
					t.Fatalf("%d goroutines, baseline %d", n, baseline)
				}
				if st := e.Stats(); st.KV.Used != 0 || st.Reclaims != 2 || st.Running+st.Waiting != 0 {
					t.Fatalf("stats %+v", st)
				}
				withB := 0
				for i, r := range ls.rec {
					if r.used != r.tableBlock {
						t.Fatalf("step %d: %d blocks used, batch tables hold %d", i, r.used, r.tableBlock)
					}
					if r.seqs == 2 {
						if withB++; i > cancelStep {
							t.Fatalf("b is in step %d, after its cancellation in step %d", i, cancelStep)
						}
					}
				}
				if withB != tc.bSteps {
					t.Fatalf("b ran in %d steps, want %d", withB, tc.bSteps)
				}
			})
		})
	}
}

// A context cancelled after Submit returned, before the loop took the
// arrival, ends the sequence as the loop takes it: it never takes part in a
// step (a context.AfterFunc registered then would abort it only after one).
func TestCancelBeforeArrivalNeverRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 4096, 64, 16)
		e := newTestEngine(t, m, Config{MaxSeqs: 4, DisablePrefixCache: true})
		ls := newLockstep(m, e)
		t.Cleanup(func() { // on failure the loop may be parked: let it run to Close
			select {
			case ls.resume <- struct{}{}: // it was parked in a step
			default:
			}
			stop := ls.freeRun()
			e.Close(bg)
			stop()
		})
		a := submit(t, e, Request{Prompt: prompt(8, 1, 64), MaxTokens: 50})
		ls.next() // the loop is parked in a's first step
		ctx, cancel := context.WithCancel(bg)
		b, err := e.Submit(ctx, Request{Prompt: prompt(40, 2, 64), MaxTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		ls.release()
		if r := ls.next(); r.seqs != 1 {
			t.Fatalf("the step after b's cancellation runs %d sequences: b took part", r.seqs)
		}
		select {
		case <-b.Done():
		default:
			t.Fatal("b not ended before the next step")
		}
		if res := b.Result(); res.Finish != FinishAbort || res.Cause != CauseClientDisconnect || res.CompletionTokens != 0 {
			t.Fatalf("b: %+v", res)
		}
		a.Abort(CauseStall)
		ls.release()
		a.Result()
		synctest.Wait() // the loop has published and is idle
		if st := e.Stats(); st.PromptTokens != 8 {
			t.Fatalf("prefilled %d tokens, want a's 8 only", st.PromptTokens)
		}
	})
}

// An Abort sent while the sequence's arrival still waits in the channel (the
// loop is inside a step) is applied, after the arrival, before the next
// step: the sequence never takes part in one, and its Result names the
// Abort's cause. The loop takes arrivals before aborts, so no abort can find
// a sequence the loop has not seen.
func TestAbortBeforeArrivalIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 4096, 64, 16)
		e := newTestEngine(t, m, Config{MaxSeqs: 4, DisablePrefixCache: true})
		ls := newLockstep(m, e)
		t.Cleanup(func() {
			select {
			case ls.resume <- struct{}{}:
			default:
			}
			stop := ls.freeRun()
			e.Close(bg)
			stop()
		})
		a := submit(t, e, Request{Prompt: prompt(8, 1, 64), MaxTokens: 50})
		ls.next() // the loop is parked in a's first step
		var bs []*Sequence
		for i := range 3 {
			b := submit(t, e, Request{Prompt: prompt(20, int32(2+i), 64), MaxTokens: 10})
			b.Abort(CauseStopString)
			bs = append(bs, b)
		}
		synctest.Wait()
		ls.release()
		if r := ls.next(); r.seqs != 1 {
			t.Fatalf("the step after the aborts runs %d sequences, want a alone", r.seqs)
		}
		for i, b := range bs {
			select {
			case <-b.Done():
			default:
				t.Fatalf("b%d not ended before the next step", i)
			}
			select {
			case <-b.Admitted():
				t.Errorf("b%d was admitted", i)
			default:
			}
			if res := b.Result(); res.Finish != FinishAbort || res.Cause != CauseStopString || res.CompletionTokens != 0 {
				t.Errorf("b%d: %+v", i, res)
			}
		}
		a.Abort(CauseStall)
		ls.release()
		a.Result()
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 || st.PromptTokens != 8 {
			t.Fatalf("after the end: %d blocks used, %d tokens prefilled (want 0, a's 8)", st.KV.Used, st.PromptTokens)
		}
	})
}

// Every step that computes part of a prompt signals the sequence's
// Progress, before its first token exists; decodes do not (their token is
// the signal).
func TestProgressPerPromptChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 4096, 64, 16)
		e := newTestEngine(t, m, Config{MaxBatchTokens: 16, DisablePrefixCache: true})
		ls := newLockstep(m, e)
		t.Cleanup(func() {
			stop := ls.freeRun()
			e.Close(bg)
			stop()
		})
		s := submit(t, e, Request{Prompt: prompt(64, 1, 64), MaxTokens: 3})
		for step := range 4 { // 64 prompt tokens, 16 a step
			ls.next()
			ls.release()
			synctest.Wait() // the loop is parked in the next step, or idle
			select {
			case <-s.Progress():
			default:
				t.Fatalf("no progress signal after prompt chunk %d", step)
			}
		}
		ls.next() // the second token's decode
		ls.release()
		synctest.Wait()
		select {
		case <-s.Progress():
			t.Fatal("a decode step signalled progress")
		default:
		}
		if len(s.Tokens()) == 0 {
			t.Fatal("no token after the prompt's last chunk")
		}
	})
}
