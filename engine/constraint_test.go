package engine

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

// stepConstraint allows, at output position k, only the tokens t with
// t%mod == (salt+k)%mod, and records what it was told.
type stepConstraint struct {
	mod, salt, vocab int
	committed        []int32
	busy             atomic.Bool // set while Mask runs: Commit must never see it
	overlap          atomic.Bool
	failAt           int // Mask fails at this output position (0 = never)
}

func (c *stepConstraint) Mask(dst []uint32) error {
	c.busy.Store(true)
	defer c.busy.Store(false)
	k := len(c.committed)
	if c.failAt > 0 && k == c.failAt {
		return errors.New("grammar exhausted")
	}
	for t := range c.vocab {
		if t%c.mod == (c.salt+k)%c.mod {
			dst[t/32] |= 1 << (t % 32)
		}
	}
	return nil
}

func (c *stepConstraint) Commit(tok int32) error {
	if c.busy.Load() {
		c.overlap.Store(true)
	}
	c.committed = append(c.committed, tok)
	return nil
}

// Every sampled token is one the mask computed for its position allowed,
// under greedy and random sampling alike, while unconstrained sequences in
// the same batches are untouched; Commit sees exactly the delivered tokens.
func TestConstraintMasksEveryToken(t *testing.T) {
	const vocab = 70 // not a multiple of 32: the last mask word is partial
	m := newHashModel(vocab, 256, 64, 16)
	e := newTestEngine(t, m, Config{MaxSeqs: 8})
	seed := uint64(7)
	type run struct {
		seq *Sequence
		c   *stepConstraint
	}
	var runs []run
	for i := range 6 {
		var c *stepConstraint
		req := Request{Prompt: prompt(10+i, int32(i), vocab), MaxTokens: 24}
		if i%2 == 0 {
			c = &stepConstraint{mod: 3 + i, salt: i, vocab: vocab}
			req.Constraint = c
		}
		if i%3 == 0 {
			req.Sampling = SamplingParams{Temperature: 1, TopK: 40, RepetitionPenalty: 1.3, Seed: &seed}
		}
		s, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{s, c})
	}
	allowedSomewhere := false
	for i, r := range runs {
		ids, res := collect(t, r.seq, 0)
		if res.Finish != FinishLength || len(ids) != 24 {
			t.Fatalf("seq %d: %v after %d tokens", i, res.Finish, len(ids))
		}
		if r.c == nil {
			for k, id := range ids {
				if id%3 != int32(k)%3 {
					allowedSomewhere = true // an unconstrained sequence leaves the pattern
				}
			}
			continue
		}
		for k, id := range ids {
			if int(id)%r.c.mod != (r.c.salt+k)%r.c.mod {
				t.Errorf("seq %d token %d = %d, outside the mask", i, k, id)
			}
		}
		if !slices.Equal(r.c.committed, ids) {
			t.Errorf("seq %d: committed %v, delivered %v", i, r.c.committed, ids)
		}
		if r.c.overlap.Load() {
			t.Errorf("seq %d: Commit ran while Mask was running", i)
		}
	}
	if !allowedSomewhere {
		t.Error("unconstrained sequences followed a constraint's pattern")
	}
}

// A constraint that fails ends its own sequence with FinishError after the
// tokens it allowed, and no other.
func TestConstraintErrorEndsOnlyItsSequence(t *testing.T) {
	const vocab = 64
	m := newHashModel(vocab, 256, 64, 16)
	e := newTestEngine(t, m, Config{MaxSeqs: 4})
	c := &stepConstraint{mod: 2, vocab: vocab, failAt: 5}
	bad, err := e.Submit(context.Background(), Request{Prompt: prompt(8, 1, vocab), MaxTokens: 20, Constraint: c})
	if err != nil {
		t.Fatal(err)
	}
	good, err := e.Submit(context.Background(), Request{Prompt: prompt(8, 2, vocab), MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	ids, res := collect(t, bad, 0)
	if res.Finish != FinishError || len(ids) != 5 || res.Err == nil {
		t.Fatalf("failing constraint: %v (%v) after %d tokens, want error after 5", res.Finish, res.Err, len(ids))
	}
	if ids, res := collect(t, good, 0); res.Finish != FinishLength || len(ids) != 20 {
		t.Fatalf("neighbour: %v after %d tokens", res.Finish, len(ids))
	}
}
