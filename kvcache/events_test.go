package kvcache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// eventLog rebuilds the index of each block group from the Events stream
// alone, as a router's indexer would, and fails on any event the contract
// forbids.
type eventLog struct {
	logs   [2]groupLog
	window int // the window group's W, as its events give it
	ngroup int // the pool's group count, as its events give it
	stored int
	err    error
}

type groupLog struct {
	live map[uint64]storedBlock
	ever map[uint64]bool // stored at some point: a later child may chain from it
}

type storedBlock struct {
	parent uint64
	tokens []int32
}

func newEventLog() *eventLog {
	l := &eventLog{}
	for i := range l.logs {
		l.logs[i] = groupLog{live: map[uint64]storedBlock{}, ever: map[uint64]bool{}}
	}
	return l
}

// group checks g against what the stream said before and returns its log.
func (l *eventLog) group(g Group) *groupLog {
	switch {
	case l.err != nil:
	case g.Index < 0 || g.Index >= g.Groups || g.Groups > 2 || l.ngroup != 0 && g.Groups != l.ngroup:
		l.err = fmt.Errorf("group %+v after %d groups", g, l.ngroup)
	case g.Index == 0 && g.Window != 0:
		l.err = fmt.Errorf("the global group with a window: %+v", g)
	case g.Index == 1 && (g.Window <= 0 || l.window != 0 && g.Window != l.window):
		l.err = fmt.Errorf("window group %+v after window %d", g, l.window)
	}
	if g.Index == 1 {
		l.window = g.Window
	}
	l.ngroup = g.Groups
	return &l.logs[min(max(g.Index, 0), 1)]
}

func (l *eventLog) BlockStored(g Group, hash, parent uint64, tokens []int32) {
	gl := l.group(g)
	switch {
	case l.err != nil:
	case gl.live[hash].tokens != nil:
		l.err = fmt.Errorf("group %d: block %x stored twice", g.Index, hash)
	case parent != 0 && !gl.ever[parent]:
		l.err = fmt.Errorf("group %d: block %x stored before its parent %x", g.Index, hash, parent)
	case !chainsTo(hash, parent, tokens):
		l.err = fmt.Errorf("block %x: its parent and tokens hash to %x", hash, BlockHash(parent, tokens))
	}
	gl.live[hash] = storedBlock{parent, slices.Clone(tokens)}
	gl.ever[hash] = true
	l.stored++
}

// chainsTo reports whether hash is the block (parent, tokens): a first
// block (parent 0) of any of the sim's partitions hashes from its salt's
// seed, which a consumer that knows the salts can check too.
func chainsTo(hash, parent uint64, tokens []int32) bool {
	if parent != 0 {
		return BlockHash(parent, tokens) == hash
	}
	return slices.ContainsFunc(simSalts, func(salt uint64) bool { return BlockHash(salt, tokens) == hash })
}

func (l *eventLog) BlockRemoved(g Group, hash uint64) {
	gl := l.group(g)
	if _, ok := gl.live[hash]; !ok && l.err == nil {
		l.err = fmt.Errorf("group %d: block %x removed but not stored", g.Index, hash)
	}
	delete(gl.live, hash)
}

// has is what PredictHit asks of the rebuilt index.
func (l *eventLog) has(group int, hash uint64) bool {
	_, ok := l.logs[group].live[hash]
	return ok
}

// matches reports whether the rebuilt indexes are exactly the pool's.
func (l *eventLog) matches(p *Pool) error {
	if l.err != nil {
		return l.err
	}
	var n [2]int
	var err error
	p.Indexed(func(g Group, hash, parent uint64, tokens []int32) {
		n[g.Index]++
		if b, ok := l.logs[g.Index].live[hash]; err == nil && (!ok || b.parent != parent || !slices.Equal(b.tokens, tokens)) {
			err = fmt.Errorf("group %d: indexed block %x (parent %x) not as the events say: %v", g.Index, hash, parent, ok)
		}
	})
	for i, gl := range l.logs {
		if err == nil && n[i] != len(gl.live) {
			err = fmt.Errorf("group %d: pool indexes %d blocks, events leave %d: %x", i, n[i], len(gl.live), slices.Collect(maps.Keys(gl.live)))
		}
	}
	return err
}

