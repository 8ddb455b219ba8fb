package kvcache

import "testing"

// TestTruncateRollsBack: the blocks a speculative step took past the kept
// tokens go straight back to the free list, the kept (and indexed) ones
// stay, and a fork's shared blocks keep their other reference.
func TestTruncateRollsBack(t *testing.T) {
	p := mustPool(t, 16, 4, true)
	var a, b Table
	toks := seqTokens(20, 1)
	if !p.Allocate(&a, nil, 9, 0) {
		t.Fatal("allocate")
	}
	p.Commit(&a, toks, 9) // blocks 0 and 1 indexed
	if _, ok := p.Fork(&b, &a, 8); !ok {
		t.Fatal("fork")
	}
	if !p.Allocate(&a, nil, 9+6, 0) { // a draft of 6 more positions: 4 blocks
		t.Fatal("grow")
	}
	check(t, p, &a, &b)
	if !p.Truncate(&a, 10) {
		t.Fatal("truncate refused")
	}
	if a.Len() != 3 || len(a.hashes) != 2 {
		t.Fatalf("after truncate: %d blocks, %d hashes; want 3, 2", a.Len(), len(a.hashes))
	}
	check(t, p, &a, &b)
	if u := p.Usage(); u.Used != 3 || u.Free+u.Used+u.Cached != u.Total {
		t.Fatalf("usage %+v, want 3 used", u)
	}
	p.Truncate(&a, 0)
	check(t, p, &b)
	p.Free(&b)
	check(t, p)
	if u := p.Usage(); u.Used != 0 || u.Cached != 2 {
		t.Fatalf("usage %+v, want 2 cached blocks and none used", u)
	}
}

// TestTruncateRefusesStateWithoutRollBack: a pool with state slots whose owner
// does not put states back (SetStateRollBack) cannot shrink a table.
func TestTruncateRefusesStateWithoutRollBack(t *testing.T) {
	p, err := NewPool(Config{Blocks: 8, BlockSize: 4, States: 2})
	if err != nil {
		t.Fatal(err)
	}
	var a Table
	if !p.Allocate(&a, nil, 6, 0) || p.CanRollBack() || p.Truncate(&a, 1) || a.Len() != 2 {
		t.Fatalf("a state pool rolled back: %d blocks", a.Len())
	}
}
