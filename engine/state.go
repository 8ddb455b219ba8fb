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
// and each step's batch names the slot (kernels.SeqRows.State). The
// model's state is valid only for positions a sequence computed in order
// from 0, so the pool does no prefix caching for such a model (kvcache
// state.go). A group's leader keeps its state at the last block boundary
// of the prompt in a checkpoint slot while it prefills; its choices fork
// its blocks up to there and start from a copy of that state (CopyState).
type RecurrentModel interface {
	Model
	StateSlots() int
	StateSlotBytes() int64 // one slot's memory, every recurrent layer
	CopyState(dst, src int32) error
}

// stateSlots is the pool's slot count for m: 0 for a model without state.
func stateSlots(m Model) (slots int, bytes int64) {
	if r, ok := m.(RecurrentModel); ok {
		return r.StateSlots(), r.StateSlotBytes()
	}
	return 0, 0
}

// checkpointRows asks the model, in rows (the batch's part for item it), to
// keep a group leader's state at the last block boundary of its prompt,
// where its choices will fork it (forkGroups). A leader whose step already
// passed that point, or that finds no slot free, keeps none: its choices
// then compute the prompt themselves.
func (e *Engine) checkpointRows(rows *kernels.SeqRows, it scheduler.Item) {
	s := owner(it.Seq)
	if len(s.choices) == 0 || e.pool.Usage().StatesTotal == 0 {
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
	if !written {
		rows.Checkpoint, rows.CheckpointAt = slot, int32(ckAt)
	}
}

// noteCheckpoint records, after a successful step, that a leader's step
// reached its checkpoint position (so the model wrote it).
func (e *Engine) noteCheckpoint(it scheduler.Item) {
	if slot, at, written := it.Seq.Checkpoint(); slot >= 0 && !written && it.Start <= at && at <= it.Start+it.N {
		e.sched.CheckpointWritten(it.Seq)
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
