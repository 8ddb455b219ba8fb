package kvcache

import (
	"errors"
	"testing"
)

func mustPool(t testing.TB, blocks, bs int, cache bool) *Pool {
	t.Helper()
	p, err := NewPool(Config{Blocks: blocks, BlockSize: bs, PrefixCaching: cache})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func check(t *testing.T, p *Pool, tables ...*Table) {
	t.Helper()
	if err := p.CheckRefs(tables); err != nil {
		t.Fatal(err)
	}
}

func seqTokens(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

func TestNewPoolConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg    Config
		wantBS int
		ok     bool
	}{
		{Config{Blocks: 8}, DefaultBlockSize, true},
		{Config{Blocks: 8, BlockSize: 4}, 4, true},
		{Config{Blocks: 0}, 0, false},
		{Config{Blocks: -1, BlockSize: 4}, 0, false},
		{Config{Blocks: 8, BlockSize: -16}, 0, false},
	} {
		p, err := NewPool(tc.cfg)
		if !tc.ok {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%+v: err=%v, want ErrConfig", tc.cfg, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if p.BlockSize() != tc.wantBS || p.Usage() != (Usage{Total: tc.cfg.Blocks, Free: tc.cfg.Blocks}) {
			t.Errorf("%+v: bs=%d usage=%+v", tc.cfg, p.BlockSize(), p.Usage())
		}
	}
}

func TestAllocateGrowFree(t *testing.T) {
	p := mustPool(t, 4, 4, false)
	var a, b Table
	steps := []struct {
		t       *Table
		n, res  int
		ok      bool
		wantLen int
		used    int
	}{
		{&a, 1, 0, true, 1, 1},  // one block for one token
		{&a, 4, 0, true, 1, 1},  // still fits in the first block
		{&a, 5, 0, true, 2, 2},  // spills into a second
		{&b, 9, 0, false, 0, 2}, // needs 3, only 2 left
		{&b, 8, 1, false, 0, 2}, // fits but would break the reserve
		{&b, 8, 0, true, 2, 4},
		{&a, 9, 0, false, 2, 4}, // pool exhausted: a is unchanged
	}
	for i, s := range steps {
		if got := p.CanAllocate(s.t, nil, s.n, s.res); got != s.ok {
			t.Fatalf("step %d: CanAllocate=%v want %v", i, got, s.ok)
		}
		if got := p.Allocate(s.t, nil, s.n, s.res); got != s.ok {
			t.Fatalf("step %d: Allocate=%v want %v", i, got, s.ok)
		}
		if s.t.Len() != s.wantLen || p.Usage().Used != s.used {
			t.Fatalf("step %d: len=%d used=%d, want %d %d", i, s.t.Len(), p.Usage().Used, s.wantLen, s.used)
		}
		check(t, p, &a, &b)
	}
	p.Free(&a)
	check(t, p, &a, &b)
	p.Free(&b)
	check(t, p)
	if u := p.Usage(); u != (Usage{Total: 4, Free: 4}) {
		t.Fatalf("after free: %+v", u)
	}
}

func TestPrefixSharing(t *testing.T) {
	const bs = 4
	p := mustPool(t, 8, bs, true)
	prompt := seqTokens(10, 100) // 2 full blocks + 2 tokens
	var a Table
	var pre Prefix
	if got := p.Lookup(&pre, prompt, len(prompt)-1); got != 0 {
		t.Fatalf("empty cache lookup = %d", got)
	}
	p.Allocate(&a, &pre, len(prompt), 0)
	p.Commit(&a, prompt, 6) // only block 0 is complete
	if got := p.Lookup(&pre, prompt, len(prompt)); got != 4 {
		t.Fatalf("after partial commit lookup = %d, want 4", got)
	}
	p.Commit(&a, prompt, 10)
	check(t, p, &a)

	// B shares both full blocks while A still runs.
	other := append(append([]int32{}, prompt[:8]...), 7, 7, 7)
	var b Table
	if got := p.Lookup(&pre, other, len(other)-1); got != 8 || pre.Blocks() != 2 {
		t.Fatalf("lookup = %d tokens, %d blocks; want 8, 2", got, pre.Blocks())
	}
	if !p.Allocate(&b, &pre, len(other), 0) {
		t.Fatal("allocate with prefix failed")
	}
	check(t, p, &a, &b)
	if b.Blocks()[0] != a.Blocks()[0] || b.Blocks()[1] != a.Blocks()[1] || b.Blocks()[2] == a.Blocks()[2] {
		t.Fatalf("tables a=%v b=%v: want first two shared", a.Blocks(), b.Blocks())
	}
	if u := p.Usage(); u.Used != 4 {
		t.Fatalf("used = %d, want 4 (2 shared + 1 each)", u.Used)
	}
	p.Free(&a)
	check(t, p, &b)
	p.Free(&b)
	check(t, p)
	// Both full blocks stay cached; the two partial tails are plain free.
	if u := p.Usage(); u != (Usage{Total: 8, Free: 6, Cached: 2}) {
		t.Fatalf("usage %+v", u)
	}
	// The limit caps a hit to whole blocks within it.
	if got := p.Lookup(&pre, prompt, 7); got != 4 {
		t.Fatalf("limit 7 lookup = %d, want 4", got)
	}
	// A cached block taken again leaves the free list (and the cached count).
	var c Table
	p.Lookup(&pre, prompt, 9)
	if !p.CanAllocate(&c, &pre, 10, 5) || p.CanAllocate(&c, &pre, 10, 6) {
		t.Fatal("reserve arithmetic with cached prefix is off")
	}
	p.Allocate(&c, &pre, 10, 0)
	check(t, p, &c)
	if u := p.Usage(); u != (Usage{Total: 8, Free: 5, Used: 3}) {
		t.Fatalf("usage %+v", u)
	}
	if s := p.Stats(); s.HitBlocks != 4 {
		t.Fatalf("hit blocks = %d, want 4", s.HitBlocks)
	}
}

