package engine

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// RecurrentModel is a Model with per-sequence recurrent state beside its
// KV (hybrid models: Qwen3.5's Gated DeltaNet layers). The engine's pool
// hands each running sequence one of the model's StateSlots with its first
// blocks and takes it back when the blocks go (finish, abort, preemption),
// and each step's batch names the slot (kernels.SeqRows.State). A state is
// valid only at the position it was computed to, so a sequence keeps its
// state at its prompt's last block boundary in a checkpoint slot on the
// way (stateRows): a group's choices fork its blocks up to there and start
// from a copy of it (CopyState), and the prefix cache keeps it once the
// prompt is done, so that a later prompt with the same prefix starts there
// (kernels.SeqRows.Seed) instead of at 0 (kvcache state.go).
type RecurrentModel interface {
	Model
	StateSlots() int
	StateSlotBytes() int64 // one slot's memory, every recurrent layer
	CopyState(dst, src int32) error
}

// stateRollBacker is a RecurrentModel that can speculate: its backend keeps
// what it needs to give a sequence's state after any draft row of a step
// (kernels.SeqRows.Drafts), and RollBackState puts the one after the kept
// drafts in its slot, which verify does after the scheduler's Accept has
// truncated the rejected drafts' KV (rollBackState). The pool rolls back
// only for such a model (kvcache SetStateRollBack), so no other hybrid
// model is asked for drafts.
type stateRollBacker interface {
	CanRollBackState() bool
	RollBackState(slot int32, kept int) error
}

// canRollBackState reports whether m's recurrent state can follow a
// speculative step's verification.
func canRollBackState(m Model) bool {
	r, ok := m.(stateRollBacker)
	return ok && r.CanRollBackState()
}

// stateSlots is the pool's slot count for m: 0 for a model without state.
func stateSlots(m Model) (slots int, bytes int64) {
	if r, ok := m.(RecurrentModel); ok {
		return r.StateSlots(), r.StateSlotBytes()
	}
	return 0, 0
}

// stateRows sets the state fields of rows, the batch's part for item it:
// the cached state a prefix-cache hit starts from, and a checkpoint at the
// prompt's last block boundary (the deepest point a later lookup of the
// same prompt, or a fork of its choices, can resume from) for a sequence
// whose step has not passed it. No slot free: no checkpoint, and the
// choices compute the prompt themselves, the cache keeps nothing. A step
// with drafts has the backend keep what a rollback to any of them needs
// (kernels.SeqRows.Drafts), and never writes a checkpoint past its
// verified row: forks and the prefix cache resume only from tokens that
// are the sequence's.
func (e *Engine) stateRows(rows *kernels.SeqRows, it scheduler.Item) {
	rows.Drafts = len(it.Draft)
	if seed := it.Seq.Seed(); seed >= 0 {
		rows.Seeded, rows.Seed = true, seed
	}
	s := owner(it.Seq)
	if e.pool.Usage().StatesTotal == 0 || len(s.choices) == 0 && !e.pool.PrefixCaching() {
		return
	}
	at := (len(s.req.Prompt) - 1) / e.cfg.BlockSize * e.cfg.BlockSize
	slot, ckAt, written := it.Seq.Checkpoint()
	if slot < 0 {
		if at == 0 || it.Start > at || !e.sched.TakeCheckpoint(it.Seq, at) {
			return
		}
		slot, ckAt, written = it.Seq.Checkpoint()
	}
	if !written && ckAt <= verifiedEnd(it) {
		rows.Checkpoint, rows.CheckpointAt = slot, int32(ckAt)
	}
}

// verifiedEnd is the position after the last row of item it that is not a
// draft: as far as its state is the sequence's whatever verification says.
func verifiedEnd(it scheduler.Item) int { return it.Start + it.N - len(it.Draft) }

// afterStateStep settles, after a successful step, what item's rows did to
// the state slots: a seed read, a checkpoint written.
func (e *Engine) afterStateStep(it scheduler.Item) {
	if it.Seq.Seed() >= 0 {
		e.sched.Seeded(it.Seq)
	}
	if slot, at, written := it.Seq.Checkpoint(); slot >= 0 && !written && it.Start <= at && at <= verifiedEnd(it) {
		e.sched.CheckpointWritten(it.Seq)
	}
}

// rollBackState puts, after verification kept kept of item it's drafts
// (and the scheduler's Accept kept their KV), the sequence's state back to
// the one after them: the step left it after its last draft. A sequence
// that verification ended has no slot to set. It ends s on the backend's
// error.
func (e *Engine) rollBackState(s *Sequence, it scheduler.Item, kept int) {
	if len(it.Draft) == 0 || it.Seq.State() != scheduler.StateRunning || it.Seq.StateSlot() < 0 {
		return
	}
	r, ok := e.model.(stateRollBacker)
	if !ok {
		return // no state: the pool rolled the KV back on its own
	}
	if err := r.RollBackState(it.Seq.StateSlot(), kept); err != nil {
		e.end(s, Result{Finish: FinishError, Err: fmt.Errorf("engine: speculation: %w", err)})
	}
}

// forkState gives forked choice c the state its leader kept at the point
// c resumes from; c ends with an error if the backend cannot copy it.
func (e *Engine) forkState(c, leader *Sequence) {
	if c.sq.NumComputed() == 0 {
		return // nothing shared: c computes its prompt from a fresh state
	}
	slot, _, _ := leader.sq.Checkpoint()
	r, ok := e.model.(RecurrentModel)
	if !ok {
		return
	}
	if err := r.CopyState(c.sq.StateSlot(), slot); err != nil {
		e.end(c, Result{Finish: FinishError, Err: fmt.Errorf("engine: fork: %w", err)})
	}
}
