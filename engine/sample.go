package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// defaultPenaltyLastN is the penalty window when SamplingParams.PenaltyLastN is 0.
const defaultPenaltyLastN = 64

// sampler draws one sequence's tokens. It follows llama.cpp's default chain:
// penalties → top-k → top-p → min-p → temperature → draw. Top-p and min-p
// therefore see the distribution at temperature 1, as in llama.cpp.
// Penalties look at the last PenaltyLastN tokens of the whole sequence
// (prompt, resumed and generated tokens), as llama.cpp's do.
//
// Each sequence owns its sampler and PRNG (PCG seeded from the request's
// seed), so a seed reproduces its output whatever else shares the batch.
type sampler struct {
	p      SamplingParams
	rng    *rand.Rand
	cands  []cand // scratch, reused across tokens
	counts map[int32]int32
	// ahead: the next draws' numbers, taken for the device's rows and not
	// yet spent by a delivered token (devsample.go)
	ahead []float64
}

type cand struct {
	id    int32
	logit float32
	p     float64 // probability, once softmax has run
}

func newSampler(p SamplingParams) *sampler {
	seed := rand.Uint64()
	if p.Seed != nil {
		seed = *p.Seed
	}
	if p.PenaltyLastN == 0 {
		p.PenaltyLastN = defaultPenaltyLastN
	}
	return &sampler{p: p, rng: rand.New(rand.NewPCG(seed, seed^0x5eed5eed5eed5eed))}
}

