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
// without the state after it (Config.States). For the same reason a fork
// shares no blocks: the child computes its prompt itself (see Fork).

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

// releaseState returns t's slot.
func (p *Pool) releaseState(t *Table) {
	if p.states == nil || !t.hasState() {
		return
	}
	id := t.state - 1
	p.states.held[id] = false
	p.states.free = append(p.states.free, id)
	t.state = 0
}

// checkStates verifies that the free stack and the held flags partition the
// slots and, with tables given, that each held slot has exactly one table.
func (p *Pool) checkStates(tables []*Table) error {
	s := p.states
	if s == nil {
		for i, t := range tables {
			if t.hasState() {
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
		if !t.hasState() {
			continue
		}
		id := t.StateSlot()
		if id < 0 || int(id) >= len(s.held) || !s.held[id] {
			return invariantf("table %d holds state slot %d, which the pool does not count held", i, id)
		}
		if by[id]++; by[id] > 1 {
			return invariantf("state slot %d held by two tables", id)
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
