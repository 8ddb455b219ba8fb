package kvcache

// Events receives the prefix index's changes as they happen, for consumers
// outside the engine such as a KV-event publisher that lets a router send a
// request to the replica already holding its prefix. Calls come on the pool's
// owner goroutine (the engine loop), so an implementation must return at once:
// copy what it keeps and hand it off, never wait.
//
// The stream is exact: a hash is stored at most once before it is removed,
// the blocks stored and not yet removed are the index, and a block is stored
// only after its parent was (parent 0: a sequence's first block). The parent
// may have been evicted since: a running sequence keeps its own copy.
type Events interface {
	// BlockStored: a full block entered the index under hash, chained from
	// parent's hash, holding tokens (valid only during the call).
	BlockStored(hash, parent uint64, tokens []int32)
	// BlockRemoved: the block indexed under hash was evicted for reuse.
	BlockRemoved(hash uint64)
}

// BlockHash is the prefix cache's hash of a full block of tokens whose
// preceding blocks hash to parent (0 for a sequence's first block): what
// Events reports and what a consumer recomputes to check it.
func BlockHash(parent uint64, tokens []int32) uint64 { return hashBlock(parent, tokens) }

// Indexed calls fn for every block in the prefix index, in no particular
// order. It reads loop-owned state: call it from the pool's owner only.
func (p *Pool) Indexed(fn func(hash, parent uint64, tokens []int32)) {
	for id := range p.blocks {
		if b := &p.blocks[id]; b.hashed {
			fn(b.hash, b.parent, p.toks[id*p.bs:(id+1)*p.bs])
		}
	}
}
