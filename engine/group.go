package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/scheduler"
)

// MaxChoices is the most sequences one SubmitGroup call may start (OpenAI's
// n is at most 128; 16 keeps one request from filling a batch).
const MaxChoices = 16

// SubmitGroup submits the choices of one prompt (OpenAI's n): reqs[i] is
// choice i, and every request has the same Prompt. The prompt is prefilled
// once, by the first sequence (the group's leader); when its KV is
// complete, the other choices fork the leader's block table (copy on write,
// kvcache.Pool.Fork) and compute only the prompt's last partial block, whose
// logits give each its first token. From there each is an ordinary
// sequence: its own sampler (give each request its own Seed; the same seed
// draws the same tokens), stop tokens, logprobs, constraint (each request
// needs its own Constraint instance), its own end and Result. When ctx is
// done every choice is aborted and all their blocks are freed.
//
// A group takes len(reqs) places in the queue. Errors are Submit's, and
// ErrInvalidRequest for an empty or oversized group, prompts, tenants or
// cache salts that differ, or a Resume (a group starts afresh). Should the
// leader end before its prompt is computed (a failed step, a stall), the
// other choices are queued on their own and compute the prompt themselves.
func (e *Engine) SubmitGroup(ctx context.Context, reqs []Request) ([]*Sequence, error) {
	if len(reqs) == 0 || len(reqs) > MaxChoices {
		return nil, fmt.Errorf("%w: %d choices (1 to %d)", ErrInvalidRequest, len(reqs), MaxChoices)
	}
	seqs := make([]*Sequence, len(reqs))
	for i, req := range reqs {
		switch {
		case len(req.Resume) > 0:
			return nil, fmt.Errorf("%w: choice %d resumes; a group starts afresh", ErrInvalidRequest, i)
		case i > 0 && !slices.Equal(req.Prompt, reqs[0].Prompt):
			return nil, fmt.Errorf("%w: choice %d's prompt differs from choice 0's", ErrInvalidRequest, i)
		case i > 0 && req.Constraint != nil && req.Constraint == reqs[0].Constraint:
			return nil, fmt.Errorf("%w: choices %d and 0 share one Constraint", ErrInvalidRequest, i)
		case i > 0 && (req.Tenant != reqs[0].Tenant || req.CacheSalt != reqs[0].CacheSalt):
			// The choices fork the leader's blocks: one partition, one sender.
			return nil, fmt.Errorf("%w: choice %d's tenant or cache salt differs from choice 0's", ErrInvalidRequest, i)
		}
		maxLen, err := e.validate(req)
		if err != nil {
			return nil, err
		}
		seqs[i] = e.newSequence(ctx, req, maxLen)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("engine: submit: %w", err)
	}
	if err := e.BrokenErr(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClosed, err)
	}
	leader := seqs[0]
	leader.choices = seqs[1:]
	for _, c := range leader.choices { // the leader's salt may be its own (prompt logprobs): they fork its table
		c.sq.Salt, c.promptLP = leader.sq.Salt, nil // and the leader alone computes the prompt's logprobs
	}
	if err := e.send(leader, len(seqs)); err != nil {
		return nil, err
	}
	return seqs, nil
}

// arriveGroup makes a leader's other choices live beside it: each watches
// the context on its own, so a cancellation ends every one of them, forked
// or not.
func (e *Engine) arriveGroup(s *Sequence) {
	for _, c := range s.choices {
		e.live[c] = struct{}{}
		if c.ctx.Err() != nil && c.aborting.CompareAndSwap(false, true) {
			e.applyAbort(abortReq{seq: c, cause: CauseClientDisconnect, at: time.Now()})
			continue
		}
		c.ctxStop = context.AfterFunc(c.ctx, func() { e.abort(c, CauseClientDisconnect) })
	}
}

// forkGroups starts the choices of every leader whose prompt this step
// completed (after Advance, before delivery: the leader's table holds the
// prompt and nothing past it yet). A choice the scheduler cannot fork now
// (the running queue is full) is queued instead and computes its prompt
// itself when admitted, sharing what the prefix cache still holds.
func (e *Engine) forkGroups(plan *scheduler.Plan) {
	hybrid := e.pool.Usage().StatesTotal > 0
	for _, it := range plan.Items {
		s := owner(it.Seq)
		if hybrid {
			e.afterStateStep(it) // state.go: seeds read, checkpoints written
		}
		if it.Seq.NumComputed() < len(s.req.Prompt) {
			continue
		}
		for _, c := range s.choices {
			switch {
			case c.finished:
			case e.sched.Fork(&c.sq, &s.sq):
				e.forkState(c, s)
			default:
				e.queueChoice(c)
			}
		}
		s.choices = nil
		if hybrid {
			e.sched.CacheCheckpoint(&s.sq) // the prompt is done: its checkpoint to the prefix cache
		}
	}
}

// releaseGroup runs when a sequence finishes: the choices a leader had not
// forked yet go on without it, or end with it when the engine is shutting
// down or their context is done.
func (e *Engine) releaseGroup(s *Sequence) {
	choices := s.choices
	s.choices = nil
	for _, c := range choices {
		switch {
		case c.finished:
		case e.stopping():
			e.sched.Finish(&c.sq)
			e.finish(c, Result{Finish: FinishAbort, Cause: CauseShutdown})
		case c.ctx.Err() != nil && c.aborting.CompareAndSwap(false, true):
			e.applyAbort(abortReq{seq: c, cause: CauseClientDisconnect, at: time.Now()})
		default:
			e.queueChoice(c)
		}
	}
}

func (e *Engine) queueChoice(c *Sequence) {
	if err := e.sched.Add(&c.sq); err != nil { // cannot happen: validated, fresh
		e.finish(c, Result{Finish: FinishError, Err: err})
	}
}

// stopping reports whether Close has begun: shutdown ends what is live.
func (e *Engine) stopping() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}
