package engine

import (
	"fmt"
	"math"
	"slices"
)

// MaxTopLogprobs is the most alternatives a token's Logprob may list
// (OpenAI's top_logprobs limit).
const MaxTopLogprobs = 20

// Logprob is a generated token's log probability and, when asked, the most
// likely alternatives at its step. They come from the model's own
// distribution, log_softmax of the logits, before any sampling transform:
// no penalty, temperature, top-k/top-p/min-p cut. A constraint's mask
// (Request.Constraint) is the one thing applied first, as in vLLM's default
// raw_logprobs mode: a token the grammar forbids has probability 0 here.
// Top is most likely first; its ties are broken by the lower id.
type Logprob struct {
	Logprob float32
	Top     []TopLogprob
}

// TopLogprob is one alternative of a token's step.
type TopLogprob struct {
	ID      int32
	Logprob float32
}

// validateLogprobs checks Request.TopLogprobs (ErrInvalidRequest).
func validateLogprobs(req Request) error {
	if req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs {
		return fmt.Errorf("%w: top_logprobs %d is not in [0, %d]", ErrInvalidRequest, req.TopLogprobs, MaxTopLogprobs)
	}
	if req.TopLogprobs > 0 && !req.Logprobs {
		return fmt.Errorf("%w: top_logprobs needs logprobs", ErrInvalidRequest)
	}
	return nil
}

// logprob is the step's Logprob for s, or nil when s did not ask: the cost
// (one pass over the vocabulary for the normalizer, one for the top k) is
// paid only by the sequences that want it. logits is s's row, after the
// constraint mask, before sampling (the sampler leaves it unchanged).
func (s *Sequence) logprob(logits []float32, tok int32) *Logprob {
	if !s.req.Logprobs {
		return nil
	}
	return logprobOf(logits, tok, s.req.TopLogprobs)
}

// logprobOf is tok's Logprob in the row logits with its k best
// alternatives: the host's computation, which the CUDA backend's device
// kernel (kernels/cuda/logprobs.cu, Backend.Logprobs) reproduces for rows
// that stay on the device (devlogprobs_emu_test.go holds them equal).
func logprobOf(logits []float32, tok int32, k int) *Logprob {
	maxL := float32(math.Inf(-1))
	for _, l := range logits {
		maxL = max(maxL, l)
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - maxL))
	}
	logZ := float64(maxL) + math.Log(sum)
	lp := &Logprob{Logprob: float32(float64(logits[tok]) - logZ)}
	if k > 0 {
		lp.Top = topLogprobs(logits, k, logZ)
	}
	return lp
}

// topLogprobs keeps the k largest logits in a small sorted slice: one pass,
// k ≤ 20, no allocation beyond the result.
func topLogprobs(logits []float32, k int, logZ float64) []TopLogprob {
	top := make([]TopLogprob, 0, k+1)
	better := func(a, b TopLogprob) bool { return a.Logprob > b.Logprob || a.Logprob == b.Logprob && a.ID < b.ID }
	for id, l := range logits {
		c := TopLogprob{ID: int32(id), Logprob: l}
		if len(top) == k && !better(c, top[k-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, c, func(e, t TopLogprob) int {
			if better(e, t) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, c)
		if len(top) > k {
			top = top[:k]
		}
	}
	for i := range top {
		top[i].Logprob = float32(float64(top[i].Logprob) - logZ)
	}
	return top
}
