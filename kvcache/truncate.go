package kvcache

// Truncate shrinks t to the blocks that hold its first n tokens, returning
// the rest to the pool at once: a speculative step wrote KV for draft tokens
// that verification rejected, and their slots must not outlive the step.
// Only blocks past those n tokens go, so none of them is indexed (Commit
// indexes only complete blocks of computed tokens) or shared (a fork shares
// only its parent's computed prefix); a table with a window group or a
// recurrent-state slot cannot roll back (its window blocks and its state
// have moved on) and reports false, changing nothing. A block that keeps
// some of the n tokens stays whole: the slots past n are overwritten when
// those positions are computed again.
func (p *Pool) Truncate(t *Table, n int) bool {
	if p.win != nil || t.hasState() {
		return false
	}
	keep := p.BlocksFor(max(n, 0))
	for i := len(t.blocks) - 1; i >= keep; i-- {
		p.release(t.blocks[i])
	}
	if keep < len(t.blocks) {
		t.blocks = t.blocks[:keep]
	}
	if len(t.hashes) > keep {
		t.hashes = t.hashes[:keep]
	}
	return true
}

// CanRollBack reports whether Truncate can shrink this pool's tables: no
// window group, no recurrent-state slots.
func (p *Pool) CanRollBack() bool { return p.win == nil && p.states == nil }