// TestEventsRebuildTheIndex drives pools through random admissions, chunked
// prefills, decodes, frees and preemptions that share prefixes and evict, and
// checks after every step that the index rebuilt from the events alone is
// the pool's own: same hashes, parents and tokens.
func TestEventsRebuildTheIndex(t *testing.T) {
	for _, tc := range []struct{ blocks, bs int }{{12, 2}, {40, 4}, {9, 16}} {
		t.Run(fmt.Sprintf("blocks=%d,bs=%d", tc.blocks, tc.bs), func(t *testing.T) {
			for seed := range uint64(4) {
				l := newEventLog()
				s := newSim(t, tc.blocks, tc.bs, true)
				var err error
				if s.p, err = NewPool(Config{Blocks: tc.blocks, BlockSize: tc.bs, PrefixCaching: true, Events: l}); err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(seed, 7))
				for i := range 3000 {
					if err := s.apply(byte(r.UintN(256)), byte(r.UintN(256))); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
					if err := l.matches(s.p); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
				}
				if st := s.p.Stats(); st.Evictions == 0 || st.HitBlocks == 0 || l.stored == 0 {
					t.Errorf("seed %d: %d stored, %+v: the run never shared or evicted", seed, l.stored, st)
				}
			}
		})
	}
}

// TestNoEventsWithoutPrefixCaching: a pool that indexes nothing says
// nothing, in either group.
func TestNoEventsWithoutPrefixCaching(t *testing.T) {
	l := newEventLog()
	p, err := NewPool(Config{Blocks: 4, BlockSize: 2, Events: l, Window: WindowConfig{Window: 3, Blocks: 4}})
	if err != nil {
		t.Fatal(err)
	}
	var tb Table
	toks := []int32{1, 2, 3, 4, 5}
	for range 3 {
		if !p.Allocate(&tb, nil, len(toks), 0) {
			t.Fatal("allocate failed")
		}
		p.Commit(&tb, toks, len(toks))
		p.Free(&tb)
	}
	if l.stored != 0 || l.err != nil {
		t.Fatalf("%d stored, err %v", l.stored, l.err)
	}
}

// TestWindowEventsPredictHits drives pools with a window group through
// random admissions, chunks, decodes, preemptions and aborts that share
// prefixes longer than the window and evict in both groups, and checks
// after every step that a consumer holding only the events predicts, with
// PredictHit, exactly the hit Lookup serves: for every running sequence's
// tokens, a random cut of them, and a fresh prompt.
func TestWindowEventsPredictHits(t *testing.T) {
	for _, tc := range []struct{ blocks, winBlocks, bs, window int }{
		{40, 20, 4, 9}, {40, 12, 4, 4}, {24, 8, 2, 1}, {60, 30, 4, 16}, {40, 14, 4, 6}, {40, 14, 4, 7},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			var probes, trimmed, windowRemoved int
			for seed := range uint64(4) {
				l := newEventLog()
				s := newWSim(t, tc.blocks, tc.winBlocks, tc.bs, tc.window, true)
				var err error
				s.p, err = NewPool(Config{Blocks: tc.blocks, BlockSize: tc.bs, PrefixCaching: true, Events: l,
					Window: WindowConfig{Window: tc.window, Blocks: tc.winBlocks}})
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(seed, 11))
				var pre Prefix
				probe := func(toks []int32) error {
					limit := len(toks) - 1
					got := PredictHit(toks, limit, tc.bs, l.window, l.has)
					if want := s.p.Lookup(&pre, toks, limit); got != want {
						return fmt.Errorf("%d tokens: the events predict a hit of %d, Lookup serves %d", len(toks), got, want)
					}
					probes++
					if PredictHit(toks, limit, tc.bs, 0, l.has) != got {
						trimmed++ // the global group alone would have promised more
					}
					return nil
				}
				for i := range 3000 {
					if err := s.apply(byte(r.UintN(256)), byte(r.UintN(256))); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
					if err := l.matches(s.p); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
					for _, q := range s.seqs {
						if err := probe(q.tokens); err != nil {
							t.Fatalf("seed %d step %d: running sequence of %v", seed, i, err)
						}
						if err := probe(q.tokens[:r.IntN(len(q.tokens))+1]); err != nil {
							t.Fatalf("seed %d step %d: a cut of %v", seed, i, err)
						}
					}
					fresh := append(slices.Clone(s.bases[r.IntN(len(s.bases))]), int32(r.IntN(4)), int32(r.IntN(4)))
					if err := probe(fresh); err != nil {
						t.Fatalf("seed %d step %d: a fresh prompt of %v", seed, i, err)
					}
				}
				if l.window != tc.window || l.ngroup != 2 {
					t.Fatalf("seed %d: the events named window %d of %d groups", seed, l.window, l.ngroup)
				}
				windowRemoved += int(s.p.WindowStats().Evictions)
			}
			// Not blind: some hits were trimmed by the window group (a window
			// of 1 reads no block before its row: nothing to trim), and its
			// evictions were published.
			if tc.window > 1 && trimmed == 0 || windowRemoved == 0 {
				t.Errorf("%d probes, %d trimmed by the window group, %d window evictions: the test exercises too little", probes, trimmed, windowRemoved)
			}
			t.Logf("%d probes, %d trimmed, %d window evictions", probes, trimmed, windowRemoved)
		})
	}
}
