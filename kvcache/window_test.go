package kvcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// wsim is sim with a window group: besides the global store it shadows the
// window group's store, and every row it computes reads its window there,
// as SlidingAttention would, so a released block still in a table, a hit
// whose window blocks were gone or another prefix's KV all fail.
type wsim struct {
	*sim
	window int
	wstore []uint64
	chunk  int
	peak   int // most window blocks one table held
}

func newWSim(t testing.TB, blocks, winBlocks, bs, window int, cache bool) *wsim {
	s := newSim(t, blocks, bs, cache)
	p, err := NewPool(Config{Blocks: blocks, BlockSize: bs, PrefixCaching: cache, Window: WindowConfig{Window: window, Blocks: winBlocks}})
	if err != nil {
		t.Fatal(err)
	}
	s.p = p
	return &wsim{sim: s, window: window, wstore: make([]uint64, winBlocks*bs), chunk: 2 * bs}
}

func (s *wsim) apply(op, arg byte) error {
	r := rand.New(rand.NewPCG(uint64(op), uint64(arg)))
	switch {
	case op%4 == 0 || len(s.seqs) == 0:
		return s.readmit(s.newSeq(r, 6*s.p.bs), int(arg%3))
	case op%4 == 1 || op%4 == 2:
		return s.compute(s.seqs[int(arg)%len(s.seqs)], 1+int(arg)%s.chunk)
	default:
		q := s.seqs[int(arg)%len(s.seqs)]
		s.p.Free(&q.table)
		if arg%2 == 0 { // finished or aborted
			s.seqs = slices.DeleteFunc(s.seqs, func(x *simSeq) bool { return x == q })
			return nil
		}
		q.computed = 0 // preempted
		return s.readmit(q, 0)
	}
}

func (s *wsim) readmit(q *simSeq, reserve int) error {
	n, ok, err := s.share(q, reserve, s.chunk)
	if !ok || err != nil {
		return err
	}
	return s.compute(q, n)
}

// compute writes n more positions of q in both groups; each row then reads
// its window from the window store.
func (s *wsim) compute(q *simSeq, n int) error {
	n, ok := s.grow(q, n)
	if !ok {
		return nil
	}
	bs, wt := s.p.bs, q.table.WindowBlocks()
	for pos := q.computed; pos < q.computed+n; pos++ {
		id := wt[pos/bs]
		if id < 0 || s.p.win.pool.blocks[id].ref != 1 {
			return fmt.Errorf("writing window position %d into block %d", pos, id)
		}
		fp := fingerprint(q.salt, q.tokens[:pos+1])
		s.store[s.slot(q, pos)] = fp
		s.wstore[int(id)*bs+pos%bs] = fp
	}
	for pos := q.computed; pos < q.computed+n; pos++ {
		for r := max(pos-s.window+1, 0); r <= pos; r++ {
			id := wt[r/bs]
			if id < 0 {
				return fmt.Errorf("row %d reads position %d from a released block", pos, r)
			}
			if got, want := s.wstore[int(id)*bs+r%bs], fingerprint(q.salt, q.tokens[:r+1]); got != want {
				return fmt.Errorf("row %d reads position %d: another prefix's KV", pos, r)
			}
		}
	}
	live := 0
	for _, id := range wt {
		if id >= 0 {
			live++
		}
	}
	s.peak = max(s.peak, live)
	q.computed += n
	s.p.Commit(&q.table, q.tokens, q.computed)
	return nil
}

func TestWindowRandomEventsConserveBlocks(t *testing.T) {
	for _, tc := range []struct {
		blocks, winBlocks, bs, window int
		cache                         bool
	}{
		{40, 20, 4, 9, true}, {40, 12, 4, 4, true}, {40, 20, 4, 9, false}, {24, 8, 2, 1, true}, {60, 30, 4, 16, true},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			for seed := range uint64(4) {
				r := rand.New(rand.NewPCG(seed, 7))
				s := newWSim(t, tc.blocks, tc.winBlocks, tc.bs, tc.window, tc.cache)
				for i := range 3000 {
					if err := s.apply(byte(r.UintN(256)), byte(r.UintN(256))); err != nil {
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
				// A table never holds more window blocks than its window and one chunk span.
				if bound := s.p.BlocksFor(tc.window-1+s.chunk) + 1; s.peak > bound {
					t.Errorf("seed %d: a window table held %d blocks, bound %d", seed, s.peak, bound)
				}
				// A window of 1 reads only the row's own position: a hit shares no window block.
				if tc.cache && (s.p.Stats().HitBlocks == 0 || tc.window > 1 && s.p.WindowStats().HitBlocks == 0) {
					t.Errorf("seed %d: no prefix hits in both groups (%d, %d): the test exercises nothing",
						seed, s.p.Stats().HitBlocks, s.p.WindowStats().HitBlocks)
				}
			}
		})
	}
}

// TestWindowReleasesAndBoundsMemory runs one long sequence and counts both
// groups' blocks through the pool's own accounting.
func TestWindowReleasesAndBoundsMemory(t *testing.T) {
	const bs, window, n = 4, 10, 400
	p, err := NewPool(Config{Blocks: n/bs + 1, BlockSize: bs, PrefixCaching: true, Window: WindowConfig{Window: window, Blocks: 8}})
	if err != nil {
		t.Fatal(err)
	}
	var tb Table
	toks := seqTokens(n, 3)
	for c := 0; c < n; c++ {
		if !p.Allocate(&tb, nil, c+1, 0) {
			t.Fatalf("position %d: allocation failed", c)
		}
		p.Commit(&tb, toks, c+1)
		check(t, p, &tb)
		wu, _ := p.WindowUsage()
		// Next row at c+1 reads from c+1-window+1: the blocks from there to c.
		if want := p.BlocksFor(c+1) - max(c+1-window+1, 0)/bs; wu.Used != want {
			t.Fatalf("after position %d: %d window blocks used, want %d", c, wu.Used, want)
		}
	}
	if u := p.Usage(); u.Used != n/bs {
		t.Fatalf("global group: %d used, want %d", u.Used, n/bs)
	}
	// The same prefix again: the global chain is all there, the window group
	// holds only the last blocks, so the hit is the whole sequence.
	var pre Prefix
	if hit := p.Lookup(&pre, toks, n); hit != n {
		t.Fatalf("hit %d tokens, want %d", hit, n)
	}
	p.Free(&tb)
	check(t, p)
	// A prefix that ends where the window blocks were released cannot be
	// resumed: its window would read freed KV. Evict nothing, look up the
	// first half: the global chain covers it, the window group does not.
	if hit := p.Lookup(&pre, toks[:n/2+1], n/2); hit != 0 {
		t.Fatalf("half prefix hit %d tokens with its window blocks released", hit)
	}
	if _, err := NewPool(Config{Blocks: 4, Window: WindowConfig{Window: 8}}); err == nil {
		t.Fatal("a window group of 0 blocks was accepted")
	}
}
