package kvcache

import (
	"errors"
	"fmt"
)

// ErrInvariant reports broken pool bookkeeping; it is only ever returned by
// CheckInvariants or CheckRefs and means a bug.
var ErrInvariant = errors.New("kvcache: invariant violated")

// CheckInvariants verifies the pool's bookkeeping: the free list is a
// well-formed doubly linked list holding exactly the unreferenced blocks, the
// counts match, the index and the blocks agree, and free+used+cached = total.
// It walks everything and is meant for tests.
func (p *Pool) CheckInvariants() error {
	n, cached := 0, 0
	prev := int32(none)
	for id := p.head; id != none; id = p.blocks[id].next {
		b := &p.blocks[id]
		if n++; n > len(p.blocks) {
			return invariantf("free list has a cycle")
		}
		switch {
		case !b.inFree:
			return invariantf("block %d on the free list not marked free", id)
		case b.ref != 0:
			return invariantf("block %d on the free list has ref %d", id, b.ref)
		case b.prev != prev:
			return invariantf("block %d prev=%d, want %d", id, b.prev, prev)
		}
		if b.hashed {
			cached++
		}
		prev = id
	}
	if prev != p.tail {
		return invariantf("tail=%d, last on list %d", p.tail, prev)
	}
	if n != p.nFree || cached != p.nCachedFree {
		return invariantf("free list holds %d (%d cached), counters say %d (%d)", n, cached, p.nFree, p.nCachedFree)
	}
	indexed := 0
	for id := range p.blocks {
		b := &p.blocks[id]
		if b.ref < 0 || (b.ref == 0) != b.inFree {
			return invariantf("block %d ref=%d inFree=%v", id, b.ref, b.inFree)
		}
		if b.hashed {
			indexed++
			if got, ok := p.index[b.hash]; !ok || got != int32(id) {
				return invariantf("block %d hashed but index has %d,%v", id, got, ok)
			}
		}
	}
	if indexed != len(p.index) {
		return invariantf("%d blocks hashed, index holds %d", indexed, len(p.index))
	}
	if u := p.Usage(); u.Free+u.Used+u.Cached != u.Total || u.Free < 0 || u.Used < 0 {
		return invariantf("usage %+v", u)
	}
	return p.checkStates(nil)
}

// CheckRefs verifies CheckInvariants and that tables are exactly the live
// tables: each block's reference count equals the number of tables holding it.
func (p *Pool) CheckRefs(tables []*Table) error {
	if err := p.CheckInvariants(); err != nil {
		return err
	}
	refs := make([]int32, len(p.blocks))
	for ti, t := range tables {
		if len(t.hashes) > len(t.blocks) {
			return invariantf("table %d: %d hashes for %d blocks", ti, len(t.hashes), len(t.blocks))
		}
		for _, id := range t.blocks {
			if id < 0 || int(id) >= len(p.blocks) {
				return invariantf("table %d holds block %d out of range", ti, id)
			}
			refs[id]++
		}
	}
	for id, r := range refs {
		if p.blocks[id].ref != r {
			return invariantf("block %d ref=%d, held by %d tables", id, p.blocks[id].ref, r)
		}
	}
	if err := p.checkStates(tables); err != nil {
		return err
	}
	return p.winCheckRefs(tables)
}

func invariantf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvariant}, args...)...)
}
