package cpu

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// rigSeq is one sequence of a deltaRig batch: positions [from, to) in
// slot, the last drafts of them drafts.
type rigSeq struct {
	from, to int
	slot     int32
	drafts   int
	ckAt     int32
	ckSlot   int32
}

// runSeqs runs seqs as one batch, each sequence's rows fed the rig's
// inputs of its positions.
func (r *deltaRig) runSeqs(seqs ...rigSeq) error {
	ch, vd, vh := r.sh.Channels(), r.sh.VHeads*r.sh.HeadDim, r.sh.VHeads
	b := &kernels.Batch{}
	row := 0
	for _, q := range seqs {
		n := q.to - q.from
		copy(r.qkv.(*tensor).f32[row*ch:], r.inQKV[q.from*ch:q.to*ch])
		copy(r.z.(*tensor).f32[row*vd:], r.inZ[q.from*vd:q.to*vd])
		copy(r.beta.(*tensor).f32[row*vh:], r.inBeta[q.from*vh:q.to*vh])
		copy(r.alpha.(*tensor).f32[row*vh:], r.inAlp[q.from*vh:q.to*vh])
		for p := q.from; p < q.to; p++ {
			b.Positions = append(b.Positions, int32(p))
		}
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: row, End: row + n, State: q.slot, Drafts: q.drafts,
			CheckpointAt: q.ckAt, Checkpoint: q.ckSlot})
		row += n
	}
	return r.b.DeltaNet(r.out, r.qkv, r.z, r.beta, r.alpha, r.w, r.sh, r.st, 0, b)
}

// TestDeltaNetRollBack: after a step whose last rows are drafts, RollBack
// with kept drafts leaves the slot bit for bit as a plain run over the
// verified row and those kept drafts leaves it (conv window and delta-rule
// state), for every kept from 0 to all, with a second speculating
// sequence beside it in the batch (its own states, at its own offset) and
// a plain one (left alone), and after a step of several verified rows
// before its drafts. Misuse is refused: a slot without drafts, more
// kept than drafted, a second rollback, drafts filling the whole step, a
// checkpoint past the verified row. On one thread and on three (the
// replay runs head by head in parallel).
func TestDeltaNetRollBack(t *testing.T) {
	for _, threads := range []int{1, 3} {
		testDeltaNetRollBack(t, newDeltaRigOn(t, 24, kernels.DeltaNetShape{KHeads: 2, VHeads: 4, HeadDim: 16, Kernel: 4, Eps: 1e-6}, threads))
	}
}

