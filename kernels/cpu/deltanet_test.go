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
	return newDeltaRigShape(t, rows, kernels.DeltaNetShape{KHeads: 2, VHeads: 4, HeadDim: 8, Kernel: 4, Eps: 1e-6})
}

func newDeltaRigShape(t testing.TB, rows int, sh kernels.DeltaNetShape) *deltaRig {
	t.Helper()
	return newDeltaRigOn(t, rows, sh, 1)
}

// newDeltaRigOn is newDeltaRigShape on a backend of threads threads.
func newDeltaRigOn(t testing.TB, rows int, sh kernels.DeltaNetShape, threads int) *deltaRig {
	t.Helper()
	r := &deltaRig{b: New(threads), sh: sh, seed: -1}
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

// deltaFormRig prepares one sequence of rows rows for both forms, the
// convolution and norms already applied, so that the two run the same
// recurrence from the same inputs.
func deltaFormRig(t testing.TB, rows, s int) (*deltaRig, *deltaArgs) {
	r := newDeltaRigShape(t, rows, kernels.DeltaNetShape{KHeads: 2, VHeads: 4, HeadDim: s, Kernel: 4, Eps: 1e-6})
	copy(r.qkv.(*tensor).f32, r.inQKV)
	copy(r.z.(*tensor).f32, r.inZ)
	copy(r.beta.(*tensor).f32, r.inBeta)
	copy(r.alpha.(*tensor).f32, r.inAlp)
	b := &kernels.Batch{Seqs: []kernels.SeqRows{{Start: 0, End: rows}}}
	for p := range rows {
		b.Positions = append(b.Positions, int32(p))
	}
	st := r.st.(*stateStore)
	a := &st.args
	if err := a.set(st, r.out, r.qkv, r.z, r.beta, r.alpha, r.w, r.sh, 0, b); err != nil {
		t.Fatal(err)
	}
	for c := range r.sh.Channels() {
		a.convChannel(0, c)
	}
	for row := range rows {
		a.l2normRow(row)
	}
	return r, a
}

// TestDeltaChunkMatchesRecurrence: the chunked form (chunks of 16 and 64,
// a last partial chunk) gives the recurrent form's outputs and final state
// to float32 rounding.
func TestDeltaChunkMatchesRecurrence(t *testing.T) {
	const rows, s = 150, 32
	for _, c := range []int{16, 64} {
		r, a := deltaFormRig(t, rows, s)
		S := r.sh.HeadDim
		var want, got []float32
		var wantM, gotM []float32
		for h := range r.sh.VHeads {
			a.recurHead(0, h)
			want = append(want, r.out.(*tensor).f32[:rows*r.sh.VHeads*S]...)
			wantM = append(wantM, a.ssmSt[h*S*S:(h+1)*S*S]...)
		}
		sc := newDeltaChunkScratch(c, S)
		for h := range r.sh.VHeads {
			m := make([]float32, S*S)
			a.chunkHead(0, h, 0, rows, c, m, sc)
			got = append(got, r.out.(*tensor).f32[:rows*r.sh.VHeads*S]...)
			gotM = append(gotM, m...)
		}
		// Each pass wrote every head's rows; compare the last pass's, head by head.
		n := rows * r.sh.VHeads * S
		if e := relErrF32(got[len(got)-n:], want[len(want)-n:]); e > 2e-5 {
			t.Errorf("chunk %d: outputs differ by %.3g relative", c, e)
		}
		if e := relErrF32(gotM, wantM); e > 2e-5 {
			t.Errorf("chunk %d: final states differ by %.3g relative", c, e)
		}
	}
}

func relErrF32(got, want []float32) float64 {
	var d, w float64
	for i := range want {
		x := float64(got[i]) - float64(want[i])
		d += x * x
		w += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / w)
}

// BenchmarkDeltaNetForms: one value head of Qwen3.5's size (S = 128) over a
// 512-row prompt, the recurrence and the chunked form (chunks of 64).
func BenchmarkDeltaNetForms(b *testing.B) {
	const rows, s = 512, 128
	r, a := deltaFormRig(b, rows, s)
	flops := float64(rows) * 4 * s * s // the recurrence: decay, two dots and an update of S×S per row
	b.Run("recurrent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.recurHead(0, 0)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	sc := newDeltaChunkScratch(64, s)
	m := make([]float32, s*s)
	b.Run("chunked64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(m)
			a.chunkHead(0, 0, 0, rows, 64, m, sc)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "recurrence-GFLOP/s")
	})
	_ = r
}

// TestDeltaRowKernels: the fused row updates (assembly where the CPU has
// it) against the pure-Go ones, lengths with and without a tail of 8.
func TestDeltaRowKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{5, 8, 13, 16, 40, 128} {
		m, k, q := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range m {
			m[i], k[i], q[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		m2 := slices.Clone(m)
		a, b := deltaScaleDot(m, k, 0.9), deltaScaleDotGeneric(m2, k, 0.9)
		c, d := deltaAxpyDot(m, k, q, 0.3), deltaAxpyDotGeneric(m2, k, q, 0.3)
		if math.Abs(float64(a-b)) > 1e-5*float64(n) || math.Abs(float64(c-d)) > 1e-5*float64(n) || relErrF32(m, m2) > 1e-6 {
			t.Fatalf("n=%d: %v %v, %v %v, rows differ by %.3g", n, a, b, c, d, relErrF32(m, m2))
		}
	}
}