func TestEvictionLRU(t *testing.T) {
	const bs = 2
	p := mustPool(t, 4, bs, true)
	first, second := []int32{1, 2, 3, 4}, []int32{5, 6, 7, 8}
	run := func(toks []int32) {
		var tb Table
		p.Allocate(&tb, nil, len(toks), 0)
		p.Commit(&tb, toks, len(toks))
		p.Free(&tb)
	}
	run(first)
	run(second)
	check(t, p)
	if u := p.Usage(); u.Cached != 4 {
		t.Fatalf("usage %+v", u)
	}
	// One fresh block evicts the least recently freed one: first's tail.
	var x Table
	p.Allocate(&x, nil, 1, 0)
	check(t, p, &x)
	var pre Prefix
	if got := p.Lookup(&pre, first, 4); got != 2 {
		t.Fatalf("first now cached for %d tokens, want 2", got)
	}
	if got := p.Lookup(&pre, second, 4); got != 4 {
		t.Fatalf("second cached for %d tokens, want 4", got)
	}
	if s := p.Stats(); s.Evictions != 1 {
		t.Fatalf("evictions = %d", s.Evictions)
	}
	// Unindexed blocks are reused before any cached one is evicted.
	p.Free(&x)
	p.Allocate(&x, nil, 1, 0)
	if s := p.Stats(); s.Evictions != 1 {
		t.Fatalf("evictions = %d after reusing a plain free block", s.Evictions)
	}
	check(t, p, &x)
}

// TestHashCollisionNeverServes forges a collision by corrupting the stored
// tokens of an indexed block: lookups must miss and commits must stop.
func TestHashCollisionNeverServes(t *testing.T) {
	p := mustPool(t, 8, 2, true)
	toks := []int32{1, 2, 3, 4, 5}
	var a Table
	p.Allocate(&a, nil, 5, 0)
	p.Commit(&a, toks, 2)
	p.toks[int(a.Blocks()[0])*2] = 99 // now block 0 "holds" other tokens under the same hash
	var pre Prefix
	if got := p.Lookup(&pre, toks, 5); got != 0 {
		t.Fatalf("lookup served a colliding block: %d tokens", got)
	}
	var b Table
	p.Allocate(&b, nil, 5, 0)
	p.Commit(&b, toks, 4)
	if !b.uncacheable || len(b.hashes) != 0 {
		t.Fatalf("commit under collision: uncacheable=%v hashes=%d", b.uncacheable, len(b.hashes))
	}
	p.Free(&b)
	check(t, p, &a)
}

func TestNoCachingNoIndex(t *testing.T) {
	p := mustPool(t, 4, 2, false)
	toks := []int32{1, 2, 3, 4}
	var a Table
	p.Allocate(&a, nil, 4, 0)
	p.Commit(&a, toks, 4)
	p.Free(&a)
	var pre Prefix
	if got := p.Lookup(&pre, toks, 4); got != 0 || p.Usage().Cached != 0 {
		t.Fatalf("caching off: lookup=%d usage=%+v", got, p.Usage())
	}
	check(t, p)
}
