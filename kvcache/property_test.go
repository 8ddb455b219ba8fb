package kvcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sim drives a pool the way a scheduler would and keeps a shadow of the KV
// store: slot → fingerprint of the (salt, token prefix) whose KV was written
// there. A sequence that shares cached blocks must find, in every shared
// slot, the fingerprint of its own prefix under its own salt; otherwise the
// cache served someone else's KV, or another partition's.
type sim struct {
	p     *Pool
	seqs  []*simSeq
	store []uint64
	pre   Prefix
	bases [][]int32 // shared "system prompts"
}

type simSeq struct {
	tokens   []int32
	salt     uint64 // the sequence's cache partition (Table.SetSalt)
	computed int
	table    Table
}

// simSalts are the partitions sequences are drawn from: half unsalted.
var simSalts = []uint64{0, 0, SaltOf("tenant-a"), SaltOf("tenant-b")}

func newSim(t testing.TB, blocks, bs int, cache bool) *sim {
	s := &sim{p: mustPool(t, blocks, bs, cache), store: make([]uint64, blocks*bs)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		base := make([]int32, 3*bs+r.IntN(3*bs))
		for i := range base {
			base[i] = int32(r.IntN(4))
		}
		s.bases = append(s.bases, base)
	}
	return s
}

// fingerprint stands for the KV of tokens' last position in partition salt:
// equal only for the same prefix under the same salt.
func fingerprint(salt uint64, tokens []int32) uint64 {
	h := 7 ^ salt
	for _, t := range tokens {
		h = mix64(h ^ uint64(uint32(t)))
	}
	return h
}

func (s *sim) tables() []*Table {
	ts := make([]*Table, len(s.seqs))
	for i, q := range s.seqs {
		ts[i] = &q.table
	}
	return ts
}

// apply runs one event chosen by op with randomness from arg.
func (s *sim) apply(op, arg byte) error {
	r := rand.New(rand.NewPCG(uint64(op), uint64(arg)))
	switch {
	case op%4 == 0 || len(s.seqs) == 0:
		return s.admit(r, int(arg%3))
	case op%4 == 1 || op%4 == 2:
		return s.compute(s.seqs[int(arg)%len(s.seqs)], 1+int(arg)%(2*s.p.bs))
	default:
		q := s.seqs[int(arg)%len(s.seqs)]
		s.p.Free(&q.table)
		if arg%2 == 0 { // finished or cancelled
			s.seqs = slices.DeleteFunc(s.seqs, func(x *simSeq) bool { return x == q })
			return nil
		}
		q.computed = 0 // preempted: recompute on the next admission
		return s.readmit(q, 0)
	}
}

func (s *sim) admit(r *rand.Rand, reserve int) error {
	return s.readmit(s.newSeq(r, 2*s.p.bs), reserve)
}

// newSeq adds a sequence of up to most random tokens, most often after one
// of the shared bases.
func (s *sim) newSeq(r *rand.Rand, most int) *simSeq {
	var toks []int32
	if r.IntN(4) != 0 {
		toks = append(toks, s.bases[r.IntN(len(s.bases))]...)
	}
	for range 1 + r.IntN(most) {
		toks = append(toks, int32(r.IntN(4)))
	}
	q := &simSeq{tokens: toks, salt: simSalts[r.IntN(len(simSalts))]}
	q.table.SetSalt(q.salt)
	s.seqs = append(s.seqs, q)
	return q
}

// readmit shares q's cached prefix and allocates its first chunk, or drops q
// when it does not fit (as a scheduler would leave it waiting).
func (s *sim) readmit(q *simSeq, reserve int) error {
	n, ok, err := s.share(q, reserve, 2*s.p.bs)
	if !ok || err != nil {
		return err
	}
	return s.compute(q, n)
}

// share looks up q's cached prefix and allocates it and the next chunk
// positions; every shared slot must hold q's own prefix's fingerprint. ok
// is false when q did not fit and was dropped; n is what is left to compute
// of the chunk.
func (s *sim) share(q *simSeq, reserve, chunk int) (n int, ok bool, err error) {
	hit := s.p.LookupSalted(&s.pre, q.salt, q.tokens, len(q.tokens)-1)
	n = min(len(q.tokens)-hit, chunk)
	if !s.p.Allocate(&q.table, &s.pre, hit+n, reserve) {
		s.seqs = slices.DeleteFunc(s.seqs, func(x *simSeq) bool { return x == q })
		return 0, false, nil
	}
	for pos := range hit {
		if got, want := s.store[s.slot(q, pos)], fingerprint(q.salt, q.tokens[:pos+1]); got != want {
			return 0, true, fmt.Errorf("shared global slot for position %d holds another prefix's KV", pos)
		}
	}
	q.computed = hit
	return n, true, nil
}

