//go:build cudaemu

package engine

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
)

// TestDeviceSamplerMatchesHost runs the CUDA backend's device sampler (on
// the emulator) beside this package's host sampler: for the same seed,
// settings and history, every token the device decides is the token the
// host sampler picks, over whole generations (the draw u comes from a
// second sampler seeded alike, one number per token at a positive
// temperature, as the host's own draw). Rows the device leaves Undecided
// (top-p without top-k) are the host's to sample.
func TestDeviceSamplerMatchesHost(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const vocab, steps = 2048, 12
	seed := func(v uint64) *uint64 { return &v }
	cases := []SamplingParams{
		{},
		{RepetitionPenalty: 1.2, FrequencyPenalty: 0.3},
		{Temperature: 0.8, Seed: seed(1)},
		{Temperature: 1.1, TopK: 40, Seed: seed(2)},
		{Temperature: 0.7, TopK: 50, TopP: 0.9, MinP: 0.05, Seed: seed(3)},
		{Temperature: 1, MinP: 0.1, Seed: seed(4)},
		{Temperature: 0.9, TopK: 20, RepetitionPenalty: 1.3, PresencePenalty: 0.4, FrequencyPenalty: 0.2, PenaltyLastN: 8, Seed: seed(5)},
		{Temperature: 1.2, RepetitionPenalty: 0.8, PenaltyLastN: -1, Seed: seed(6)},
		{Temperature: 1, TopP: 0.8, Seed: seed(7)}, // undecided on the device
	}
	r := rand.New(rand.NewPCG(11, 12))
	decided := 0
	for ci, sp := range cases {
		host, draws := newSampler(sp), newSampler(sp)
		history := []int32{1, 2, 3, 2, 1}
		for step := range steps {
			logits := make([]float32, vocab)
			for i := range logits {
				logits[i] = float32(r.NormFloat64()) * 3
			}
			for _, tok := range history[max(0, len(history)-4):] { // make penalties matter
				logits[tok] += 4
			}
			want := host.sample(logits, history)
			dp := cuda.SampleParams{Temperature: sp.Temperature, TopK: int32(sp.TopK), TopP: sp.TopP, MinP: sp.MinP,
				RepetitionPenalty: sp.RepetitionPenalty, PresencePenalty: sp.PresencePenalty, FrequencyPenalty: sp.FrequencyPenalty}
			if draws.penalize() {
				dp.Penalized = history
				if n := draws.p.PenaltyLastN; n >= 0 && len(history) > n {
					dp.Penalized = history[len(history)-n:]
				}
			}
			if draws.draws() {
				dp.U = draws.rng.Float64()
			}
			lt, err := be.Upload(kernels.HostTensor{Name: "logits", DType: kernels.F32, Shape: []int{1, vocab},
				Data: unsafe.Slice((*byte)(unsafe.Pointer(&logits[0])), 4*vocab)})
			if err != nil {
				t.Fatal(err)
			}
			got := []int32{0}
			if err := be.Sample(lt, []cuda.SampleParams{dp}, got); err != nil {
				t.Fatal(err)
			}
			switch {
			case got[0] == cuda.Undecided:
			case got[0] != want:
				t.Errorf("case %d (%+v) step %d: device token %d, host token %d", ci, sp, step, got[0], want)
			default:
				decided++
			}
			history = append(history, want)
		}
	}
	if want := (len(cases) - 1) * steps; decided != want {
		t.Errorf("the device decided %d tokens, want %d (all but the top-p-only case's)", decided, want)
	}
}
