package kvcache

// Fork makes dst, an empty table, a copy-on-write child of src for src's
// first n tokens, whose KV must be computed: the full blocks among them are
// shared (one more reference each) and stay read-only, as every block of an
// append-only table does once full. The partially filled last block is not
// shared: the child's first write past the shared blocks goes into a fresh
// block of its own (Allocate), so neither table ever writes into a block the
// other reads. It returns the number of leading tokens dst now holds, a
// multiple of BlockSize; the caller fills [that, n) of the child itself
// (the backend owns the KV memory and offers no block copy, so the engine
// recomputes those fewer than BlockSize positions).
//
//	src    [ 7 | 2 | 9· ]      n = 40, BlockSize 16: block 9 holds 8 tokens
//	dst    [ 7 | 2 ]           ref(7) = ref(2) = 2; returns 32
//	dst after its next Allocate: [ 7 | 2 | 11 ]
//
// The child inherits src's prefix-cache state for the shared blocks (their
// hashes, and uncacheable after a collision), so its later blocks chain on
// from them. With a window group the child shares src's window blocks too,
// those src has released staying released in the child. Fork takes nothing
// off the free list: shared blocks are held by src already, so it needs no
// room. n beyond src's blocks is clamped to them. It returns false,
// changing nothing, when dst is not empty, when dst's salt is not src's
// (Table.SetSalt: the fork would share blocks across partitions), or when
// src has already released a window block the child's first rows would
// read (src computed past the fork point by more than the window): the
// child then needs its prompt computed afresh (or found in the prefix
// cache).
//
// In a pool with recurrent-state slots (state.go) the child takes a slot of
// its own (false when none is free) and shares blocks only up to src's
// written checkpoint, when that lies within n (0 without one: the child
// computes the prompt from its start); the caller copies the checkpoint's
// state into the child's slot before the child's next step.
func (p *Pool) Fork(dst, src *Table, n int) (int, bool) {
	full := min(max(n, 0)/p.bs, len(src.blocks))
	if p.states != nil {
		if dst.hasState() || dst.ckpt != 0 || !p.stateFits(dst, nil) {
			return 0, false
		}
		if at := int(src.ckptAt); !src.ckptWritten || at > full*p.bs {
			full = 0
		} else {
			full = at / p.bs
		}
	}
	if len(dst.blocks) != 0 || dst == src || dst.salt != src.salt || !p.winForkable(src, full) {
		return 0, false
	}
	p.takeState(dst, nil)
	for _, id := range src.blocks[:full] {
		p.blocks[id].ref++
	}
	dst.blocks = append(dst.blocks, src.blocks[:full]...)
	dst.hashes = append(dst.hashes, src.hashes[:min(full, len(src.hashes))]...)
	dst.uncacheable = src.uncacheable
	p.winFork(dst, src, full)
	return full * p.bs, true
}

// winForkable reports whether src still holds every window block that rows
// from position full*BlockSize on read.
func (p *Pool) winForkable(src *Table, full int) bool {
	if p.win == nil || full == 0 {
		return true
	}
	return src.win != nil && p.win.first(full*p.bs, p.bs) >= src.win.lo
}

// winFork is Fork's part for the window group: dst's window table shares
// src's first full entries (none below src's released mark).
func (p *Pool) winFork(dst, src *Table, full int) {
	if p.win == nil {
		return
	}
	if dst.win == nil {
		dst.win = new(windowTable)
	}
	dst.win.salt = src.salt
	if full == 0 {
		return
	}
	sw, wt := src.win, dst.win
	for _, id := range sw.blocks[:full] {
		if id != none {
			p.win.pool.blocks[id].ref++
		}
	}
	wt.blocks = append(wt.blocks, sw.blocks[:full]...)
	wt.hashes = append(wt.hashes, sw.hashes[:min(full, len(sw.hashes))]...)
	wt.uncacheable = sw.uncacheable
	wt.lo = sw.lo
}
