//go:build cudaemu

package engine

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
)

// TestDeviceMaskMatchesHost: the bitsets a Constraint writes, in the layout
// the engine hands it ((VocabSize+31)/32 words), applied on the device by
// the CUDA backend's MaskLogits (on the emulator) and sampled there, give
// every step the token the engine's host path gives (maskJobs.apply, then
// the host sampler) — over a batch of constrained and unconstrained rows at
// a vocabulary that ends mid-word, greedy and at a temperature, each
// constraint committed with the token sampled as the loop does.
func TestDeviceMaskMatchesHost(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const vocab, steps = 2051, 10
	words := (vocab + 31) / 32
	seed := func(v uint64) *uint64 { return &v }
	type row struct {
		sp          SamplingParams
		c           *stepConstraint // nil: unconstrained
		host, draws *sampler
	}
	rows := []row{
		{sp: SamplingParams{}, c: &stepConstraint{mod: 7, salt: 1, vocab: vocab}},
		{sp: SamplingParams{}},
		{sp: SamplingParams{Temperature: 0.8, TopK: 40, Seed: seed(1)}, c: &stepConstraint{mod: 3, salt: 2, vocab: vocab}},
		{sp: SamplingParams{Temperature: 1.1, Seed: seed(2)}, c: &stepConstraint{mod: 501, vocab: vocab}},
		{sp: SamplingParams{Temperature: 1, TopK: 5, Seed: seed(3)}},
		{sp: SamplingParams{Temperature: 0.9, MinP: 0.05, Seed: seed(4)}, c: &stepConstraint{mod: 2, salt: 1, vocab: vocab}},
	}
	for i := range rows {
		rows[i].host, rows[i].draws = newSampler(rows[i].sp), newSampler(rows[i].sp)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for step := range steps {
		logits := make([]float32, len(rows)*vocab)
		for i := range logits {
			logits[i] = float32(r.NormFloat64()) * 3
		}
		// Uploaded before the host masks its copy: the device gets the
		// model's logits and masks them itself.
		lt, err := be.Upload(kernels.HostTensor{Name: "logits", DType: kernels.F32, Shape: []int{len(rows), vocab},
			Data: unsafe.Slice((*byte)(unsafe.Pointer(&logits[0])), 4*len(logits))})
		if err != nil {
			t.Fatal(err)
		}
		masks := make([][]uint32, len(rows))
		params := make([]cuda.SampleParams, len(rows))
		want := make([]int32, len(rows))
		for i := range rows {
			rw := &rows[i]
			l := logits[i*vocab : (i+1)*vocab]
			if rw.c != nil {
				bits := make([]uint32, words)
				if err := rw.c.Mask(bits); err != nil {
					t.Fatal(err)
				}
				s := &Sequence{req: Request{Constraint: rw.c}}
				if err := (&maskJobs{jobs: []maskJob{{s: s, bits: bits}}}).apply(s, l); err != nil {
					t.Fatal(err)
				}
				masks[i] = bits
			}
			want[i] = rw.host.sample(l, nil)
			sp := rw.sp
			params[i] = cuda.SampleParams{Temperature: sp.Temperature, TopK: int32(sp.TopK), TopP: sp.TopP, MinP: sp.MinP}
			if rw.draws.draws() {
				params[i].U = rw.draws.rng.Float64()
			}
		}
		if err := be.MaskLogits(lt, masks); err != nil {
			t.Fatal(err)
		}
		got := make([]int32, len(rows))
		if err := be.Sample(lt, params, got); err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if got[i] != want[i] {
				t.Errorf("step %d row %d (%+v, constrained %v): device token %d, host token %d", step, i, rows[i].sp, rows[i].c != nil, got[i], want[i])
			}
			if c := rows[i].c; c != nil {
				if int(got[i])%c.mod != (c.salt+step)%c.mod {
					t.Errorf("step %d row %d: token %d is not one the constraint allows", step, i, got[i])
				}
				_ = c.Commit(got[i])
			}
		}
	}
}
