package kvcache

import (
	"math/rand/v2"
	"testing"
)

// TestStateCacheHit: a written checkpoint whose blocks are committed becomes
// a cached state; a lookup of a longer prompt then stops at its block (not
// at the deeper committed blocks), the table allocated from it is seeded
// from it (pinned until Seeded), and the slot is evicted, least recently
// used first, only when unpinned and wanted.
func TestStateCacheHit(t *testing.T) {
	p, _ := NewPool(Config{Blocks: 32, BlockSize: 4, States: 3, PrefixCaching: true})
	toks := make([]int32, 17)
	for i := range toks {
		toks[i] = int32(i + 1)
	}
	var a Table
	if !p.Allocate(&a, nil, 17, 0) || !p.TakeCheckpoint(&a, 8) {
		t.Fatal("allocation or checkpoint refused")
	}
	p.Commit(&a, toks, 17)
	var pre Prefix
	if hit := p.Lookup(&pre, toks, 16); hit != 0 {
		t.Fatalf("hit %d with no cached state", hit)
	}
	p.CacheCheckpoint(&a) // not written: released
	if u := p.Usage(); u.StatesCached != 0 || u.StatesUsed != 1 {
		t.Fatalf("unwritten checkpoint cached: %+v", u)
	}
	p.TakeCheckpoint(&a, 8)
	p.CheckpointWritten(&a)
	p.CacheCheckpoint(&a)
	if slot, _, _ := a.Checkpoint(); slot != -1 || p.Usage().StatesCached != 1 {
		t.Fatalf("checkpoint %d, usage %+v", slot, p.Usage())
	}
	var b Table
	if hit := p.Lookup(&pre, toks, 16); hit != 8 || pre.Blocks() != 2 {
		t.Fatalf("hit %d (%d blocks), want 8: up to the cached state", hit, pre.Blocks())
	}
	if !p.Allocate(&b, &pre, 12, 0) || b.Seed() < 0 || b.Seed() == b.StateSlot() {
		t.Fatalf("seed %d, state %d", b.Seed(), b.StateSlot())
	}
	if err := p.CheckRefs([]*Table{&a, &b}); err != nil {
		t.Fatal(err)
	}
	// Three slots: a's, b's and the pinned cached one. A third table cannot
	// be admitted; once b has read its seed, the cached state gives way.
	var c Table
	if p.CanAllocate(&c, nil, 1, 0) {
		t.Fatal("a pinned cached state was evictable")
	}
	p.Seeded(&b)
	if !p.Allocate(&c, nil, 1, 0) || p.Usage().StatesCached != 0 {
		t.Fatalf("unpinned cached state not evicted for a new table: %+v", p.Usage())
	}
	if hit := p.Lookup(&pre, toks, 16); hit != 0 {
		t.Fatalf("hit %d after its state was evicted", hit)
	}
	if err := p.CheckRefs([]*Table{&a, &b, &c}); err != nil {
		t.Fatal(err)
	}
}

// TestStateCacheDropsWithBlock: evicting the block a cached state ends
// frees the state's slot.
func TestStateCacheDropsWithBlock(t *testing.T) {
	p, _ := NewPool(Config{Blocks: 4, BlockSize: 4, States: 2, PrefixCaching: true})
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	var a Table
	p.Allocate(&a, nil, 9, 0)
	p.TakeCheckpoint(&a, 8)
	p.CheckpointWritten(&a)
	p.Commit(&a, toks, 9)
	p.CacheCheckpoint(&a)
	p.Free(&a)
	if u := p.Usage(); u.StatesCached != 1 || u.Cached != 2 {
		t.Fatalf("%+v", u)
	}
	var b Table
	p.Allocate(&b, nil, 16, 0) // takes every block, evicting both cached ones
	if u := p.Usage(); u.StatesCached != 0 || u.StatesUsed != 1 {
		t.Fatalf("cached state outlived its block: %+v", u)
	}
	if err := p.CheckRefs([]*Table{&b}); err != nil {
		t.Fatal(err)
	}
}

// TestStateCacheRandomized: random allocations from lookups, growths,
// checkpoints (written or not), caching, seeding, forks and frees over few
// slots and blocks; every invariant, slots and pins included, after each.
func TestStateCacheRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 25))
	p, _ := NewPool(Config{Blocks: 64, BlockSize: 4, States: 11, PrefixCaching: true})
	prompts := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23, 24, 25}, {7, 7, 7, 7, 7, 7, 7, 7, 7}}
	tables := make([]Table, 7)
	which := make([]int, len(tables))
	lens := make([]int, len(tables))
	var pre Prefix
	hits, maxCached := 0, 0
	for step := range 20000 {
		i := rng.IntN(len(tables))
		t1 := &tables[i]
		toks := prompts[which[i]]
		switch op := rng.IntN(7); {
		case op == 0 && lens[i] > 0 && (lens[i] == len(toks) || rng.IntN(8) == 0):
			p.CacheCheckpoint(t1) // a finished prompt keeps its checkpoint, as the engine does
			p.Free(t1)
			lens[i] = 0
		case op == 1 && len(t1.Blocks()) == 0 && !t1.hasState():
			which[i] = rng.IntN(len(prompts))
			toks = prompts[which[i]]
			hit := p.Lookup(&pre, toks, len(toks)-1)
			if p.Allocate(t1, &pre, hit+1, 0) {
				lens[i] = hit + 1
				if hit > 0 {
					hits++
				}
			}
		case (op == 2 || op == 0) && lens[i] > 0 && lens[i] < len(toks):
			if p.Allocate(t1, nil, lens[i]+1, 0) {
				lens[i]++
				p.Commit(t1, toks, lens[i])
			}
		case op == 3:
			at := 4 * (1 + rng.IntN(3)) // written once the table has computed past it, as the model does
			if p.TakeCheckpoint(t1, at) && lens[i] >= at && rng.IntN(4) > 0 {
				p.CheckpointWritten(t1)
			}
		case op == 4:
			p.CacheCheckpoint(t1)
		case op == 5:
			p.Seeded(t1)
		case op == 6 && len(t1.Blocks()) == 0 && !t1.hasState():
			j := rng.IntN(len(tables))
			if j != i && lens[j] > 0 {
				if n, ok := p.Fork(t1, &tables[j], lens[j]); ok {
					lens[i], which[i] = n, which[j]
				}
			}
		}
		live := make([]*Table, len(tables))
		for k := range tables {
			live[k] = &tables[k]
		}
		if u := p.Usage(); u.StatesCached > maxCached {
			maxCached = u.StatesCached
		}
		if err := p.CheckRefs(live); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if hits < 20 {
		t.Fatalf("%d lookups hit a cached state (at most %d cached): the test exercised too little", hits, maxCached)
	}
	t.Logf("%d hits, at most %d cached states", hits, maxCached)
}