func testDeltaNetRollBack(t *testing.T, r *deltaRig) {
	st := r.st.(*stateStore)
	// the state after positions [0, n) of a plain run, in slot 3
	want := func(n int) []float32 {
		t.Helper()
		if err := r.runSeqs(rigSeq{from: 0, to: n, slot: 3}); err != nil {
			t.Fatal(err)
		}
		return r.slot(3)
	}
	const drafts = 5
	for kept := 0; kept <= drafts; kept++ {
		// slot 0: 7 prompt rows, then row 7 verified and 5 drafts (8-12);
		// slot 1: 4 rows, then row 4 and 2 drafts; slot 2: a plain decode.
		if err := r.runSeqs(rigSeq{from: 0, to: 7, slot: 0}, rigSeq{from: 0, to: 4, slot: 1}, rigSeq{from: 0, to: 9, slot: 2}); err != nil {
			t.Fatal(err)
		}
		if err := r.runSeqs(rigSeq{from: 9, to: 10, slot: 2}, rigSeq{from: 7, to: 13, slot: 0, drafts: drafts},
			rigSeq{from: 4, to: 7, slot: 1, drafts: 2}); err != nil {
			t.Fatal(err)
		}
		plainAfter := r.slot(2)
		k1 := min(kept, 2)
		if err := st.RollBack(0, kept); err != nil {
			t.Fatal(err)
		}
		if err := st.RollBack(1, k1); err != nil {
			t.Fatal(err)
		}
		got0, got1 := r.slot(0), r.slot(1)
		if w := want(8 + kept); !slices.Equal(got0, w) {
			t.Fatalf("kept %d of %d: the rolled-back state differs from a plain run over %d positions", kept, drafts, 8+kept)
		}
		if w := want(5 + k1); !slices.Equal(got1, w) {
			t.Fatalf("kept %d of 2: the second sequence's state differs from a plain run over %d positions", k1, 5+k1)
		}
		if w := want(10); !slices.Equal(plainAfter, w) {
			t.Fatal("the plain sequence beside the drafts differs from a run alone")
		}
		// Several verified rows before the drafts (5-9, then 10-12 drafts).
		k2 := min(kept, 3)
		if err := r.runSeqs(rigSeq{from: 0, to: 5, slot: 0}); err != nil {
			t.Fatal(err)
		}
		if err := r.runSeqs(rigSeq{from: 5, to: 13, slot: 0, drafts: 3}); err != nil {
			t.Fatal(err)
		}
		if err := st.RollBack(0, k2); err != nil {
			t.Fatal(err)
		}
		got0 = r.slot(0)
		if w := want(10 + k2); !slices.Equal(got0, w) {
			t.Fatalf("5 verified rows, kept %d of 3: the state differs from a plain run over %d positions", k2, 10+k2)
		}
	}

	// Misuse.
	if err := r.runSeqs(rigSeq{from: 0, to: 2, slot: 0}, rigSeq{from: 0, to: 4, slot: 1, drafts: 2}); err != nil {
		t.Fatal(err)
	}
	if err := st.RollBack(0, 0); err == nil {
		t.Error("RollBack of a slot without drafts succeeded")
	}
	if err := st.RollBack(1, 3); err == nil {
		t.Error("RollBack keeping 3 of 2 drafts succeeded")
	}
	if err := st.RollBack(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.RollBack(1, 0); err == nil {
		t.Error("a second RollBack of the same step succeeded")
	}
	if err := r.runSeqs(rigSeq{from: 0, to: 3, slot: 0, drafts: 3}); err == nil {
		t.Error("a step of drafts only was run")
	}
	if err := r.runSeqs(rigSeq{from: 0, to: 3, slot: 0}); err != nil {
		t.Fatal(err)
	}
	// Row 3 is verified, rows 4 and 5 drafts: a checkpoint may keep the
	// state at 4 (after row 3), not at 5 or 6.
	if err := r.runSeqs(rigSeq{from: 3, to: 6, slot: 0, drafts: 2, ckAt: 4, ckSlot: 1}); err != nil {
		t.Fatalf("checkpoint at the verified row: %v", err)
	}
	for _, at := range []int32{5, 6} {
		if err := r.runSeqs(rigSeq{from: 3, to: 6, slot: 0, drafts: 2, ckAt: at, ckSlot: 1}); err == nil {
			t.Errorf("checkpoint at %d, past the verified row, was written", at)
		}
	}
}

// TestDeltaNetRollBackAllocs: once a step of its size has been seen, a
// speculative step and its rollback allocate nothing.
func TestDeltaNetRollBackAllocs(t *testing.T) {
	r := newDeltaRig(t, 8)
	st := r.st.(*stateStore)
	if err := r.runSeqs(rigSeq{from: 0, to: 3, slot: 0}); err != nil {
		t.Fatal(err)
	}
	step := func() {
		if err := r.runSeqs(rigSeq{from: 3, to: 8, slot: 0, drafts: 4}); err != nil {
			t.Fatal(err)
		}
		if err := st.RollBack(0, 1); err != nil {
			t.Fatal(err)
		}
	}
	step()
	b := &kernels.Batch{Positions: []int32{3, 4, 5, 6, 7}, Seqs: []kernels.SeqRows{{Start: 0, End: 5, Drafts: 4}}}
	allocs := testing.AllocsPerRun(20, func() {
		if err := r.b.DeltaNet(r.out, r.qkv, r.z, r.beta, r.alpha, r.w, r.sh, r.st, 0, b); err != nil {
			t.Fatal(err)
		}
		if err := st.RollBack(0, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per speculative step", allocs)
	}
}
