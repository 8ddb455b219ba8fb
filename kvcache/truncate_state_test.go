package kvcache

import "testing"

// TestTruncateStateRollBack: in a state pool whose owner rolls states back
// (SetStateRollBack), Truncate returns a draft's blocks at once while the
// table keeps its state slot and its written checkpoint, and the slots'
// accounting (free + held + cached) holds throughout; turned off again, the
// pool refuses as before, and a pool without slots ignores the setting.
func TestTruncateStateRollBack(t *testing.T) {
	p, err := NewPool(Config{Blocks: 8, BlockSize: 4, States: 3, PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.CanRollBack() {
		t.Fatal("a state pool can roll back before its owner said so")
	}
	p.SetStateRollBack(true)
	if !p.CanRollBack() {
		t.Fatal("CanRollBack false after SetStateRollBack(true)")
	}
	var a Table
	toks := seqTokens(20, 1)
	if !p.Allocate(&a, nil, 9, 0) || !p.TakeCheckpoint(&a, 8) {
		t.Fatal("allocate with a checkpoint")
	}
	p.CheckpointWritten(&a)
	p.Commit(&a, toks, 9)
	slot, ck := a.StateSlot(), a.ckpt
	if !p.Allocate(&a, nil, 9+6, 0) { // 6 drafts: a fourth block
		t.Fatal("grow")
	}
	check(t, p, &a)
	if !p.Truncate(&a, 10) { // one draft kept
		t.Fatal("truncate refused")
	}
	if a.Len() != 3 || a.StateSlot() != slot || a.ckpt != ck || !a.ckptWritten {
		t.Fatalf("after truncate: %d blocks, slot %d (was %d), checkpoint %d (was %d)", a.Len(), a.StateSlot(), slot, a.ckpt, ck)
	}
	check(t, p, &a)
	if u := p.Usage(); u.Used != 3 || u.StatesUsed != 2 || u.StatesTotal != 3 {
		t.Fatalf("usage %+v, want 3 blocks and 2 state slots used", u)
	}
	p.SetStateRollBack(false)
	if p.CanRollBack() || p.Truncate(&a, 1) || a.Len() != 3 {
		t.Fatalf("rolled back after SetStateRollBack(false): %d blocks", a.Len())
	}
	p.Free(&a)
	check(t, p)
	if u := p.Usage(); u.Used != 0 || u.StatesUsed != 0 {
		t.Fatalf("usage %+v after free", u)
	}

	plain := mustPool(t, 4, 4, false)
	plain.SetStateRollBack(true)
	if !plain.CanRollBack() {
		t.Fatal("a pool without slots cannot roll back")
	}
}
