package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/scheduler"
)

// Sequence is one submitted generation: a stream of tokens and, once that
// stream is closed, a Result. Its methods are safe for concurrent use.
//
// The engine loop is the only writer: it sends each token into a channel
// buffered for every token the sequence may produce, so it never waits on a
// reader, and closes the channel exactly once when the sequence ends.
type Sequence struct {
	id        uint64
	req       Request
	submitted time.Time
	eng       *Engine
	ctx       context.Context
	out       chan Token
	admitted  chan struct{} // closed by the loop when the sequence is first scheduled
	progress  chan struct{} // buffered 1: the loop signals each prompt chunk computed
	done      chan struct{} // closed after result is set, before out is closed
	aborting  atomic.Bool   // an abort was sent to the loop (only the first is)
	steps     atomic.Uint64 // see Steps; the loop adds, anyone reads

	// Written by the loop before done is closed; read after.
	result  Result
	reclaim time.Duration

	// Loop-owned from here on.
	sq        scheduler.Seq
	sampler   *sampler
	maxLen    int // len(sq.Tokens) at which the sequence ends with FinishLength
	emitted   int // output tokens so far, Resume included: the next Token.Index
	started   bool
	finished  bool
	startedAt time.Time
	ctxStop   func() bool
	undo      []edit          // controls.go's scratch
	choices   []*Sequence     // a group leader's other choices, until forked (group.go)
	spec      specState       // speculative decoding's acceptance record (spec.go)
	draft     []int32         // the proposer's scratch, the current step's drafts
	promptLP  *PromptLogprobs // Request.PromptLogprobs, nil on a Resume (logprobs.go)
}

// ID is the engine's unique id for the sequence (Request.ID is the caller's).
func (s *Sequence) ID() uint64 { return s.id }

// Request is the request as submitted.
func (s *Sequence) Request() Request { return s.req }

// Submitted is when Submit accepted the sequence.
func (s *Sequence) Submitted() time.Time { return s.submitted }

// Tokens streams the generated tokens (not the prompt, not Resume) and is
// closed when the sequence ends.
func (s *Sequence) Tokens() <-chan Token { return s.out }

// Admitted is closed when the engine first schedules the sequence: it has
// left the waiting queue and its prefill has begun, so from here on a long
// silence means a slow or stuck generation rather than a busy queue (the
// server's stall timeout starts here). It stays closed across preemptions,
// so a preempted sequence waiting for readmission counts as running, and is
// never closed for a sequence that ends before it is scheduled (Tokens and
// Done are closed then).
func (s *Sequence) Admitted() <-chan struct{} { return s.admitted }

// Progress receives a value after each step that computed part of the
// sequence's prompt (or, after a preemption, its recompute): work that
// delivers no token yet. Signals coalesce, one waits at most, so the loop
// never blocks on it. The server's stall clock resets on it, so a long
// prompt is not mistaken for a stuck generation.
func (s *Sequence) Progress() <-chan struct{} { return s.progress }

// Steps counts the boundaries of the steps that included the sequence: the
// loop adds one as such a step lays out its batch and one when the step is
// over (its tokens delivered, its progress signalled, or the sequence
// ended). So it is odd exactly while a step is working on the sequence, and
// a reader that sees it odd, or changed since it last looked, knows the
// sequence was served in between. The server's stall clock counts only the
// time it stays even and unchanged: a prompt chunk that takes longer than
// the stall window is work, not a stall, while a sequence the loop is not
// stepping (preempted, or the loop stuck elsewhere) still stalls.
func (s *Sequence) Steps() uint64 { return s.steps.Load() }

// Done is closed when the sequence has ended and Result is set.
func (s *Sequence) Done() <-chan struct{} { return s.done }

// Result waits until the sequence has ended and returns its outcome. Once
// Tokens() is closed it returns at once.
func (s *Sequence) Result() Result {
	<-s.done
	return s.result
}

// ReclaimLatency is, for a sequence ended by an abort, the time from the
// cancellation (context done or Abort call) to its KV blocks being back in
// the pool. It waits until the sequence has ended.
func (s *Sequence) ReclaimLatency() time.Duration {
	<-s.done
	return s.reclaim
}

// Abort ends the sequence at the next step boundary with FinishAbort and
// cause. The first call wins; calls after the end are no-ops. It returns
// once the loop has the request, which is at once unless more sequences are
// live than the abort channel holds; then it waits for the next step
// boundary.
func (s *Sequence) Abort(cause AbortCause) {
	s.eng.abort(s, cause)
}

// abortReq asks the loop to end a sequence.
type abortReq struct {
	seq   *Sequence
	cause AbortCause
	at    time.Time // when the cancellation happened: reclaim latency starts here
}
