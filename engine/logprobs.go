package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
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
	// Rank is the token's 1-based place in its row, by logit (ties share
	// the better place); set for prompt logprobs only, as vLLM reports it.
	Rank int
}

// PromptLogprobs is a request's ask for its prompt's logprobs and where the
// engine puts them. Logprobs holds one entry per prompt token: the first is
// nil (nothing precedes it), entry i is token i's Logprob in the logits of
// position i-1, with TopK (0 to MaxTopLogprobs) alternatives. The engine
// fills it from its loop as the prompt's chunks are computed, and is done
// before it delivers the sequence's first token: read it after receiving a
// token or after Tokens is closed (a sequence that failed mid-prefill
// leaves entries nil).
type PromptLogprobs struct {
	TopK     int
	Logprobs []*Logprob
}

// RowLogitsModel is a Model that, after Forward, can give the logits of any
// rows of that step's batch, not only its LogitRows: what prompt logprobs
// read for every prompt position, in the prefill the request does anyway.
// RowLogits returns [len(rows), VocabSize()] row-major, valid until the
// next call; rows is at most the model's MaxSeqs long. It must not disturb
// the logits Forward returned.
type RowLogitsModel interface {
	RowLogits(rows []int32) ([]float32, error)
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
	if p := req.PromptLogprobs; p != nil && (p.TopK < 0 || p.TopK > MaxTopLogprobs) {
		return fmt.Errorf("%w: prompt logprobs' top %d is not in [0, %d]", ErrInvalidRequest, p.TopK, MaxTopLogprobs)
	}
	return nil
}

// promptLogprobs computes, after the step's forward pass, the prompt
// logprobs of every position of b that a sequence asked for and does not
// have yet (a recompute after preemption finds them there). It runs before
// delivery, so they are complete when the first token goes out.
func (e *Engine) promptLogprobs(plan *scheduler.Plan, b *kernels.Batch) error {
	rows, dsts := e.plRows[:0], e.plDsts[:0]
	for i, it := range plan.Items {
		s := owner(it.Seq)
		pl := s.promptLP
		if pl == nil {
			continue
		}
		prompt := s.req.Prompt
		first := b.Seqs[i].Start
		for pos := it.Start; pos < it.Start+it.N && pos+1 < len(prompt); pos++ {
			if pl.Logprobs[pos+1] == nil {
				rows = append(rows, int32(first+pos-it.Start))
				dsts = append(dsts, plDst{pl: pl, at: pos + 1, tok: prompt[pos+1]})
			}
		}
	}
	e.plRows, e.plDsts = rows, dsts
	if len(rows) == 0 {
		return nil
	}
	m, ok := e.model.(RowLogitsModel)
	if !ok { // validate refused the request; never reached
		return fmt.Errorf("engine: the model gives no prompt logits")
	}
	vocab := e.model.VocabSize()
	chunk := e.sched.Config().MaxSeqs
	for lo := 0; lo < len(rows); lo += chunk {
		hi := min(lo+chunk, len(rows))
		logits, err := m.RowLogits(rows[lo:hi])
		if err != nil {
			return fmt.Errorf("engine: prompt logits: %w", err)
		}
		if len(logits) < (hi-lo)*vocab {
			return fmt.Errorf("engine: prompt logits: model returned %d logits, want %d", len(logits), (hi-lo)*vocab)
		}
		for r, d := range dsts[lo:hi] {
			row := logits[r*vocab : (r+1)*vocab]
			lp := logprobOf(row, d.tok, d.pl.TopK)
			lp.Rank = rankOf(row, d.tok)
			d.pl.Logprobs[d.at] = lp
		}
	}
	return nil
}

// plDst is where a prompt row's Logprob goes.
type plDst struct {
	pl  *PromptLogprobs
	at  int
	tok int32
}

// rankOf is tok's 1-based rank in logits: one more than the ids with a
// higher logit.
func rankOf(logits []float32, tok int32) int {
	r, l := 1, logits[tok]
	for _, v := range logits {
		if v > l {
			r++
		}
	}
	return r
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
