package kvcache

import "testing"

func TestForkSharesFullBlocksOnly(t *testing.T) {
	for _, tc := range []struct {
		name            string
		n, wantShared   int
		wantSharedBlock int
	}{
		{"partial last block", 10, 8, 2}, // blocks of 4: 2 full, the third holds 2 tokens
		{"exact blocks", 12, 12, 3},
		{"under one block", 3, 0, 0},
		{"beyond the table", 40, 12, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPool(t, 8, 4, true)
			var src, dst Table
			toks := seqTokens(12, 1)
			if !p.Allocate(&src, nil, 12, 0) {
				t.Fatal("allocate")
			}
			p.Commit(&src, toks, 12)
			before := p.Usage()
			shared, ok := p.Fork(&dst, &src, tc.n)
			if !ok || shared != tc.wantShared || dst.Len() != tc.wantSharedBlock {
				t.Fatalf("Fork = %d,%v with %d blocks, want %d shared in %d blocks", shared, ok, dst.Len(), tc.wantShared, tc.wantSharedBlock)
			}
			if u := p.Usage(); u != before {
				t.Fatalf("Fork changed usage: %+v, was %+v", u, before)
			}
			check(t, p, &src, &dst)
			for i, id := range dst.Blocks() {
				if id != src.Blocks()[i] || p.blocks[id].ref != 2 {
					t.Fatalf("dst block %d = %d (ref %d), want src's %d with ref 2", i, id, p.blocks[id].ref, src.Blocks()[i])
				}
			}
			// The child's own tail: a fresh block, never one src writes.
			if !p.Allocate(&dst, nil, shared+1, 0) {
				t.Fatal("allocate child tail")
			}
			tail := dst.Blocks()[dst.Len()-1]
			for _, id := range src.Blocks() {
				if id == tail {
					t.Fatalf("child's tail block %d is one of src's", tail)
				}
			}
			check(t, p, &src, &dst)
			p.Free(&src)
			check(t, p, &dst)
			p.Free(&dst)
			check(t, p)
			if u := p.Usage(); u.Used != 0 {
				t.Fatalf("after both freed: %+v", u)
			}
		})
	}
}

func TestForkRefusesNonEmptyTable(t *testing.T) {
	p := mustPool(t, 8, 4, false)
	var src, dst Table
	p.Allocate(&src, nil, 8, 0)
	p.Allocate(&dst, nil, 4, 0)
	if _, ok := p.Fork(&dst, &src, 8); ok {
		t.Fatal("Fork into a table holding blocks succeeded")
	}
	if _, ok := p.Fork(&src, &src, 8); ok {
		t.Fatal("Fork of a table into itself succeeded")
	}
	check(t, p, &src, &dst)
}

// A child of a child shares the grandparent's blocks: three references, and
// each Free drops exactly one.
func TestForkChain(t *testing.T) {
	p := mustPool(t, 8, 4, true)
	var a, b, c Table
	toks := seqTokens(8, 3)
	p.Allocate(&a, nil, 8, 0)
	p.Commit(&a, toks, 8)
	p.Fork(&b, &a, 8)
	p.Fork(&c, &b, 8)
	check(t, p, &a, &b, &c)
	if r := p.blocks[a.Blocks()[0]].ref; r != 3 {
		t.Fatalf("ref %d, want 3", r)
	}
	if len(c.hashes) != 2 {
		t.Fatalf("grandchild inherited %d hashes, want 2", len(c.hashes))
	}
	p.Free(&b)
	check(t, p, &a, &c)
	p.Free(&a)
	check(t, p, &c)
	p.Free(&c)
	check(t, p)
	if u := p.Usage(); u.Used != 0 || u.Cached != 2 {
		t.Fatalf("after all freed: %+v, want the 2 committed blocks cached", u)
	}
}
