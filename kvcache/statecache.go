package kvcache

// cachedState is a checkpoint kept for the prefix cache (state.go): the
// state after the block whose chained hash keys it. Tables seeded from it
// pin it until their first step has read it.
type cachedState struct {
	slot int32
	pins int32
	used uint64 // stateSlots.tick when last found or stored
}

// canTake reports whether a slot can be had without evicting keep or a
// pinned cached state.
func (s *stateSlots) canTake(keep *cachedState) bool {
	if len(s.free) > 0 {
		return true
	}
	for _, c := range s.cached {
		if c.pins == 0 && c != keep {
			return true
		}
	}
	return false
}

// evictState frees the least recently used unpinned cached state but keep.
func (p *Pool) evictState(keep *cachedState) {
	s := p.states
	var victim *cachedState
	var key uint64
	for h, c := range s.cached {
		if c.pins == 0 && c != keep && (victim == nil || c.used < victim.used || c.used == victim.used && c.slot < victim.slot) {
			victim, key = c, h
		}
	}
	if victim != nil {
		delete(s.cached, key)
		p.putSlot(victim.slot)
	}
}

// dropState forgets the cached state of a block leaving the index: nothing
// could find it any more.
func (p *Pool) dropState(h uint64) {
	if p.states == nil {
		return
	}
	if c, ok := p.states.cached[h]; ok && c.pins == 0 {
		delete(p.states.cached, h)
		p.putSlot(c.slot)
	}
}

// CacheCheckpoint keeps t's written checkpoint as a cached state when the
// pool caches prefixes and the blocks it ends are committed (Commit), or
// returns its slot; either way t holds no checkpoint afterwards. A state
// already cached for the same prefix is kept instead (refreshed).
func (p *Pool) CacheCheckpoint(t *Table) {
	s := p.states
	if s == nil || t.ckpt == 0 {
		return
	}
	k := int(t.ckptAt) / p.bs
	if !s.cache || !t.ckptWritten || k == 0 || k > len(t.hashes) {
		p.ReleaseCheckpoint(t)
		return
	}
	s.tick++
	h := t.hashes[k-1]
	if c, ok := s.cached[h]; ok {
		c.used = s.tick
		p.ReleaseCheckpoint(t)
		return
	}
	s.cached[h] = &cachedState{slot: t.ckpt - 1, used: s.tick}
	t.ckpt, t.ckptAt, t.ckptWritten = 0, 0, false
}

// stateTrim cuts a lookup's blocks back to the deepest one a cached state
// ends, which the allocated table will start from (pre.state); none: no hit.
func (p *Pool) stateTrim(pre *Prefix) {
	pre.state = nil
	s := p.states
	if s == nil {
		return
	}
	m := len(pre.hashes)
	for ; m > 0; m-- {
		if c, ok := s.cached[pre.hashes[m-1]]; ok {
			s.tick++
			c.used = s.tick
			pre.state = c
			break
		}
	}
	pre.blocks, pre.hashes = pre.blocks[:m], pre.hashes[:m]
	pre.unref = 0
	for _, id := range pre.blocks {
		if p.blocks[id].ref == 0 {
			pre.unref++
		}
	}
}

// checkStates verifies that the free stack, the tables' slots and the
// cached states partition the slots and, with tables given, that each slot
// a table holds is held once and each cached state's pins are the tables
// seeded from it.
func (p *Pool) checkStates(tables []*Table) error {
	s := p.states
	if s == nil {
		for i, t := range tables {
			if t.hasState() || t.ckpt != 0 || t.seed != nil {
				return invariantf("table %d holds state slot %d in a pool without slots", i, t.StateSlot())
			}
		}
		return nil
	}
	owner := make([]int8, len(s.held)) // 1 free, 2 cached, 3 a table
	claim := func(id int32, who int8, what string) error {
		if id < 0 || int(id) >= len(s.held) {
			return invariantf("%s: state slot %d out of range", what, id)
		}
		if owner[id] != 0 {
			return invariantf("%s: state slot %d claimed twice (%d, %d)", what, id, owner[id], who)
		}
		if s.held[id] != (who != 1) {
			return invariantf("%s: state slot %d held=%v", what, id, s.held[id])
		}
		owner[id] = who
		return nil
	}
	for _, id := range s.free {
		if err := claim(id, 1, "free stack"); err != nil {
			return err
		}
	}
	pins := map[*cachedState]int32{}
	for _, c := range s.cached {
		if err := claim(c.slot, 2, "cached state"); err != nil {
			return err
		}
		pins[c] = 0
	}
	if tables == nil {
		for id, h := range s.held {
			if h && owner[id] == 0 {
				owner[id] = 3 // a table's: which one is not known here
			}
		}
	}
	for i, t := range tables {
		for _, v := range []int32{t.state, t.ckpt} {
			if v != 0 {
				if err := claim(v-1, 3, "table"); err != nil {
					return invariantf("table %d: %w", i, err)
				}
			}
		}
		if t.ckpt != 0 && !t.hasState() {
			return invariantf("table %d holds a checkpoint but no state", i)
		}
		if t.seed != nil {
			if _, ok := pins[t.seed]; !ok {
				return invariantf("table %d seeded from a state no longer cached", i)
			}
			pins[t.seed]++
		}
	}
	for id, o := range owner {
		if o == 0 {
			return invariantf("state slot %d held by nothing", id)
		}
	}
	if tables != nil {
		for c, n := range pins {
			if c.pins != n {
				return invariantf("cached state in slot %d has %d pins, %d tables seeded from it", c.slot, c.pins, n)
			}
		}
	}
	return nil
}
