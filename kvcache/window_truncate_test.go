package kvcache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestTruncateWindowTable: a draft of 6 positions past a window table's
// computed tokens crosses two window-block boundaries; once verification
// keeps one of them, Truncate gives both groups' blocks past the kept tokens
// back at once, the window blocks the kept rows read stay, and the table
// then slides on as before.
func TestTruncateWindowTable(t *testing.T) {
	const bs, window = 4, 6
	p, err := NewPool(Config{Blocks: 16, BlockSize: bs, PrefixCaching: true, Window: WindowConfig{Window: window, Blocks: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.CanRollBack() {
		t.Fatal("a window pool says it cannot roll back")
	}
	var a Table
	toks := seqTokens(40, 5)
	if !p.Allocate(&a, nil, 10, 0) {
		t.Fatal("allocate")
	}
	p.Commit(&a, toks, 10) // window blocks 0 released (position 10 reads 5…10), 1 and 2 held
	check(t, p, &a)
	// The decode row at 10 and 6 drafts at 11…16: blocks 2…4 of both groups.
	if !p.Allocate(&a, nil, 17, 0) {
		t.Fatal("grow for the drafts")
	}
	check(t, p, &a)
	wu, _ := p.WindowUsage()
	if wu.Used != 4 {
		t.Fatalf("window group holds %d blocks with the drafts in, want 4 (blocks 1…4)", wu.Used)
	}
	// Verification kept the decode and one draft: 12 tokens computed.
	p.Commit(&a, toks, 11)
	p.Commit(&a, toks, 12)
	if !p.Truncate(&a, 12) {
		t.Fatal("truncate refused")
	}
	check(t, p, &a)
	wb := a.WindowBlocks()
	if a.Len() != 3 || len(wb) != 3 || wb[0] != none || wb[1] == none || wb[2] == none || len(a.win.hashes) != 3 {
		t.Fatalf("after truncate: %d global blocks, window %v, %d window hashes; want 3, [- b b], 3", a.Len(), wb, len(a.win.hashes))
	}
	if wu, _ := p.WindowUsage(); wu.Used != 2 || wu.Free+wu.Cached != wu.Total-2 {
		t.Fatalf("window usage %+v, want 2 used", wu)
	}
	if u := p.Usage(); u.Used != 3 {
		t.Fatalf("global usage %+v, want 3 used", u)
	}
	// Decoding on from the kept tokens slides the window as a sequence
	// that never drafted would.
	for c := 12; c < 30; c++ {
		if !p.Allocate(&a, nil, c+1, 0) {
			t.Fatalf("position %d: allocation failed", c)
		}
		p.Commit(&a, toks, c+1)
		check(t, p, &a)
		if wu, _ := p.WindowUsage(); wu.Used != p.BlocksFor(c+1)-(c+1-window+1)/bs {
			t.Fatalf("after position %d: %d window blocks used", c, wu.Used)
		}
	}
	// Cut under its released blocks (n 0): the accounting stays whole.
	if !p.Truncate(&a, 0) {
		t.Fatal("truncate to 0 refused")
	}
	check(t, p, &a)
	p.Free(&a)
	check(t, p)
	if u, wu := p.Usage(), p.win.pool.Usage(); u.Used != 0 || wu.Used != 0 {
		t.Fatalf("after free: global %+v, window %+v", u, wu)
	}
}

// TestWindowSpeculationRandomized is TestWindowRandomEventsConserveBlocks
// with speculative steps: a decode row and up to 7 drafts are written to
// both stores, every row reading its window, and verification keeps a
// random number of them (the sequence's next tokens are the kept drafts,
// then a token that differs from the next draft); Commit and Truncate then
// leave the verified tokens. Rejected drafts' KV stays in the store until
// overwritten, so a table that kept a rejected block, a window block released
// while a draft row still reads it, or a cache entry made from a draft
// shows up as a row reading another prefix's KV, and the pool's invariants
// (window tables included) are checked after every event.
func TestWindowSpeculationRandomized(t *testing.T) {
	for _, tc := range []struct {
		blocks, winBlocks, bs, window int
		cache                         bool
	}{
		{40, 20, 4, 9, true}, {40, 14, 4, 4, true}, {40, 20, 4, 9, false}, {24, 10, 2, 1, true}, {60, 30, 4, 16, true},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			for seed := range uint64(4) {
				r := rand.New(rand.NewPCG(seed, 11))
				s := newWSim(t, tc.blocks, tc.winBlocks, tc.bs, tc.window, tc.cache)
				var drafts, kept int
				for i := range 3000 {
					op, arg := byte(r.UintN(256)), byte(r.UintN(256))
					var err error
					if op%5 == 4 && len(s.seqs) > 0 {
						var d, k int
						d, k, err = s.speculate(s.seqs[int(arg)%len(s.seqs)], r)
						drafts, kept = drafts+d, kept+k
					} else {
						err = s.apply(op, arg)
					}
					if err != nil {
						t.Fatalf("seed %d event %d: %v", seed, i, err)
					}
					if err := s.p.CheckRefs(s.tables()); err != nil {
						t.Fatalf("seed %d event %d: %v", seed, i, err)
					}
				}
				u := s.endAll(t)
				wu, _ := s.p.WindowUsage()
				if u.Used != 0 || wu.Used != 0 || wu.Free+wu.Cached != wu.Total {
					t.Fatalf("after all ended: global %+v window %+v", u, wu)
				}
				if kept == 0 || kept == drafts {
					t.Fatalf("seed %d: %d drafts, %d kept: the test exercised too little", seed, drafts, kept)
				}
			}
		})
	}
}

// speculate runs one speculative decode step of q (when its known tokens
// are all computed but the newest, as a decoding sequence's are): the
// newest token and up to 7 drafts, of which a random number are verified.
// It returns the drafts carried and kept.
func (s *wsim) speculate(q *simSeq, r *rand.Rand) (drafted, kept int, err error) {
	if q.computed == len(q.tokens) {
		q.tokens = append(q.tokens, int32(r.IntN(4)))
	}
	c := q.computed
	if c != len(q.tokens)-1 {
		return 0, 0, nil // still in its prompt
	}
	k := 1 + r.IntN(7)
	row := append([]int32(nil), q.tokens...)
	for range k {
		row = append(row, int32(r.IntN(4)))
	}
	if !s.p.Allocate(&q.table, nil, c+1+k, 0) {
		return 0, 0, nil // no room: a plain decode instead (drafts never preempt)
	}
	bs, wt, gt := s.p.bs, q.table.WindowBlocks(), q.table.blocks
	for pos := c; pos <= c+k; pos++ {
		id := wt[pos/bs]
		if id < 0 || s.p.win.pool.blocks[id].ref != 1 || s.p.blocks[gt[pos/bs]].ref != 1 {
			return 0, 0, fmt.Errorf("draft step writes position %d into window block %d (or a shared block)", pos, id)
		}
		fp := fingerprint(q.salt, row[:pos+1])
		s.store[s.slot(q, pos)] = fp
		s.wstore[int(id)*bs+pos%bs] = fp
	}
	for pos := c; pos <= c+k; pos++ {
		for rp := max(pos-s.window+1, 0); rp <= pos; rp++ {
			id := wt[rp/bs]
			if id < 0 {
				return 0, 0, fmt.Errorf("draft row %d reads position %d from a released block", pos, rp)
			}
			if got, want := s.wstore[int(id)*bs+rp%bs], fingerprint(q.salt, row[:rp+1]); got != want {
				return 0, 0, fmt.Errorf("draft row %d reads position %d: another prefix's KV", pos, rp)
			}
		}
	}
	n := r.IntN(k + 1)
	next := (row[c+1+min(n, k-1)] + 1 + int32(r.IntN(3))) % 4 // the token sampled after the kept drafts
	if n == k {
		next = int32(r.IntN(4))
	}
	q.tokens = append(append(q.tokens, row[c+1:c+1+n]...), next)
	// As the scheduler: Advance counts the newest token, Accept the kept drafts.
	q.computed = c + 1
	s.p.Commit(&q.table, q.tokens, q.computed)
	q.computed += n
	s.p.Commit(&q.table, q.tokens, q.computed)
	if !s.p.Truncate(&q.table, q.computed) {
		return k, n, fmt.Errorf("truncate refused")
	}
	if len(q.table.blocks) != s.p.BlocksFor(q.computed) || len(q.table.WindowBlocks()) != len(q.table.blocks) {
		return k, n, fmt.Errorf("after keeping %d tokens: %d global, %d window blocks", q.computed, len(q.table.blocks), len(q.table.WindowBlocks()))
	}
	return k, n, nil
}
