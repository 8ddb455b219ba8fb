package kvcache

import "testing"

// TestSaltPartitionsPrefix: a prompt cached under one salt is a hit for the
// same salt only; neither another salt nor the unsalted cache finds it, and
// the unsalted cache's hashes are what they always were.
func TestSaltPartitionsPrefix(t *testing.T) {
	const bs = 4
	p := mustPool(t, 16, bs, true)
	prompt := seqTokens(10, 100) // 2 full blocks + 2 tokens
	a, b := SaltOf("key-a"), SaltOf("key-b")
	if a == 0 || b == 0 || a == b || SaltOf("") != 0 {
		t.Fatalf("seeds %x %x, empty %x", a, b, SaltOf(""))
	}
	var ta Table
	ta.SetSalt(a)
	var pre Prefix
	p.LookupSalted(&pre, a, prompt, len(prompt)-1)
	if !p.Allocate(&ta, &pre, len(prompt), 0) {
		t.Fatal("allocate failed")
	}
	p.Commit(&ta, prompt, len(prompt))
	check(t, p, &ta)
	for _, tc := range []struct {
		name string
		salt uint64
		want int
	}{
		{"same salt", a, 8},
		{"another salt", b, 0},
		{"unsalted", 0, 0},
	} {
		if got := p.LookupSalted(&pre, tc.salt, prompt, len(prompt)-1); got != tc.want {
			t.Errorf("%s: lookup = %d tokens, want %d", tc.name, got, tc.want)
		}
	}
	// The same prompt unsalted is a chain of its own, under today's hashes.
	var tu Table
	p.Lookup(&pre, prompt, len(prompt)-1)
	p.Allocate(&tu, &pre, len(prompt), 0)
	p.Commit(&tu, prompt, len(prompt))
	check(t, p, &ta, &tu)
	if tu.Blocks()[0] == ta.Blocks()[0] || tu.hashes[0] == ta.hashes[0] {
		t.Fatalf("unsalted table %v shares the salted one's first block %v", tu.Blocks(), ta.Blocks())
	}
	if got, want := tu.hashes[0], BlockHash(0, prompt[:bs]); got != want {
		t.Errorf("unsalted first hash %x, want BlockHash(0, …) %x", got, want)
	}
	if got, want := ta.hashes[0], BlockHash(a, prompt[:bs]); got != want {
		t.Errorf("salted first hash %x, want BlockHash(seed, …) %x", got, want)
	}
	if got := p.Lookup(&pre, prompt, len(prompt)-1); got != 8 {
		t.Errorf("unsalted lookup after its own commit = %d, want 8", got)
	}
	// A salted first block is indexed, and reported, with parent 0.
	p.Indexed(func(_ Group, hash, parent uint64, tokens []int32) {
		if hash == ta.hashes[0] && parent != 0 {
			t.Errorf("salted first block indexed with parent %x", parent)
		}
	})
}

// TestAllocateSharesOnlyItsSalt: a Prefix found under another salt is not
// shared into a table, even when a caller mixes them up; the table gets
// fresh blocks instead.
func TestAllocateSharesOnlyItsSalt(t *testing.T) {
	const bs = 4
	p := mustPool(t, 16, bs, true)
	prompt := seqTokens(9, 1)
	var src Table
	src.SetSalt(SaltOf("a"))
	p.Allocate(&src, nil, len(prompt), 0)
	p.Commit(&src, prompt, len(prompt))
	var pre Prefix
	if got := p.LookupSalted(&pre, SaltOf("a"), prompt, len(prompt)-1); got != 8 {
		t.Fatalf("lookup = %d, want 8", got)
	}
	var dst Table
	dst.SetSalt(SaltOf("b"))
	if !p.Allocate(&dst, &pre, len(prompt), 0) {
		t.Fatal("allocate failed")
	}
	check(t, p, &src, &dst)
	for i, id := range dst.Blocks() {
		if id == src.Blocks()[0] || id == src.Blocks()[1] {
			t.Fatalf("block %d of the other salt's table is shared: %v and %v", i, dst.Blocks(), src.Blocks())
		}
	}
	if s := p.Stats(); s.HitBlocks != 0 {
		t.Errorf("hit blocks %d, want 0", s.HitBlocks)
	}
}

// TestForkRefusesAnotherSalt: a fork shares blocks, so it stays within a
// partition.
func TestForkRefusesAnotherSalt(t *testing.T) {
	p := mustPool(t, 8, 4, true)
	var src, dst Table
	src.SetSalt(SaltOf("a"))
	p.Allocate(&src, nil, 9, 0)
	dst.SetSalt(SaltOf("b"))
	if _, ok := p.Fork(&dst, &src, 8); ok {
		t.Fatal("fork across salts accepted")
	}
	dst.SetSalt(SaltOf("a"))
	if n, ok := p.Fork(&dst, &src, 8); !ok || n != 8 {
		t.Fatalf("fork within a salt: %d, %v", n, ok)
	}
	check(t, p, &src, &dst)
}
