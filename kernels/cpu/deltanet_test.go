package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// deltaRig is one DeltaNet layer with random inputs for rows rows.
type deltaRig struct {
	b                         *Backend
	sh                        kernels.DeltaNetShape
	w                         kernels.DeltaNetWeights
	st                        kernels.StateStore
	qkv, z, beta, alpha, out  kernels.Tensor
	inQKV, inZ, inBeta, inAlp []float32
	seed                      int32 // −1: runs read their own slot
}

func newDeltaRig(t testing.TB, rows int) *deltaRig {
	t.Helper()
	r := &deltaRig{b: New(1), sh: kernels.DeltaNetShape{KHeads: 2, VHeads: 4, HeadDim: 8, Kernel: 4, Eps: 1e-6}, seed: -1}
	t.Cleanup(func() { r.b.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	vec := func(n int, scale, off float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(off + scale*rng.NormFloat64())
		}
		return v
	}
	up := func(v []float32, shape ...int) kernels.Tensor {
		tt, err := r.b.Upload(kernels.HostTensor{DType: kernels.F32, Shape: shape, Data: f32Bytes(v)})
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	sh, ch, vd := r.sh, r.sh.Channels(), r.sh.VHeads*r.sh.HeadDim
	r.w = kernels.DeltaNetWeights{Conv: up(vec(ch*sh.Kernel, 0.5, 0), ch, sh.Kernel), DtBias: up(vec(sh.VHeads, 0.5, 0), sh.VHeads),
		A: up(vec(sh.VHeads, 0.2, -1), sh.VHeads), Norm: up(vec(sh.HeadDim, 0.1, 1), sh.HeadDim)}
	var err error
	if r.st, err = r.b.NewStateStore(kernels.StateConfig{Layers: 1, Slots: 4, Conv: (sh.Kernel - 1) * ch, SSM: sh.VHeads * sh.HeadDim * sh.HeadDim}); err != nil {
		t.Fatal(err)
	}
	alloc := func(cols int) kernels.Tensor { tt, _ := r.b.Alloc(rows, cols); return tt }
	r.qkv, r.z, r.beta, r.alpha, r.out = alloc(ch), alloc(vd), alloc(sh.VHeads), alloc(sh.VHeads), alloc(vd)
	r.inQKV, r.inZ, r.inBeta, r.inAlp = vec(rows*ch, 1, 0), vec(rows*vd, 1, 0), vec(rows*sh.VHeads, 1, 0), vec(rows*sh.VHeads, 1, 0)
	return r
}

// run feeds the rig's rows [from, to) as positions [from, to) of one
// sequence in slot, asking for a checkpoint at ckAt into ckSlot, and
// returns the outputs.
func (r *deltaRig) run(t testing.TB, from, to int, slot, ckSlot, ckAt int32) []float32 {
	t.Helper()
	n, ch, vd, vh := to-from, r.sh.Channels(), r.sh.VHeads*r.sh.HeadDim, r.sh.VHeads
	copy(r.qkv.(*tensor).f32, r.inQKV[from*ch:to*ch])
	copy(r.z.(*tensor).f32, r.inZ[from*vd:to*vd])
	copy(r.beta.(*tensor).f32, r.inBeta[from*vh:to*vh])
	copy(r.alpha.(*tensor).f32, r.inAlp[from*vh:to*vh])
	b := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: n, State: slot, Checkpoint: ckSlot, CheckpointAt: ckAt,
		Seeded: r.seed >= 0, Seed: r.seed}}}
	for p := from; p < to; p++ {
		b.Positions = append(b.Positions, int32(p))
	}
	if err := r.b.DeltaNet(r.out, r.qkv, r.z, r.beta, r.alpha, r.w, r.sh, r.st, 0, b); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(r.out.(*tensor).f32[:n*vd])
}

func (r *deltaRig) slot(i int32) []float32 {
	s := r.st.(*stateStore)
	c := s.cfg
	return append(slices.Clone(s.conv[0][int(i)*c.Conv:int(i+1)*c.Conv]), s.ssm[0][int(i)*c.SSM:int(i+1)*c.SSM]...)
}

// TestDeltaNetCheckpoint: the state kept at position 6 of a 10-row step
// equals the state after a 6-row step, and a sequence resumed from it (in
// another slot, after CopyState) continues exactly as the whole run did;
// steps split anywhere give the same outputs bit for bit.
func TestDeltaNetCheckpoint(t *testing.T) {
	r := newDeltaRig(t, 10)
	whole := r.run(t, 0, 10, 0, 1, 6)
	r.run(t, 0, 6, 2, 0, 0)
	if !slices.Equal(r.slot(1), r.slot(2)) {
		t.Fatal("checkpoint at 6 differs from the state after 6 rows")
	}
	if err := r.b.CopyState(r.st, 3, 1); err != nil {
		t.Fatal(err)
	}
	tail := r.run(t, 6, 10, 3, 0, 0)
	vd := r.sh.VHeads * r.sh.HeadDim
	if !slices.Equal(tail, whole[6*vd:]) {
		t.Fatal("resumed from the checkpoint, rows 6-9 differ from the whole run")
	}
	if !slices.Equal(r.slot(0), r.slot(3)) {
		t.Fatal("final states differ")
	}
	// A checkpoint at the step's end, and one at its start.
	r.run(t, 0, 6, 0, 1, 6)
	if !slices.Equal(r.slot(1), r.slot(2)) {
		t.Fatal("checkpoint at the step's end differs")
	}
	r.run(t, 6, 7, 0, 3, 6)
	if !slices.Equal(r.slot(3), r.slot(2)) {
		t.Fatal("checkpoint at the step's start differs")
	}
	// Seeded from slot 2 (the state at 6), slot 1 continues as the whole run
	// did and slot 2 is left as it was.
	kept := r.slot(2)
	r.seed = 2
	seeded := r.run(t, 6, 10, 1, 0, 0)
	r.seed = -1
	if !slices.Equal(seeded, whole[6*vd:]) || !slices.Equal(r.slot(2), kept) {
		t.Fatal("a run seeded from the state at 6 differs from the whole run, or changed its seed")
	}
}

// TestDeltaNetDecodeAllocs: a decode step's DeltaNet allocates nothing.
func TestDeltaNetDecodeAllocs(t *testing.T) {
	r := newDeltaRig(t, 4)
	r.run(t, 0, 3, 0, 0, 0)
	b := &kernels.Batch{Positions: []int32{3}, Seqs: []kernels.SeqRows{{Start: 0, End: 1}}}
	allocs := testing.AllocsPerRun(20, func() {
		if err := r.b.DeltaNet(r.out, r.qkv, r.z, r.beta, r.alpha, r.w, r.sh, r.st, 0, b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decode step", allocs)
	}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
