package kvcache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// fork adds a child of a random sequence q that has KV for some tokens: the
// child's tokens are q's computed ones followed by new ones (another choice's
// continuation), its table a Fork of q's. Every shared slot must hold the
// child's own prefix, and compute's check that a written block has ref 1
// proves the copy-on-write: no sequence writes into a block another reads.
func (s *sim) fork(arg byte) (shared int, err error) {
	q := s.seqs[int(arg)%len(s.seqs)]
	if q.computed == 0 {
		return 0, nil
	}
	child := &simSeq{tokens: append([]int32(nil), q.tokens[:q.computed]...), salt: q.salt}
	child.table.SetSalt(q.salt)
	for range 1 + int(arg)%3 {
		child.tokens = append(child.tokens, int32(arg%4))
	}
	// As the scheduler does: only q's computed tokens, and one token left
	// to compute, for its logits.
	shared, ok := s.p.Fork(&child.table, &q.table, min(q.computed, len(child.tokens)-1))
	if !ok {
		return 0, fmt.Errorf("fork into a fresh table refused")
	}
	if shared%s.p.bs != 0 || shared > q.computed {
		return 0, fmt.Errorf("fork shared %d tokens of %d computed (block size %d)", shared, q.computed, s.p.bs)
	}
	s.seqs = append(s.seqs, child)
	for pos := range shared {
		if got, want := s.store[s.slot(child, pos)], fingerprint(child.salt, child.tokens[:pos+1]); got != want {
			return 0, fmt.Errorf("forked slot for position %d holds another prefix's KV", pos)
		}
	}
	child.computed = shared
	return shared, s.compute(child, len(child.tokens)-shared)
}

// runForkEvents is runEvents with forks among the events: op ≥ 192 forks.
func runForkEvents(t *testing.T, s *sim, events []byte) (sharingForks int) {
	t.Helper()
	runEventsWith(t, s, events, func(arg byte) error {
		shared, err := s.fork(arg)
		if shared > 0 {
			sharingForks++
		}
		return err
	})
	return sharingForks
}

// Random admissions, computes, preemptions, aborts and forks conserve
// blocks: free+used+cached = total, every block's reference count equals the
// tables holding it (so none is freed twice or leaked), and all are back
// when every sequence has ended.
func TestRandomForksConserveBlocks(t *testing.T) {
	for _, tc := range []struct {
		blocks, bs int
		cache      bool
	}{
		{12, 2, true}, {40, 4, true}, {40, 4, false}, {24, 16, true},
	} {
		t.Run(fmt.Sprintf("blocks=%d,bs=%d,cache=%v", tc.blocks, tc.bs, tc.cache), func(t *testing.T) {
			for seed := range uint64(4) {
				r := rand.New(rand.NewPCG(seed, 7))
				events := make([]byte, 2*3000)
				for i := range events {
					events[i] = byte(r.UintN(256))
				}
				s := newSim(t, tc.blocks, tc.bs, tc.cache)
				if n := runForkEvents(t, s, events); n < 10 {
					t.Fatalf("seed %d: %d forks shared a block; the test exercises too little", seed, n)
				}
			}
		})
	}
}

func FuzzPoolForks(f *testing.F) {
	f.Add([]byte{0, 1, 1, 5, 200, 2, 3, 0, 250, 7, 3, 1})
	f.Fuzz(func(t *testing.T, events []byte) {
		runForkEvents(t, newSim(t, 10, 3, true), events)
	})
}

// wfork is fork with a window group: the child's rows must read their whole
// window, in shared blocks and their own (wsim.compute checks every read).
// A refused fork must be one whose window blocks src has released.
func (s *wsim) wfork(arg byte) (shared int, refused bool, err error) {
	q := s.seqs[int(arg)%len(s.seqs)]
	if q.computed == 0 {
		return 0, false, nil
	}
	child := &simSeq{tokens: append([]int32(nil), q.tokens[:q.computed]...), salt: q.salt}
	child.table.SetSalt(q.salt)
	for range 1 + int(arg)%3 {
		child.tokens = append(child.tokens, int32(arg%4))
	}
	n := min(q.computed, len(child.tokens)-1)
	shared, ok := s.p.Fork(&child.table, &q.table, n)
	if !ok {
		if first := max(n/s.p.bs*s.p.bs-s.window+1, 0) / s.p.bs; n/s.p.bs > 0 && first >= q.table.win.lo {
			return 0, true, fmt.Errorf("fork refused with every window block the child reads still held")
		}
		return 0, true, nil
	}
	s.seqs = append(s.seqs, child)
	child.computed = shared
	return shared, false, s.compute(child, len(child.tokens)-shared)
}

func TestWindowRandomForksConserveBlocks(t *testing.T) {
	for _, tc := range []struct {
		blocks, winBlocks, bs, window int
		cache                         bool
	}{
		{40, 20, 4, 9, true}, {40, 20, 4, 9, false}, {60, 30, 4, 16, true}, {40, 40, 4, 64, true},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			sharing, refused := 0, 0
			for seed := range uint64(4) {
				r := rand.New(rand.NewPCG(seed, 11))
				s := newWSim(t, tc.blocks, tc.winBlocks, tc.bs, tc.window, tc.cache)
				for i := range 3000 {
					op, arg := byte(r.UintN(256)), byte(r.UintN(256))
					var err error
					if op >= 192 && len(s.seqs) > 0 {
						n, no, ferr := s.wfork(arg)
						sharing, refused, err = sharing+min(n, 1), refused+map[bool]int{true: 1}[no], ferr
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
				for _, q := range s.seqs {
					s.p.Free(&q.table)
				}
				wu, _ := s.p.WindowUsage()
				if err := s.p.CheckRefs(nil); err != nil || s.p.Usage().Used != 0 || wu.Used != 0 {
					t.Fatalf("after all ended: %v, global %+v window %+v", err, s.p.Usage(), wu)
				}
			}
			if sharing < 10 {
				t.Fatalf("%d forks shared a block (%d refused); the test exercises too little", sharing, refused)
			}
			t.Logf("%d sharing forks, %d refused for released window blocks", sharing, refused)
		})
	}
}