// validateSampling reports an out-of-range parameter (ErrInvalidRequest).
func validateSampling(p SamplingParams) error {
	bad := func(name string, v any) error {
		return fmt.Errorf("%w: sampling %s = %v", ErrInvalidRequest, name, v)
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature", p.Temperature)
	case p.TopK < 0:
		return bad("top_k", p.TopK)
	case !finite(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return bad("top_p", p.TopP)
	case !finite(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return bad("min_p", p.MinP)
	case !finite(p.RepetitionPenalty) || p.RepetitionPenalty < 0:
		return bad("repetition_penalty", p.RepetitionPenalty)
	case !finite(p.PresencePenalty):
		return bad("presence_penalty", p.PresencePenalty)
	case !finite(p.FrequencyPenalty):
		return bad("frequency_penalty", p.FrequencyPenalty)
	case p.PenaltyLastN < -1:
		return bad("penalty_last_n", p.PenaltyLastN)
	}
	return nil
}

func (s *sampler) penalize() bool {
	p := s.p
	return (p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1) || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// draws reports whether sample takes a number from the PRNG: exactly one per
// token at a positive temperature, none when greedy.
func (s *sampler) draws() bool { return s.p.Temperature > 0 }

// resume puts the PRNG where the uninterrupted generation left it after
// sampling n tokens (Request.Resume), so a seeded generation that is cut and
// resumed continues exactly as if it had never stopped.
func (s *sampler) resume(n int) {
	if !s.draws() {
		return
	}
	for range n {
		s.rng.Float64() // draw's one number per token
	}
}

// sample picks the next token from one row of logits; history is every
// token of the sequence so far. logits are not modified.
func (s *sampler) sample(logits []float32, history []int32) int32 {
	if !s.draws() && !s.penalize() {
		return argmax(logits)
	}
	cands := s.candidates(logits, history)
	if !s.draws() {
		best := cands[0]
		for _, c := range cands[1:] {
			if c.logit > best.logit {
				best = c
			}
		}
		return best.id
	}
	return s.draw(s.filter(cands))
}

// candidates copies logits into the scratch list, in id order, penalized.
func (s *sampler) candidates(logits []float32, history []int32) []cand {
	s.cands = slices.Grow(s.cands[:0], len(logits))[:len(logits)]
	for i, l := range logits {
		s.cands[i] = cand{id: int32(i), logit: l}
	}
	if s.penalize() {
		s.applyPenalties(s.cands, history)
	}
	return s.cands
}

// applyPenalties is llama.cpp's penalties sampler: a repeated token's logit
// is divided by the repetition penalty when positive (multiplied when not),
// then lowered by count·frequency + presence. cands is indexed by token id.
func (s *sampler) applyPenalties(cands []cand, history []int32) {
	if n := s.p.PenaltyLastN; n >= 0 && len(history) > n {
		history = history[len(history)-n:]
	}
	if s.counts == nil {
		s.counts = make(map[int32]int32, len(history))
	}
	clear(s.counts)
	for _, t := range history {
		if t >= 0 && int(t) < len(cands) {
			s.counts[t]++
		}
	}
	rep := s.p.RepetitionPenalty
	if rep == 0 {
		rep = 1
	}
	for t, n := range s.counts {
		c := &cands[t]
		if c.logit <= 0 {
			c.logit *= rep
		} else {
			c.logit /= rep
		}
		c.logit -= float32(n)*s.p.FrequencyPenalty + s.p.PresencePenalty
	}
}

// filter applies top-k, top-p, min-p and temperature, and leaves each
// survivor's probability in p. The order of survivors is deterministic, so
// the draw is too. Nothing sorts the whole vocabulary unless top-p needs it.
func (s *sampler) filter(cands []cand) []cand {
	sorted := false
	if k := s.p.TopK; k > 0 && k < len(cands) {
		cands, sorted = topK(cands, k), true
	} else {
		maxToFront(cands)
	}
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		softmax(cands, 1)
		cands = topP(cands, p, sorted)
	}
	if m := s.p.MinP; m > 0 {
		// p_i ≥ m·p_max  ⇔  logit_i ≥ logit_max + ln m; cands[0] is the max and stays.
		min := float64(cands[0].logit) + math.Log(float64(m))
		n := 1
		for _, c := range cands[1:] {
			if float64(c.logit) >= min {
				cands[n] = c
				n++
			}
		}
		cands = cands[:n]
	}
	softmax(cands, s.p.Temperature)
	return cands
}

// topP keeps the smallest run of most likely candidates whose probability
// reaches p (at least one). Unsorted, it sorts only candidates with
// probability ≥ (1-p)/n: the rest hold less than 1-p in total, so the cut
// falls among the sorted ones and in the same place as after a full sort.
func topP(cands []cand, p float64, sorted bool) []cand {
	cut := func(cs []cand) ([]cand, bool) {
		cum := 0.0
		for i := range cs {
			if cum += cs[i].p; cum >= p {
				return cs[:i+1], true
			}
		}
		return cs, false
	}
	if !sorted {
		eps, n := (1-p)/float64(len(cands)), 0
		for i := range cands {
			if cands[i].p >= eps {
				cands[n], cands[i] = cands[i], cands[n]
				n++
			}
		}
		slices.SortFunc(cands[:n], byLogit)
		if out, ok := cut(cands[:n]); ok {
			return out
		}
		slices.SortFunc(cands, byLogit) // rounding left the cut short: sort it all
	}
	out, _ := cut(cands)
	return out
}

// maxToFront swaps the largest logit (the lowest id among equals) to cands[0].
func maxToFront(cands []cand) {
	best := 0
	for i := range cands {
		if cands[i].logit > cands[best].logit {
			best = i
		}
	}
	cands[0], cands[best] = cands[best], cands[0]
}

// draw picks one candidate by its probability.
func (s *sampler) draw(cands []cand) int32 {
	u := s.next()
	cum := 0.0
	for _, c := range cands {
		cum += c.p
		if u < cum {
			return c.id
		}
	}
	return cands[len(cands)-1].id // u within rounding of 1
}

func byLogit(a, b cand) int {
	if c := cmp.Compare(b.logit, a.logit); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// topK moves the k largest candidates to the front, sorted, in O(n log k)
// with a min-heap, and returns them.
func topK(cands []cand, k int) []cand {
	h := cands[:k]
	// worse(a, b): a ranks below b, so the heap root is the weakest kept.
	worse := func(a, b cand) bool { return byLogit(a, b) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			if r := l + 1; r < k && worse(h[r], h[l]) {
				l = r
			}
			if !worse(h[l], h[i]) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, c := range cands[k:] {
		if c.logit >= h[0].logit && worse(h[0], c) {
			h[0] = c
			down(0)
		}
	}
	slices.SortFunc(h, byLogit)
	return h
}

// softmax sets p = softmax(logit/temp) over cands; cands[0] holds the max logit.
func softmax(cands []cand, temp float32) {
	max := float64(cands[0].logit)
	sum := 0.0
	for i := range cands {
		cands[i].p = math.Exp((float64(cands[i].logit) - max) / float64(temp))
		sum += cands[i].p
	}
	for i := range cands {
		cands[i].p /= sum
	}
}

// argmax returns the index of the largest logit, the lowest on ties.
func argmax(logits []float32) int32 {
	best, top := 0, logits[0] // the running max stays in a register
	for i, l := range logits {
		if l > top {
			best, top = i, l
		}
	}
	return int32(best)
}
