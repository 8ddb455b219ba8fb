package engine

import (
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
)

// hostOnly sends to the host exactly the controls the device sampler lacks,
// and min_tokens with logprobs only until that many tokens are out.
func TestHostOnly(t *testing.T) {
	const vocab = 5000
	for _, tc := range []struct {
		name    string
		req     Request
		emitted int
		host    bool
	}{
		{"greedy", Request{}, 0, false},
		{"seeded top-k top-p min-p", Request{Sampling: SamplingParams{Temperature: 1, TopK: 40, TopP: 0.9, MinP: 0.05}}, 0, false},
		{"penalties", Request{Sampling: SamplingParams{Temperature: 1, RepetitionPenalty: 1.2, PresencePenalty: 0.5, FrequencyPenalty: 0.5}}, 0, false},
		{"logprobs", Request{Logprobs: true, TopLogprobs: 20}, 0, false},
		{"ignore_eos", Request{IgnoreEOS: true}, 0, false},
		{"top-p greedy", Request{Sampling: SamplingParams{TopP: 0.5}}, 0, false},
		{"top-k 1024", Request{Sampling: SamplingParams{Temperature: 1, TopK: 1024}}, 0, false},
		{"logit_bias", Request{LogitBias: map[int32]float32{3: 1}}, 0, false},
		{"logit_bias with logprobs and min_tokens", Request{LogitBias: map[int32]float32{3: 1}, Logprobs: true, MinTokens: 2}, 2, false},
		{"min_tokens early", Request{MinTokens: 3}, 2, false},
		{"min_tokens early with logprobs", Request{MinTokens: 3, Logprobs: true}, 2, true},
		{"min_tokens reached with logprobs", Request{MinTokens: 3, Logprobs: true}, 3, false},
		{"top-p alone", Request{Sampling: SamplingParams{Temperature: 1, TopP: 0.5}}, 0, true},
		{"top-p, top-k off by size", Request{Sampling: SamplingParams{Temperature: 1, TopP: 0.5, TopK: vocab}}, 0, true},
		{"top-k 1025", Request{Sampling: SamplingParams{Temperature: 1, TopK: 1025}}, 0, true},
	} {
		s := &Sequence{req: tc.req, emitted: tc.emitted}
		if got := hostOnly(s, vocab); got != tc.host {
			t.Errorf("%s: hostOnly %v, want %v", tc.name, got, tc.host)
		}
	}
}

// The CPU backend has no DeviceSampler: an engine on a real model there
// keeps the host path, and a model that is not a DeviceModel does too.
func TestNoDeviceSamplerOnCPU(t *testing.T) {
	src, err := models.Open(tinyModelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	be := cpu.New(1)
	defer be.Close()
	m, err := models.Load(src, be, models.Options{KVBlocks: 8, BlockSize: 16, MaxBatchTokens: 32, MaxSeqs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var _ DeviceModel = m
	if m.DeviceSampler() != nil || kernels.SamplerOf(be) != nil {
		t.Fatal("the CPU backend offers a device sampler")
	}
	if newDeviceSampling(m) != nil || newDeviceSampling(newHashModel(64, 1024, 8, 16)) != nil {
		t.Fatal("device sampling without a device sampler")
	}
	e, err := New(m, Config{Blocks: 8, BlockSize: 16, MaxSeqs: 2, MaxBatchTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(bg)
	if st := e.Stats(); st.DeviceToHost || st.DeviceToHostBytes != 0 {
		t.Errorf("CPU engine's Stats report device-to-host copies: %v, %d bytes", st.DeviceToHost, st.DeviceToHostBytes)
	}
}
