package engine

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

type failureObserver struct {
	recordingObserver
	kinds []string
}

func (o *failureObserver) OnStepFailure(kind string) { o.kinds = append(o.kinds, kind) }

// A panic inside Forward ends the sequences of that step with ErrStepPanic,
// returns their blocks, is counted, and the engine serves the next request
// as if nothing had happened.
func TestPanicInForwardFailsOnlyItsStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		obs := &failureObserver{}
		e := newTestEngine(t, m, Config{MaxSeqs: 2, Observer: obs})
		// The first step waits until both requests are in, and the first
		// step that carries both panics: which step that is must not depend
		// on how fast the loop runs ahead of the second Submit (under the
		// race detector it ran a's steps alone past a fixed step number).
		gate := make(chan struct{})
		panicked := false
		m.onForward = func(b *kernels.Batch) error {
			<-gate
			if len(b.Seqs) == 2 && !panicked {
				panicked = true
				panic("kernel exploded")
			}
			return nil
		}
		a := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 50})
		b := submit(t, e, Request{Prompt: prompt(6, 2, 64), MaxTokens: 50})
		close(gate)
		for _, s := range []*Sequence{a, b} {
			if r := s.Result(); r.Finish != FinishError || !errors.Is(r.Err, ErrStepPanic) {
				t.Fatalf("seq %d: %+v, want FinishError with ErrStepPanic", s.ID(), r)
			}
		}
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 || st.StepFailures != 1 || st.Running+st.Waiting != 0 {
			t.Fatalf("after the panic: stats %+v", st)
		}
		if !slices.Equal(obs.kinds, []string{StepFailPanic}) {
			t.Fatalf("observed step failures %v, want [panic]", obs.kinds)
		}
		p := prompt(7, 3, 64)
		got, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 6}), 0)
		if r.Finish != FinishLength || !slices.Equal(got, m.reference(p, 6)) {
			t.Fatalf("after the panic: %v %+v", got, r)
		}
		if e.BrokenErr() != nil {
			t.Fatalf("a panic broke the engine: %v", e.BrokenErr())
		}
	})
}

// panicky is a Constraint that panics in Mask (computed off the loop
// goroutine) or in Commit (on it), and allows every token otherwise.
type panicky struct{ inMask, inCommit bool }

func (p *panicky) Mask(dst []uint32) error {
	if p.inMask {
		panic("mask exploded")
	}
	for i := range dst {
		dst[i] = ^uint32(0)
	}
	return nil
}

func (p *panicky) Commit(int32) error {
	if p.inCommit {
		panic("commit exploded")
	}
	return nil
}

// A panic in a constraint, in its mask goroutine or in delivery on the loop,
// never takes the process down: the mask's ends only its sequence; the
// delivery's ends the step's sequences; unconstrained work carries on.
func TestPanicInConstraint(t *testing.T) {
	for _, tc := range []struct {
		name        string
		c           *panicky
		otherFailed bool // the unconstrained sequence in the same step fails too
	}{
		{"mask", &panicky{inMask: true}, false},
		{"commit", &panicky{inCommit: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newHashModel(64, 1024, 64, 16)
				e := newTestEngine(t, m, Config{MaxSeqs: 2})
				hold, go_ := make(chan struct{}), make(chan struct{})
				m.onForward = func(b *kernels.Batch) error {
					if m.forwards == 1 { // both sequences share every step
						hold <- struct{}{}
						<-go_
					}
					return nil
				}
				other := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 8})
				<-hold
				bad := submit(t, e, Request{Prompt: prompt(6, 2, 64), MaxTokens: 8, Constraint: tc.c})
				go_ <- struct{}{}
				if r := bad.Result(); r.Finish != FinishError || !errors.Is(r.Err, ErrStepPanic) {
					t.Fatalf("constrained seq: %+v", r)
				}
				got, r := collect(t, other, 0)
				if tc.otherFailed {
					if r.Finish != FinishError || !errors.Is(r.Err, ErrStepPanic) {
						t.Fatalf("the other sequence of the step: %+v", r)
					}
				} else if r.Finish != FinishLength || !slices.Equal(got, m.reference(prompt(5, 1, 64), 8)) {
					t.Fatalf("the other sequence: %v %+v", got, r)
				}
				synctest.Wait()
				if st := e.Stats(); st.KV.Used != 0 {
					t.Fatalf("blocks left in use: %+v", st.KV)
				}
			})
		})
	}
}

// A backend that reports kernels.ErrDeviceLost breaks the engine: every
// sequence, running or queued, ends with ErrBroken, Broken is closed, and
// Submit refuses new work with ErrClosed (a transport's 503).
func TestDeviceLostBreaksTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 64, 16)
		obs := &failureObserver{}
		e := newTestEngine(t, m, Config{MaxSeqs: 1, Observer: obs})
		hold, go_ := make(chan struct{}), make(chan struct{})
		m.onForward = func(b *kernels.Batch) error {
			switch m.forwards {
			case 1:
				hold <- struct{}{}
				<-go_
			case 3:
				return errors.Join(errors.New("cuLaunchKernel: an illegal memory access"), kernels.ErrDeviceLost)
			}
			return nil
		}
		running := submit(t, e, Request{Prompt: prompt(5, 1, 64), MaxTokens: 50})
		<-hold
		queued := submit(t, e, Request{Prompt: prompt(6, 2, 64), MaxTokens: 50}) // MaxSeqs 1
		go_ <- struct{}{}
		select {
		case <-e.Broken():
		case <-time.After(time.Minute):
			t.Fatal("Broken not closed")
		}
		for _, s := range []*Sequence{running, queued} {
			if r := s.Result(); r.Finish != FinishError || !errors.Is(r.Err, ErrBroken) || !errors.Is(r.Err, kernels.ErrDeviceLost) {
				t.Fatalf("seq %d: %+v", s.ID(), r)
			}
		}
		if _, err := e.Submit(bg, Request{Prompt: prompt(7, 3, 64), MaxTokens: 4}); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrBroken) {
			t.Fatalf("Submit after the device was lost: %v", err)
		}
		synctest.Wait()
		if st := e.Stats(); st.KV.Used != 0 || st.Running+st.Waiting != 0 {
			t.Fatalf("stats %+v", st)
		}
		if !slices.Equal(obs.kinds, []string{StepFailDeviceLost}) {
			t.Fatalf("observed %v", obs.kinds)
		}
	})
}