func (s *sim) slot(q *simSeq, pos int) int {
	return int(q.table.blocks[pos/s.p.bs])*s.p.bs + pos%s.p.bs
}

// compute writes n more positions of q (decoding a new token when q's known
// tokens are all computed), growing its table; a failed allocation preempts q.
func (s *sim) compute(q *simSeq, n int) error {
	n, ok := s.grow(q, n)
	if !ok {
		return nil
	}
	for pos := q.computed; pos < q.computed+n; pos++ {
		if ref := s.p.blocks[q.table.blocks[pos/s.p.bs]].ref; ref != 1 {
			return fmt.Errorf("writing position %d into a block with ref %d", pos, ref)
		}
		s.store[s.slot(q, pos)] = fingerprint(q.salt, q.tokens[:pos+1])
	}
	q.computed += n
	s.p.Commit(&q.table, q.tokens, q.computed)
	return nil
}

// grow readies n more positions of q (one, a new token, when q's known
// tokens are all computed), growing its table; a failed allocation preempts
// q (ok false).
func (s *sim) grow(q *simSeq, n int) (int, bool) {
	if q.computed == len(q.tokens) {
		q.tokens = append(q.tokens, int32(len(q.tokens)%4))
		n = 1
	}
	n = min(n, len(q.tokens)-q.computed)
	if !s.p.Allocate(&q.table, nil, q.computed+n, 0) {
		s.p.Free(&q.table)
		q.computed = 0
		return 0, false
	}
	return n, true
}

// endAll ends every sequence, checks that no block is still referenced, and
// returns the pool's usage then.
func (s *sim) endAll(t *testing.T) Usage {
	t.Helper()
	for _, q := range s.seqs {
		s.p.Free(&q.table)
	}
	if err := s.p.CheckRefs(nil); err != nil {
		t.Fatal(err)
	}
	return s.p.Usage()
}

func runEvents(t *testing.T, s *sim, events []byte) {
	t.Helper()
	runEventsWith(t, s, events, nil)
}

// runEventsWith applies events, (op, arg) byte pairs, to s, checking every
// block's references after each; an op ≥ 192 goes to special when it is set
// and a sequence exists. All blocks are back when every sequence has ended.
func runEventsWith(t *testing.T, s *sim, events []byte, special func(arg byte) error) {
	t.Helper()
	for i := 0; i+1 < len(events); i += 2 {
		op, arg := events[i], events[i+1]
		var err error
		if special != nil && op >= 192 && len(s.seqs) > 0 {
			err = special(arg)
		} else {
			err = s.apply(op, arg)
		}
		if err != nil {
			t.Fatalf("event %d: %v", i/2, err)
		}
		if err := s.p.CheckRefs(s.tables()); err != nil {
			t.Fatalf("event %d (op %d arg %d): %v", i/2, op, arg, err)
		}
	}
	if u := s.endAll(t); u.Used != 0 || u.Free+u.Cached != u.Total {
		t.Fatalf("after all ended: %+v", u)
	}
}

func TestRandomEventsConserveBlocks(t *testing.T) {
	for _, tc := range []struct {
		blocks, bs int
		cache      bool
	}{
		{12, 2, true}, {40, 4, true}, {40, 4, false}, {9, 16, true},
	} {
		t.Run(fmt.Sprintf("blocks=%d,bs=%d,cache=%v", tc.blocks, tc.bs, tc.cache), func(t *testing.T) {
			for seed := range uint64(4) {
				r := rand.New(rand.NewPCG(seed, 99))
				events := make([]byte, 2*3000)
				for i := range events {
					events[i] = byte(r.UintN(256))
				}
				s := newSim(t, tc.blocks, tc.bs, tc.cache)
				runEvents(t, s, events)
				if tc.cache && s.p.Stats().HitBlocks == 0 {
					t.Errorf("seed %d: no prefix hits in 3000 events; the test exercises nothing", seed)
				}
			}
		})
	}
}

func FuzzPool(f *testing.F) {
	f.Add([]byte{0, 1, 1, 5, 0, 2, 3, 0, 2, 7, 3, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 3, 3})
	f.Fuzz(func(t *testing.T, events []byte) {
		runEvents(t, newSim(t, 10, 3, true), events)
	})
}
