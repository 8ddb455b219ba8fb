package kvcache

// Recurrent-state slots (hybrid models: Qwen3.5's Gated DeltaNet layers).
// Such a model keeps, besides KV for its attention layers, a fixed-size
// state per sequence that sums everything the sequence has read. The pool
// hands out its slots with the blocks, so one lifecycle covers both:
//
//	Allocate on an empty table   takes a slot (and fails, changing nothing, when none is free)
//	Free (finish, abort, preempt) returns it, in the same call as the blocks
//	Fork                          gives the child a slot of its own
//
// A slot's memory belongs to the backend (kernels.StateStore). A state is
// valid only for the positions its table computed in order from 0, so a
// pool with slots does no prefix caching: a cached block's KV would come
// without the state after it (Config.States). A fork shares blocks only up
// to a checkpoint: a second slot its source table holds (TakeCheckpoint),
// into which the model copied the state at a block boundary on the way
// (kernels.SeqRows.CheckpointAt); the owner copies that state into the
// child's slot. Without one the child computes its prompt itself.

// stateSlots is the free stack of slot ids and who holds which.
type stateSlots struct {
	free []int32 // free slot ids; taken from the end
	held []bool  // [slots] held by a table
}

func newStateSlots(n int) *stateSlots {
	s := &stateSlots{free: make([]int32, n), held: make([]bool, n)}
	for i := range s.free {
		s.free[i] = int32(n - 1 - i) // slot 0 is taken first
	}
	return s
}

// StateSlot is the table's recurrent-state slot, −1 when it holds none (a
// pool without slots, or an empty table).
func (t *Table) StateSlot() int32 { return t.state - 1 }

// hasState reports whether t holds a slot (stored as slot+1, so the zero
// Table holds none).
func (t *Table) hasState() bool { return t.state != 0 }

// stateFits reports whether t has a slot or one is free for it.
func (p *Pool) stateFits(t *Table) bool {
	return p.states == nil || t.hasState() || len(p.states.free) > 0
}

// takeState gives t a slot if the pool has slots and t none; the caller has
// checked stateFits.
func (p *Pool) takeState(t *Table) {
	if p.states == nil || t.hasState() {
		return
	}
	s := p.states
	id := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.held[id] = true
	t.state = id + 1
}

// releaseState returns t's slot and its checkpoint's.
func (p *Pool) releaseState(t *Table) {
	p.ReleaseCheckpoint(t)
	if p.states == nil || !t.hasState() {
		return
	}
	p.putSlot(t.state - 1)
	t.state = 0
}

func (p *Pool) putSlot(id int32) {
	p.states.held[id] = false
	p.states.free = append(p.states.free, id)
}

// TakeCheckpoint gives t, which holds a slot, a second one in which to keep
// its state at position at (a multiple of BlockSize above 0) for a fork.
// It returns false, changing nothing, when t has none to checkpoint, has a
// checkpoint already, at is not such a position, or no slot is free.
func (p *Pool) TakeCheckpoint(t *Table, at int) bool {
	if p.states == nil || !t.hasState() || t.ckpt != 0 || at <= 0 || at%p.bs != 0 || at > 1<<30 || len(p.states.free) == 0 {
		return false
	}
	s := p.states
	id := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.held[id] = true
	t.ckpt, t.ckptAt, t.ckptWritten = id+1, int32(at), false
	return true
}

// Checkpoint is t's checkpoint slot (−1: none), the position it keeps the
// state at, and whether the state there has been written (CheckpointWritten).
func (t *Table) Checkpoint() (slot int32, at int, written bool) {
	return t.ckpt - 1, int(t.ckptAt), t.ckptWritten
}

// CheckpointWritten records that the model has copied t's state at its
// checkpoint position into the checkpoint slot: forks of t may share its
// blocks up to there.
func (p *Pool) CheckpointWritten(t *Table) {
	if t.ckpt != 0 {
		t.ckptWritten = true
	}
}

// ReleaseCheckpoint returns t's checkpoint slot, if it holds one.
func (p *Pool) ReleaseCheckpoint(t *Table) {
	if p.states == nil || t.ckpt == 0 {
		return
	}
	p.putSlot(t.ckpt - 1)
	t.ckpt, t.ckptAt, t.ckptWritten = 0, 0, false
}

// checkStates verifies that the free stack and the held flags partition the
// slots and, with tables given, that each held slot has exactly one table.
func (p *Pool) checkStates(tables []*Table) error {
	s := p.states
	if s == nil {
		for i, t := range tables {
			if t.hasState() || t.ckpt != 0 {
				return invariantf("table %d holds state slot %d in a pool without slots", i, t.StateSlot())
			}
		}
		return nil
	}
	seen := make([]bool, len(s.held))
	for _, id := range s.free {
		if id < 0 || int(id) >= len(s.held) || seen[id] || s.held[id] {
			return invariantf("state slot %d on the free stack twice, held, or out of range", id)
		}
		seen[id] = true
	}
	held := 0
	for id, h := range s.held {
		if h {
			held++
		} else if !seen[id] {
			return invariantf("state slot %d neither free nor held", id)
		}
	}
	if tables == nil {
		return nil
	}
	by := make([]int, len(s.held))
	for i, t := range tables {
		for _, v := range []int32{t.state, t.ckpt} {
			if v == 0 {
				continue
			}
			id := v - 1
			if id < 0 || int(id) >= len(s.held) || !s.held[id] {
				return invariantf("table %d holds state slot %d, which the pool does not count held", i, id)
			}
			if by[id]++; by[id] > 1 {
				return invariantf("state slot %d held twice", id)
			}
		}
		if t.ckpt != 0 && !t.hasState() {
			return invariantf("table %d holds a checkpoint but no state", i)
		}
	}
	n := 0
	for _, c := range by {
		n += c
	}
	if n != held {
		return invariantf("%d state slots held, %d tables hold one", held, n)
	}
	return nil
}
