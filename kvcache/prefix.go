package kvcache

import "slices"

// Table is one sequence's block table: append-only while the sequence runs,
// released as a whole by Pool.Free. The zero value is an empty table.
type Table struct {
	blocks []int32  // blocks[i] holds positions [i*BlockSize, (i+1)*BlockSize)
	hashes []uint64 // chained hashes of blocks[:len(hashes)], whose KV is complete
	// uncacheable stops indexing this table's blocks after a hash collision:
	// a child hashed under a colliding parent could otherwise be served to
	// the other chain.
	uncacheable bool
	// salt seeds the hash of the table's first block (SetSalt): tables of
	// different salts never share a block. Kept across Free.
	salt uint64
	win  *windowTable // the window group's table (window.go); nil without one
	// state is the recurrent-state slot + 1 (state.go); 0: none. ckpt is
	// the checkpoint slot + 1, keeping the state at position ckptAt once
	// ckptWritten.
	state, ckpt, ckptAt int32
	ckptWritten         bool
	seed                *cachedState // the cached state t's first step starts from; pinned
}

// Blocks is the block table; it stays valid until the table next changes.
func (t *Table) Blocks() []int32 { return t.blocks }

// SetSalt partitions the prefix cache: the table's first block is hashed
// from salt instead of 0, and every later block chains from it, so its
// blocks are found only by a lookup with the same salt (LookupSalted) and it
// shares only blocks found that way. 0 is the unsalted cache. Set it while
// the table is empty; it stays with the table across Free.
func (t *Table) SetSalt(salt uint64) { t.salt = salt }

// shares reports whether allocating t from pre shares pre's blocks: t is
// empty, pre found some, and under t's salt.
func (t *Table) shares(pre *Prefix) bool {
	return pre != nil && len(t.blocks) == 0 && len(pre.blocks) > 0 && pre.salt == t.salt
}

// Len is the number of blocks in the table.
func (t *Table) Len() int { return len(t.blocks) }

func (t *Table) reset() {
	t.blocks = t.blocks[:0]
	t.hashes = t.hashes[:0]
	t.uncacheable = false
}

// Prefix is the run of cached blocks Lookup found for a token sequence. It is
// scratch space: reuse one across lookups to avoid allocating.
type Prefix struct {
	blocks []int32
	hashes []uint64
	unref  int    // blocks among them with no reference (on the free list)
	salt   uint64 // the lookup's salt: only a table of this salt shares them
	win    windowPrefix
	state  *cachedState // with state slots: the state after the last block (statecache.go)
}

// Blocks is the number of leading full blocks found in the cache.
func (pre *Prefix) Blocks() int { return len(pre.blocks) }

// Lookup finds the longest run of leading full blocks of tokens, covering at
// most limit tokens, whose KV is in the cache; it fills pre and returns the
// number of tokens covered. Nothing changes until Allocate shares them.
func (p *Pool) Lookup(pre *Prefix, tokens []int32, limit int) int {
	return p.LookupSalted(pre, 0, tokens, limit)
}

// LookupSalted is Lookup in the partition of salt (Table.SetSalt): it finds
// only blocks committed by tables of the same salt, and only a table of that
// salt shares what it found.
func (p *Pool) LookupSalted(pre *Prefix, salt uint64, tokens []int32, limit int) int {
	pre.blocks, pre.hashes, pre.unref, pre.salt, pre.state = pre.blocks[:0], pre.hashes[:0], 0, salt, nil
	if !p.cache {
		return 0
	}
	limit = min(limit, len(tokens))
	var parent uint64
	for end := p.bs; end <= limit; end += p.bs {
		toks := tokens[end-p.bs : end]
		h := hashBlock(chainSeed(parent, salt, end == p.bs), toks)
		id, ok := p.index[h]
		if !ok || !p.holds(id, parent, toks) {
			break
		}
		pre.blocks = append(pre.blocks, id)
		pre.hashes = append(pre.hashes, h)
		if p.blocks[id].ref == 0 {
			pre.unref++
		}
		parent = h
	}
	p.winTrim(pre, tokens)
	p.stateTrim(pre)
	return len(pre.blocks) * p.bs
}

// Commit indexes t's full blocks whose KV is now complete: those wholly
// within the first computed tokens. tokens are the sequence's token ids
// (at least computed of them). Blocks are indexed in order, each under the
// hash chained from its parent, so a block is found only after its whole
// prefix. When another sequence already indexed the same content, that block
// stays the indexed one and t's copy is freed normally when t ends.
func (p *Pool) Commit(t *Table, tokens []int32, computed int) {
	p.winCommit(t, tokens, computed)
	if !p.cache || t.uncacheable {
		return
	}
	computed = min(computed, len(tokens))
	for i := len(t.hashes); i < len(t.blocks) && (i+1)*p.bs <= computed; i++ {
		var parent uint64
		if i > 0 {
			parent = t.hashes[i-1]
		}
		toks := tokens[i*p.bs : (i+1)*p.bs]
		h := hashBlock(chainSeed(parent, t.salt, i == 0), toks)
		if id, ok := p.index[h]; ok {
			if !p.holds(id, parent, toks) {
				t.uncacheable = true
				return
			}
		} else {
			id := t.blocks[i]
			b := &p.blocks[id]
			b.hashed, b.hash, b.parent = true, h, parent
			copy(p.toks[int(id)*p.bs:], toks)
			p.index[h] = id
			if p.events != nil {
				p.events.BlockStored(p.group, h, parent, toks)
			}
		}
		t.hashes = append(t.hashes, h)
	}
}

// holds reports whether indexed block id really is (parent, toks), so that a
// 64-bit hash collision can never serve another prefix's KV.
func (p *Pool) holds(id int32, parent uint64, toks []int32) bool {
	off := int(id) * p.bs
	return p.blocks[id].parent == parent && slices.Equal(p.toks[off:off+p.bs], toks)
}

// chainSeed is what a block's hash chains from: its parent's hash, or for
// the first block the salt (0 unsalted). A first block keeps parent 0 in the
// index and in events either way. That a salted first block can never be
// served to another salt follows from hashBlock: for fixed tokens it is a
// bijection of its seed, so two salts give the same tokens two hashes, and
// holds rejects any other tokens under the same hash.
func chainSeed(parent, salt uint64, first bool) uint64 {
	if first {
		return salt
	}
	return parent
}

// hashBlock chains a block's hash from its parent's: splitmix64's finalizer
// (a bijection with full avalanche) applied after folding in each token.
func hashBlock(parent uint64, toks []int32) uint64 {
	h := parent ^ 0x9e3779b97f4a7c15
	for _, t := range toks {
		h = mix64(h ^ uint64(uint32(t)))
	}
	return h
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
