package kvcache

import (
	"errors"
	"fmt"
)

// DefaultBlockSize is the number of token slots per block unless configured.
const DefaultBlockSize = 16

// ErrConfig reports an invalid pool configuration.
var ErrConfig = errors.New("kvcache: invalid config")

const none = -1 // free-list terminator

// Config sizes a pool.
type Config struct {
	Blocks        int  // blocks in the pool (the backend's KVStore holds as many)
	BlockSize     int  // token slots per block; 0 = DefaultBlockSize
	PrefixCaching bool // index computed full blocks for reuse

	// Events is told of every change to the prefix index (nil: nobody).
	Events Events

	// Window, when set, keeps sliding-window layers in a block group of
	// their own whose blocks are released once out of reach (window.go).
	Window WindowConfig

	// States is the number of recurrent-state slots of a hybrid model, one
	// per running sequence, handed out and taken back with the blocks, the
	// rest kept as checkpoints and cached states (state.go); 0: none. With
	// slots, a prefix hit reaches only as far as a cached state.
	States int
}

// Usage is a snapshot of the pool's blocks by state; Free+Used+Cached = Total.
// StatesTotal, StatesUsed (held by tables: states and checkpoints) and
// StatesCached count the recurrent-state slots (0 without; state.go).
type Usage struct {
	Total, Free, Used, Cached             int
	StatesTotal, StatesUsed, StatesCached int
}

// Stats are cumulative counters since the pool was made.
type Stats struct {
	HitBlocks int64 // blocks shared from the prefix cache by Allocate
	Evictions int64 // cached blocks evicted to serve a fresh allocation
}

type block struct {
	prev, next int32 // free-list links; meaningful only while inFree
	ref        int32
	inFree     bool
	hashed     bool   // in the index under hash
	hash       uint64 // chained hash of (parent, tokens)
	parent     uint64 // parent block's hash, to verify a hit
}

// Pool hands out block ids. The zero value is unusable; use NewPool.
type Pool struct {
	bs     int
	cache  bool
	blocks []block
	toks   []int32 // [len(blocks)*bs]: the token ids of each indexed block, to verify hits
	index  map[uint64]int32
	events Events
	group  Group // what events say of this pool's blocks

	head, tail  int32 // free list: head is taken (evicted) first
	nFree       int   // blocks on the free list (free + cached)
	nCachedFree int   // indexed blocks on the free list
	stats       Stats
	win         *windowGroup // nil: no window group
	states      *stateSlots  // nil: no recurrent-state slots (state.go)
}

// NewPool makes a pool with every block free.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.Blocks <= 0 || cfg.BlockSize <= 0 || cfg.Blocks > 1<<30 || cfg.States < 0 || cfg.States > 1<<20 {
		return nil, fmt.Errorf("%w: %d blocks of %d tokens, %d state slots", ErrConfig, cfg.Blocks, cfg.BlockSize, cfg.States)
	}
	p := &Pool{
		bs:     cfg.BlockSize,
		cache:  cfg.PrefixCaching,
		events: cfg.Events,
		blocks: make([]block, cfg.Blocks),
		head:   none,
		tail:   none,
	}
	var err error
	if p.win, err = newWindowGroup(cfg); err != nil {
		return nil, err
	}
	p.group.Groups = 1
	if p.win != nil {
		p.group.Groups = 2
	}
	if p.cache {
		p.toks = make([]int32, cfg.Blocks*cfg.BlockSize)
		p.index = make(map[uint64]int32)
	}
	for i := range p.blocks {
		p.pushBack(int32(i))
	}
	if cfg.States > 0 {
		p.states = newStateSlots(cfg.States, p.cache)
	}
	return p, nil
}

// BlockSize is the number of token slots per block.
func (p *Pool) BlockSize() int { return p.bs }

// Usage returns the current block counts.
func (p *Pool) Usage() Usage {
	u := Usage{
		Total:  len(p.blocks),
		Free:   p.nFree - p.nCachedFree,
		Used:   len(p.blocks) - p.nFree,
		Cached: p.nCachedFree,
	}
	if s := p.states; s != nil {
		u.StatesTotal, u.StatesCached = len(s.held), len(s.cached)
		u.StatesUsed = len(s.held) - len(s.free) - len(s.cached)
	}
	return u
}

// Stats returns the cumulative counters.
func (p *Pool) Stats() Stats { return p.stats }

