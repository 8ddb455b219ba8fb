// Package faultinject wraps an engine.Model so tests (and the soak) can make
// chosen forward steps fail, panic, stall or report a lost device. It never
// corrupts a result: a faulty step returns an error or panics, and every
// other step returns exactly what the wrapped model computed.
//
// A Model is driven by the engine loop (one goroutine); Steps may be read
// from any goroutine.
package faultinject

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
)

// Kind is what a faulty step does.
type Kind int

const (
	None       Kind = iota
	Fail            // Forward returns ErrInjected
	Panic           // Forward panics
	DeviceLost      // Forward returns an error wrapping kernels.ErrDeviceLost
)

// ErrInjected is the error of a Fail step.
var ErrInjected = errors.New("faultinject: injected step failure")

// Fault is what happens at one step: Delay first (a slow step), then Kind.
type Fault struct {
	Kind  Kind
	Delay time.Duration
}

// Plan chooses the fault of each forward call, numbered from 1.
type Plan func(step int) Fault

// Every makes every n-th step (n, 2n, ...) do f.
func Every(n int, f Fault) Plan {
	return func(step int) Fault {
		if n > 0 && step%n == 0 {
			return f
		}
		return Fault{}
	}
}

// At makes the listed steps do f.
func At(f Fault, steps ...int) Plan {
	set := make(map[int]bool, len(steps))
	for _, s := range steps {
		set[s] = true
	}
	return func(step int) Fault {
		if set[step] {
			return f
		}
		return Fault{}
	}
}

// Model is an engine.Model with faults injected by its Plan.
type Model struct {
	inner  engine.Model
	plan   Plan
	steps  atomic.Int64
	faults atomic.Int64
}

// Wrap returns m with plan's faults injected.
func Wrap(m engine.Model, plan Plan) *Model { return &Model{inner: m, plan: plan} }

// Forward implements engine.Model.
func (m *Model) Forward(b *kernels.Batch) ([]float32, error) {
	step := int(m.steps.Add(1))
	f := m.plan(step)
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.Kind != None {
		m.faults.Add(1)
	}
	switch f.Kind {
	case Fail:
		return nil, fmt.Errorf("step %d: %w", step, ErrInjected)
	case Panic:
		panic(fmt.Sprintf("faultinject: injected panic at step %d", step))
	case DeviceLost:
		return nil, fmt.Errorf("step %d: injected: %w", step, kernels.ErrDeviceLost)
	}
	return m.inner.Forward(b)
}

// VocabSize implements engine.Model.
func (m *Model) VocabSize() int { return m.inner.VocabSize() }

// ContextLen implements engine.Model.
func (m *Model) ContextLen() int { return m.inner.ContextLen() }

// Steps is how many forward calls the model has seen.
func (m *Model) Steps() int { return int(m.steps.Load()) }

// Faults is how many of them were faulty (Delay alone does not count).
func (m *Model) Faults() int { return int(m.faults.Load()) }
