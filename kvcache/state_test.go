package kvcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStateSlotsFollowBlocks: a slot is taken by the first Allocate of an
// empty table and returned by Free; with every slot held an empty table
// cannot allocate even with blocks free; Usage counts the slots.
func TestStateSlotsFollowBlocks(t *testing.T) {
	p, err := NewPool(Config{Blocks: 16, BlockSize: 4, States: 2, PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c Table
	if !p.Allocate(&a, nil, 5, 0) || !p.Allocate(&b, nil, 1, 0) {
		t.Fatal("allocation refused with slots free")
	}
	if a.StateSlot() < 0 || b.StateSlot() < 0 || a.StateSlot() == b.StateSlot() {
		t.Fatalf("slots %d and %d", a.StateSlot(), b.StateSlot())
	}
	if !p.Allocate(&a, nil, 9, 0) || a.StateSlot() != 0 {
		t.Fatalf("growing a table changed its slot to %d", a.StateSlot())
	}
	if p.CanAllocate(&c, nil, 1, 0) || p.Allocate(&c, nil, 1, 0) {
		t.Fatal("a third table allocated with two slots, both held")
	}
	if u := p.Usage(); u.StatesTotal != 2 || u.StatesUsed != 2 || u.Used != 4 {
		t.Fatalf("usage %+v", u)
	}
	p.Free(&a)
	if a.StateSlot() != -1 || p.Usage().StatesUsed != 1 {
		t.Fatalf("after Free: slot %d, usage %+v", a.StateSlot(), p.Usage())
	}
	if !p.Allocate(&c, nil, 1, 0) {
		t.Fatal("freed slot not reused")
	}
	if err := p.CheckRefs([]*Table{&b, &c}); err != nil {
		t.Fatal(err)
	}
	// Prefix caching is off: committed blocks are never found.
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	p.Commit(&c, toks, 1)
	var pre Prefix
	if hit := p.Lookup(&pre, toks, len(toks)); hit != 0 {
		t.Fatalf("hybrid pool found a prefix of %d", hit)
	}
}

// TestStateForkTakesOwnSlot: a fork in a pool with slots gives the child a
// slot of its own; it shares blocks up to the source's checkpoint once
// that is written, none before, and fails with no slot free.
func TestStateForkTakesOwnSlot(t *testing.T) {
	p, _ := NewPool(Config{Blocks: 16, BlockSize: 4, States: 4})
	var src, dst, dst2, third Table
	p.Allocate(&src, nil, 10, 0)
	if p.TakeCheckpoint(&src, 6) || !p.TakeCheckpoint(&src, 8) || p.TakeCheckpoint(&src, 8) {
		t.Fatal("checkpoint at 6 (not a block boundary) or twice taken, or at 8 refused")
	}
	n, ok := p.Fork(&dst, &src, 9)
	if !ok || n != 0 || len(dst.Blocks()) != 0 || dst.StateSlot() < 0 || dst.StateSlot() == src.StateSlot() {
		t.Fatalf("fork before the checkpoint is written: %d shared, ok %v, blocks %v, slots %d/%d", n, ok, dst.Blocks(), dst.StateSlot(), src.StateSlot())
	}
	p.CheckpointWritten(&src)
	if n, ok := p.Fork(&dst2, &src, 9); !ok || n != 8 || !slices.Equal(dst2.Blocks(), src.Blocks()[:2]) {
		t.Fatalf("fork after: %d shared, ok %v, blocks %v of %v", n, ok, dst2.Blocks(), src.Blocks())
	}
	if _, ok := p.Fork(&third, &src, 9); ok {
		t.Fatal("fork with no slot free")
	}
	if err := p.CheckRefs([]*Table{&src, &dst, &dst2}); err != nil {
		t.Fatal(err)
	}
	p.ReleaseCheckpoint(&src)
	if slot, _, _ := src.Checkpoint(); slot != -1 || p.Usage().StatesUsed != 3 {
		t.Fatalf("after ReleaseCheckpoint: slot %d, %+v", slot, p.Usage())
	}
	p.TakeCheckpoint(&src, 4)
	p.Free(&dst)
	p.Free(&dst2)
	p.Free(&src) // with its checkpoint
	if u := p.Usage(); u.StatesUsed != 0 || u.Used != 0 {
		t.Fatalf("after freeing all: %+v", u)
	}
	if err := p.CheckRefs(nil); err != nil {
		t.Fatal(err)
	}
}

// TestStateRandomized runs random allocations, growths, forks and frees on
// a pool with fewer slots than tables and checks every invariant (slots
// included) after each operation.
func TestStateRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 35))
	p, _ := NewPool(Config{Blocks: 24, BlockSize: 4, States: 5})
	tables := make([]Table, 9)
	lens := make([]int, len(tables))
	for step := range 4000 {
		i := rng.IntN(len(tables))
		t1 := &tables[i]
		switch op := rng.IntN(6); {
		case op == 4:
			if p.TakeCheckpoint(t1, 4*(1+rng.IntN(2))) && rng.IntN(2) == 0 {
				p.CheckpointWritten(t1)
			}
		case op == 5:
			p.ReleaseCheckpoint(t1)
		case op == 0 && lens[i] > 0:
			p.Free(t1)
			lens[i] = 0
		case op == 1 && len(t1.Blocks()) == 0 && !t1.hasState():
			j := rng.IntN(len(tables))
			if j != i && len(tables[j].Blocks()) > 0 {
				if _, ok := p.Fork(t1, &tables[j], lens[j]); ok {
					lens[i] = 0
				}
			}
		default:
			n := lens[i] + 1 + rng.IntN(6)
			if p.Allocate(t1, nil, n, 0) {
				lens[i] = n
			}
		}
		live := []*Table{}
		for k := range tables {
			live = append(live, &tables[k])
		}
		if err := p.CheckRefs(live); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
