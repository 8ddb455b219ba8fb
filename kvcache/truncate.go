package kvcache

// Truncate shrinks t to the blocks that hold its first n tokens, returning
// the rest to the pool at once: a speculative step wrote KV for draft tokens
// that verification rejected, and their slots must not outlive the step.
// Only blocks past those n tokens go, so none of them is indexed (Commit
// indexes only complete blocks of computed tokens) or shared (a fork shares
// only its parent's computed prefix). A window table shrinks alike
// (winTruncate); n must be no less than the tokens it had computed, as the
// scheduler's verified count is, since the window blocks it released then
// are gone. A table with a recurrent-state slot cannot roll back unless the
// owner puts its state back (SetStateRollBack): it reports false, changing
// nothing. A block that keeps some of the n tokens stays whole: the slots
// past n are overwritten when those positions are computed again.
func (p *Pool) Truncate(t *Table, n int) bool {
	if t.hasState() && !p.states.rollBack {
		return false
	}
	keep := p.BlocksFor(max(n, 0))
	p.winTruncate(t, keep)
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
// recurrent-state slots unless their owner rolls the states back.
func (p *Pool) CanRollBack() bool { return p.states == nil || p.states.rollBack }

// SetStateRollBack says whether the owner of a pool with state slots puts a
// table's recurrent state back to its first n tokens whenever it truncates
// it to them (the engine does so for a model whose backend keeps the state
// after each draft row: kernels.StateRollBack). The slots themselves do not
// change hands: the table keeps its slot, and its checkpoint, which holds a
// verified position only (kernels.SeqRows.Drafts), stays valid.
func (p *Pool) SetStateRollBack(ok bool) {
	if p.states != nil {
		p.states.rollBack = ok
	}
}
