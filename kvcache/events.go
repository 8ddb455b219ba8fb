package kvcache

// Events receives the prefix index's changes as they happen, for consumers
// outside the engine such as a KV-event publisher that lets a router send a
// request to the replica already holding its prefix. Calls come on the pool's
// owner goroutine (the engine loop), so an implementation must return at once:
// copy what it keeps and hand it off, never wait.
//
// Each event names its block group. A pool with a window group (window.go)
// indexes both groups under the same chained hashes and reports both, so
// that a consumer can serve itself the hit Lookup would: see PredictHit.
//
// The stream is exact, group by group: a hash is stored at most once before
// it is removed, the blocks stored and not yet removed are the group's
// index, and a block is stored only after its parent was (parent 0: a
// sequence's first block) in the same group. The parent may have been
// evicted since: a running sequence keeps its own copy.
type Events interface {
	// BlockStored: a full block entered g's index under hash, chained from
	// parent's hash, holding tokens (valid only during the call).
	BlockStored(g Group, hash, parent uint64, tokens []int32)
	// BlockRemoved: g's block indexed under hash was evicted for reuse. In
	// the window group that happens only after the window has passed it
	// (released blocks stay indexed, and serve hits, until evicted).
	BlockRemoved(g Group, hash uint64)
}

// Group names the block group an event is about.
type Group struct {
	// Index is 0 for the global group, 1 for the window group.
	Index int
	// Window is W for the window group: its layers read the last W
	// positions. 0 for the global group (every position).
	Window int
	// Groups is how many groups the pool has: 1, or 2 with a window group.
	Groups int
}

// BlockHash is the prefix cache's hash of a full block of tokens whose
// preceding blocks hash to parent (0 for a sequence's first block): what
// Events reports and what a consumer recomputes to check it. A salted
// sequence's first block (Table.SetSalt) hashes from its salt's seed
// instead, BlockHash(SaltOf(salt), tokens), while its event still names
// parent 0; PredictHit, which knows no salt, predicts the unsalted cache.
func BlockHash(parent uint64, tokens []int32) uint64 { return hashBlock(parent, tokens) }

// PredictHit is Lookup's rule, for a consumer that knows only the events:
// the tokens of tokens' longest prefix (at most limit tokens, whole blocks
// of bs) that Lookup would serve, given has, which reports whether group
// g's index holds hash. The global group must hold every block of the
// prefix; a window group of window W the blocks of its last W−1 positions,
// the only ones a row at the prefix's end still reads (a pool without one:
// window 0). Lookup also rejects a hash collision, which a consumer holding
// the tokens may check too.
func PredictHit(tokens []int32, limit, bs, window int, has func(group int, hash uint64) bool) int {
	limit = min(limit, len(tokens))
	var hashes []uint64
	var parent uint64
	for end := bs; end <= limit; end += bs {
		h := hashBlock(parent, tokens[end-bs:end])
		if !has(0, h) {
			break
		}
		hashes = append(hashes, h)
		parent = h
	}
	if window == 0 {
		return len(hashes) * bs
	}
	k := len(hashes)
	for ; k > 0; k-- {
		lo := max(k*bs-window+1, 0) / bs
		all := true
		for i := lo; i < k && all; i++ {
			all = has(1, hashes[i])
		}
		if all {
			break
		}
	}
	return k * bs
}

// Indexed calls fn for every block in the prefix index, the window group's
// too, in no particular order. It reads loop-owned state: call it from the
// pool's owner only.
func (p *Pool) Indexed(fn func(g Group, hash, parent uint64, tokens []int32)) {
	for id := range p.blocks {
		if b := &p.blocks[id]; b.hashed {
			fn(p.group, b.hash, b.parent, p.toks[id*p.bs:(id+1)*p.bs])
		}
	}
	if p.win != nil {
		p.win.pool.Indexed(fn)
	}
}
