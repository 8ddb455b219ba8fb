package scheduler

import "testing"

// Forked children share the parent's prompt blocks, compute only their last
// partial block, read back their own prefix in every slot (the harness's
// fingerprints) and leave the pool whole when they end.
func TestForkSharesPromptBlocks(t *testing.T) {
	for _, tc := range []struct {
		name           string
		prompt         int
		cache          bool
		wantShared     int
		wantFirstChunk int
	}{
		{"partial last block", 11, false, 8, 3}, // 4-token blocks: 8 shared, 3 recomputed
		{"exact blocks", 12, true, 8, 4},        // one token is always left to compute
		{"shorter than a block", 3, false, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxSeqs: 8}, 32, 4, tc.cache)
			parent := h.add(tokens(tc.prompt, 1), 6, 0)
			h.mustStep() // the whole prompt: parent samples its first token
			before := h.s.pool.Usage().Used
			var kids []*Seq
			for range 3 {
				kid := &Seq{Tokens: tokens(tc.prompt, 1)}
				if !h.s.Fork(kid, parent) {
					t.Fatal("Fork refused")
				}
				h.maxLen[kid] = tc.prompt + 6
				if kid.NumComputed() != tc.wantShared || kid.State() != StateRunning {
					t.Fatalf("child: %d computed, state %v; want %d running", kid.NumComputed(), kid.State(), tc.wantShared)
				}
				kids = append(kids, kid)
			}
			if used := h.s.pool.Usage().Used; used != before {
				t.Fatalf("forking took blocks: %d used, was %d", used, before)
			}
			if err := h.s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			p := h.mustStep()
			for _, it := range p.Items {
				if it.Seq != parent && (it.Start != tc.wantShared || it.N != tc.wantFirstChunk || !it.Sample) {
					t.Fatalf("child item %+v, want %d tokens from %d, sampled", it, tc.wantFirstChunk, tc.wantShared)
				}
			}
			h.drain(50)
		})
	}
}

func TestForkRefusals(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 2}, 32, 4, false)
	parent := h.add(tokens(9, 1), 4, 0)
	if h.s.Fork(&Seq{Tokens: tokens(9, 1)}, parent) {
		t.Fatal("forked a waiting parent")
	}
	h.mustStep()
	kid := &Seq{Tokens: tokens(9, 1)}
	if !h.s.Fork(kid, parent) {
		t.Fatal("Fork refused")
	}
	if h.s.Fork(kid, parent) {
		t.Fatal("forked the same child twice")
	}
	if h.s.Fork(&Seq{Tokens: tokens(9, 1)}, parent) {
		t.Fatal("forked past MaxSeqs")
	}
	// A child whose tokens part from the parent's early shares only blocks
	// before the difference.
	h.s.Finish(kid)
	other := &Seq{Tokens: append(tokens(5, 1), 40, 41, 42, 43)}
	if !h.s.Fork(other, parent) || other.NumComputed() != 4 {
		t.Fatalf("diverging child computed %d, want 4", other.NumComputed())
	}
	h.maxLen[other] = 12
	if err := h.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	h.drain(50)
}
