package kvcache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// eventLog rebuilds the index from the Events stream alone, as a router's
// indexer would, and fails on any event the contract forbids.
type eventLog struct {
	live   map[uint64]storedBlock
	ever   map[uint64]bool // stored at some point: a later child may chain from it
	stored int
	err    error
}

type storedBlock struct {
	parent uint64
	tokens []int32
}

func (l *eventLog) BlockStored(hash, parent uint64, tokens []int32) {
	switch {
	case l.err != nil:
	case l.live[hash].tokens != nil:
		l.err = fmt.Errorf("block %x stored twice", hash)
	case parent != 0 && !l.ever[parent]:
		l.err = fmt.Errorf("block %x stored before its parent %x", hash, parent)
	case BlockHash(parent, tokens) != hash:
		l.err = fmt.Errorf("block %x: its parent and tokens hash to %x", hash, BlockHash(parent, tokens))
	}
	l.live[hash] = storedBlock{parent, slices.Clone(tokens)}
	l.ever[hash] = true
	l.stored++
}

func (l *eventLog) BlockRemoved(hash uint64) {
	if _, ok := l.live[hash]; !ok && l.err == nil {
		l.err = fmt.Errorf("block %x removed but not stored", hash)
	}
	delete(l.live, hash)
}

// matches reports whether the rebuilt index is exactly the pool's.
func (l *eventLog) matches(p *Pool) error {
	if l.err != nil {
		return l.err
	}
	n := 0
	var err error
	p.Indexed(func(hash, parent uint64, tokens []int32) {
		n++
		if b, ok := l.live[hash]; err == nil && (!ok || b.parent != parent || !slices.Equal(b.tokens, tokens)) {
			err = fmt.Errorf("indexed block %x (parent %x) not as the events say: %v", hash, parent, ok)
		}
	})
	if err == nil && n != len(l.live) {
		err = fmt.Errorf("pool indexes %d blocks, events leave %d: %x", n, len(l.live), slices.Collect(maps.Keys(l.live)))
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
				l := &eventLog{live: map[uint64]storedBlock{}, ever: map[uint64]bool{}}
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

// TestNoEventsWithoutPrefixCaching: a pool that indexes nothing says nothing.
func TestNoEventsWithoutPrefixCaching(t *testing.T) {
	l := &eventLog{live: map[uint64]storedBlock{}, ever: map[uint64]bool{}}
	p, err := NewPool(Config{Blocks: 4, BlockSize: 2, Events: l})
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