// BlocksFor is the number of blocks that hold n tokens.
func (p *Pool) BlocksFor(n int) int { return (n + p.bs - 1) / p.bs }

// need is how many fresh blocks growing t to n tokens takes, and how many
// free-list blocks sharing pre takes out of the pool on top of those.
func (p *Pool) need(t *Table, pre *Prefix, n int) (fresh, shared int) {
	have := len(t.blocks)
	if t.shares(pre) {
		have = len(pre.blocks)
		shared = pre.unref
	}
	return max(p.BlocksFor(n)-have, 0), shared
}

// CanAllocate reports whether Allocate(t, pre, n) would succeed while leaving
// at least reserve blocks on the free list (free or cached). pre is the cached
// prefix found by Lookup for an empty table; pass nil otherwise (it is
// ignored for a table that already holds blocks).
func (p *Pool) CanAllocate(t *Table, pre *Prefix, n, reserve int) bool {
	fresh, shared := p.need(t, pre, n)
	var keep *cachedState
	if t.shares(pre) {
		keep = pre.state
	}
	return fresh+shared+reserve <= p.nFree && p.winCanAllocate(t, pre, n, reserve) && p.stateFits(t, keep)
}

// Allocate grows t so that it holds n tokens: first, for an empty table, by
// sharing the blocks of pre; then with fresh blocks. It returns false, and
// changes nothing, when that would leave fewer than reserve blocks on the
// free list.
func (p *Pool) Allocate(t *Table, pre *Prefix, n, reserve int) bool {
	if !p.CanAllocate(t, pre, n, reserve) {
		return false
	}
	p.winAllocate(t, pre)
	p.takeState(t, pre)
	if t.shares(pre) {
		for _, id := range pre.blocks {
			p.share(id)
		}
		t.blocks = append(t.blocks, pre.blocks...)
		t.hashes = append(t.hashes, pre.hashes...)
		p.stats.HitBlocks += int64(len(pre.blocks))
	}
	for len(t.blocks) < p.BlocksFor(n) {
		t.blocks = append(t.blocks, p.takeFresh())
	}
	p.winGrow(t, n)
	return true
}

// Free returns t's blocks to the pool, last block first, and empties t.
// Indexed blocks whose count drops to zero become cached; the tail of a
// sequence is evicted before its head, which other sequences likelier share.
func (p *Pool) Free(t *Table) {
	p.winFree(t)
	p.releaseState(t)
	for i := len(t.blocks) - 1; i >= 0; i-- {
		if id := t.blocks[i]; id != none { // none: a window table's released block
			p.release(id)
		}
	}
	t.reset()
}

// release drops one reference to block id.
func (p *Pool) release(id int32) {
	b := &p.blocks[id]
	b.ref--
	if b.ref > 0 {
		return
	}
	if b.hashed {
		p.pushBack(id)
		p.nCachedFree++
	} else {
		p.pushFront(id)
	}
}

// share adds a reference to an indexed block, taking it off the free list
// if it was cached.
func (p *Pool) share(id int32) {
	b := &p.blocks[id]
	if b.ref == 0 {
		p.unlink(id)
		p.nCachedFree--
	}
	b.ref++
}

// takeFresh pops the free list's head, evicting it from the index if it was cached.
// The caller has checked that the list is not empty.
func (p *Pool) takeFresh() int32 {
	id := p.head
	p.unlink(id)
	b := &p.blocks[id]
	if b.hashed {
		delete(p.index, b.hash)
		b.hashed = false
		p.nCachedFree--
		p.stats.Evictions++
		p.dropState(b.hash)
		if p.events != nil {
			p.events.BlockRemoved(p.group, b.hash)
		}
	}
	b.ref = 1
	return id
}

func (p *Pool) pushBack(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = p.tail, none, true
	if p.tail == none {
		p.head = id
	} else {
		p.blocks[p.tail].next = id
	}
	p.tail = id
	p.nFree++
}

func (p *Pool) pushFront(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = none, p.head, true
	if p.head == none {
		p.tail = id
	} else {
		p.blocks[p.head].prev = id
	}
	p.head = id
	p.nFree++
}

func (p *Pool) unlink(id int32) {
	b := &p.blocks[id]
	if b.prev == none {
		p.head = b.next
	} else {
		p.blocks[b.prev].next = b.next
	}
	if b.next == none {
		p.tail = b.prev
	} else {
		p.blocks[b.next].prev = b.prev
	}
	b.prev, b.next, b.inFree = none, none, false
	p.nFree--
}
