package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// Step failures. A failing step ends the sequences it was running, with an
// error a transport reports as server_error, returns their blocks and leaves
// the engine running; only ErrBroken ends everything.
var (
	// ErrStepFailed: the step running the sequence failed (it wraps the
	// cause: ErrStepPanic, the forward pass's error, or ErrBroken's).
	ErrStepFailed = errors.New("engine: step failed")
	// ErrStepPanic: the forward pass, a constraint mask or the sampler
	// panicked during a step. The panic's value and stack are in the error.
	ErrStepPanic = errors.New("engine: step panicked")
	// ErrBroken: the backend reported kernels.ErrDeviceLost. Every sequence
	// ends with it and Submit refuses new ones with ErrClosed; the process is
	// expected to exit (Engine.Broken says when).
	ErrBroken = errors.New("engine: backend is broken")
)

// Step failure kinds, as StepFailureObserver and the metrics name them.
const (
	StepFailError      = "error"       // Forward returned an error
	StepFailPanic      = "panic"       // something in the step panicked
	StepFailDeviceLost = "device_lost" // the backend cannot go on
)

// StepFailureObserver is an Observer that also counts failed steps; found
// by type assertion so an Observer need not implement it.
type StepFailureObserver interface {
	OnStepFailure(kind string)
}

// brokenState is how the loop tells everyone else that the backend is gone:
// closed once, its error readable after.
type brokenState struct {
	once sync.Once
	ch   chan struct{}
	err  error
}

func newBrokenState() *brokenState { return &brokenState{ch: make(chan struct{})} }

// Broken is closed when the backend reported a state it cannot recover from
// (kernels.ErrDeviceLost); BrokenErr then says which. A server marks itself
// not ready, drains and exits non-zero when it closes.
func (e *Engine) Broken() <-chan struct{} { return e.broken.ch }

// BrokenErr is the error that broke the engine, or nil.
func (e *Engine) BrokenErr() error {
	select {
	case <-e.broken.ch:
		return e.broken.err
	default:
		return nil
	}
}

// forward runs the model, turning a panic into an error so that it fails
// only this step.
func (e *Engine) forward(b *kernels.Batch) (logits []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("forward", r)
		}
	}()
	return e.model.Forward(b)
}

// guard runs f (the post-forward half of a step: masks, sampling, delivery)
// and turns a panic in it into an error.
func (e *Engine) guard(what string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(what, r)
		}
	}()
	f()
	return nil
}

func panicError(what string, r any) error {
	return fmt.Errorf("%w in %s: %v\n%s", ErrStepPanic, what, r, debug.Stack())
}

// stepFailed ends the plan's sequences with err (those a panicking delivery
// already ended stay as they ended), counts the failure and, when the
// backend is gone, ends every other sequence too and marks the engine
// broken. Clients see a server error whose message says what failed but not
// the panic's value or stack (a transport sends Error() as it is, and those
// can quote a prompt or memory): the whole error is logged here, once per
// step, and stays in the chain (Result.Err) for errors.Is and errors.As.
func (e *Engine) stepFailed(plan *scheduler.Plan, err error) {
	kind := StepFailError
	switch {
	case errors.Is(err, kernels.ErrDeviceLost):
		kind = StepFailDeviceLost
	case errors.Is(err, ErrStepPanic):
		kind = StepFailPanic
	}
	slog.Error("engine step failed", "kind", kind, "seqs", len(plan.Items), "err", err)
	err = &stepError{kind: kind, err: err}
	if kind == StepFailDeviceLost {
		err = fmt.Errorf("%w: %w", ErrBroken, err)
		e.broken.once.Do(func() {
			e.broken.err = err
			close(e.broken.ch)
		})
	}
	e.failBatch(plan, err)
	if o, ok := e.cfg.Observer.(StepFailureObserver); ok {
		o.OnStepFailure(kind)
	}
	e.st.StepFailures++
	if kind != StepFailDeviceLost {
		return
	}
	for s := range e.live {
		e.end(s, Result{Finish: FinishError, Err: err})
	}
}

// stepError is what a failed step's sequences end with: ErrStepFailed and
// the cause, under a message fit for a client.
type stepError struct {
	kind string
	err  error
}

func (e *stepError) Error() string {
	switch e.kind {
	case StepFailPanic:
		return "engine: step failed: the step panicked (the server's log has the details)"
	default:
		return fmt.Sprintf("%v: %v", ErrStepFailed, e.err)
	}
}

func (e *stepError) Unwrap() []error { return []error{ErrStepFailed, e.err} }
