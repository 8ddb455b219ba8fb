package kvcache

// Recurrent-state slots (hybrid models: Qwen3.5's Gated DeltaNet layers).
// Such a model keeps, besides KV for its attention layers, a fixed-size
// state per sequence that sums everything the sequence has read. The pool
// hands out its slots with the blocks, so one lifecycle covers both:
//
//	Allocate on an empty table   takes a slot (and fails, changing nothing, when none can be had)
//	Free (finish, abort, preempt) returns it, in the same call as the blocks
//	Fork                          gives the child a slot of its own
//
// A slot's memory belongs to the backend (kernels.StateStore). A state is
// valid only at the position its table computed up to, so KV blocks alone
// cannot be reused: a table may also hold a checkpoint, a second slot into
// which the model copies its state at a block boundary on the way
// (TakeCheckpoint; kernels.SeqRows.CheckpointAt). A fork shares the source
// table's blocks up to its written checkpoint, and the owner copies that
// state into the child's slot. With prefix caching, a checkpoint whose
// blocks are committed becomes a cached state (CacheCheckpoint, statecache.go),
// keyed by the chained hash of the block it ends: a lookup then finds
// blocks only up to the deepest cached state, and the table allocated from
// it starts from that state (Table.Seed). Cached states are evicted, least
// recently used first, when a slot is wanted, and with the block they end.
//
//	slots = free + held by tables (state, checkpoint) + cached

// stateSlots is the free stack of slot ids and who holds which.
type stateSlots struct {
	free   []int32 // free slot ids; taken from the end
	held   []bool  // [slots] held by a table or the cache
	cache  bool    // checkpoints may become cached states
	cached map[uint64]*cachedState
	tick   uint64 // LRU clock
	// rollBack: the owner puts a truncated table's state back (Truncate).
	rollBack bool
}

func newStateSlots(n int, cache bool) *stateSlots {
	s := &stateSlots{free: make([]int32, n), held: make([]bool, n), cache: cache, cached: map[uint64]*cachedState{}}
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

// stateFits reports whether t has a slot or can get one without evicting
// keep (the cached state pre would seed it from).
func (p *Pool) stateFits(t *Table, keep *cachedState) bool {
	return p.states == nil || t.hasState() || p.states.canTake(keep)
}

// takeState gives t a slot if the pool has slots and t none, and, when t is
// being allocated from pre, the cached state it starts from; the caller
// has checked stateFits.
func (p *Pool) takeState(t *Table, pre *Prefix) {
	if p.states == nil || t.hasState() {
		return
	}
	var keep *cachedState
	if t.shares(pre) {
		keep = pre.state
	}
	t.state = p.takeSlot(keep) + 1
	if keep != nil {
		keep.pins++
		t.seed = keep
	}
}

// takeSlot pops a free slot, evicting the least recently used cached state
// (but not keep) when none is free; the caller has checked canTake.
func (p *Pool) takeSlot(keep *cachedState) int32 {
	s := p.states
	if len(s.free) == 0 {
		p.evictState(keep)
	}
	id := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.held[id] = true
	return id
}

// releaseState returns t's slot, its checkpoint's and its seed's pin.
func (p *Pool) releaseState(t *Table) {
	p.ReleaseCheckpoint(t)
	p.Seeded(t)
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
// its state at position at (a multiple of BlockSize above 0), for forks
// and the prefix cache. It returns false, changing nothing, when t has none
// to checkpoint, has a checkpoint already, at is not such a position, or no
// slot can be had.
func (p *Pool) TakeCheckpoint(t *Table, at int) bool {
	if p.states == nil || !t.hasState() || t.ckpt != 0 || at <= 0 || at%p.bs != 0 || at > 1<<30 || !p.states.canTake(nil) {
		return false
	}
	t.ckpt, t.ckptAt, t.ckptWritten = p.takeSlot(nil)+1, int32(at), false
	return true
}

// Checkpoint is t's checkpoint slot (−1: none), the position it keeps the
// state at, and whether the state there has been written (CheckpointWritten).
func (t *Table) Checkpoint() (slot int32, at int, written bool) {
	return t.ckpt - 1, int(t.ckptAt), t.ckptWritten
}

// CheckpointWritten records that the model has copied t's state at its
// checkpoint position into the checkpoint slot: forks of t may share its
// blocks up to there, and CacheCheckpoint may keep it.
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

// Seed is the slot of the cached state t starts from (its first step reads
// it instead of t's own slot: kernels.SeqRows.Seed), −1 when none.
func (t *Table) Seed() int32 {
	if t.seed == nil {
		return -1
	}
	return t.seed.slot
}

// Seeded records that t's first step has read its seed: the cached state
// may be evicted again.
func (p *Pool) Seeded(t *Table) {
	if t.seed != nil {
		t.seed.pins--
		t.seed = nil
	}
}

// PrefixCaching reports whether the pool indexes computed blocks (and, with
// state slots, keeps checkpoints as cached states).
func (p *Pool) PrefixCaching() bool { return p.cache }
