package engine

import (
	"fmt"
	"math"
	"slices"
)

// The request controls vLLM and OpenAI clients send besides sampling:
// LogitBias, MinTokens, IgnoreEOS (Request). They change a sequence's logits
// row just before sampling and are undone right after, so the sampler sees
// them while logprobs (logprobs.go) still report the model's own
// distribution.

// MaxLogitBias bounds a LogitBias value, as OpenAI does.
const MaxLogitBias = 100

func (e *Engine) validateControls(req Request) error {
	vocab := int32(e.model.VocabSize())
	for id, b := range req.LogitBias {
		if id < 0 || id >= vocab {
			return fmt.Errorf("%w: logit_bias token id %d outside vocab %d", ErrInvalidRequest, id, vocab)
		}
		if math.IsNaN(float64(b)) || b < -MaxLogitBias || b > MaxLogitBias {
			return fmt.Errorf("%w: logit_bias %v for token %d is not in [-%d, %d]", ErrInvalidRequest, b, id, MaxLogitBias, MaxLogitBias)
		}
	}
	if req.MinTokens < 0 || req.MaxTokens > 0 && req.MinTokens > req.MaxTokens {
		return fmt.Errorf("%w: min_tokens %d (max_tokens %d)", ErrInvalidRequest, req.MinTokens, req.MaxTokens)
	}
	return nil
}

// edit is one logit changed by adjust, to put back.
type edit struct {
	id    int32
	logit float32
}

// adjust applies s's logit bias and, while fewer than MinTokens are out,
// forbids the end-of-generation and stop ids (vLLM's min_tokens). It
// returns what restore needs, in s's scratch (nil when nothing changed).
func (s *Sequence) adjust(logits []float32, eog []int32) []edit {
	r := &s.req
	early := s.emitted < r.MinTokens
	if len(r.LogitBias) == 0 && !early {
		return nil
	}
	undo := s.undo[:0]
	for id, b := range r.LogitBias {
		undo = append(undo, edit{id, logits[id]})
		logits[id] += b
	}
	if early {
		for _, ids := range [][]int32{eog, r.StopTokens} {
			for _, id := range ids {
				if int(id) < len(logits) {
					undo = append(undo, edit{id, logits[id]})
					logits[id] = float32(math.Inf(-1))
				}
			}
		}
	}
	s.undo = undo
	return undo
}

// restore puts back what adjust changed, the latest edit first (an id can
// be both biased and forbidden).
func restore(logits []float32, undo []edit) {
	for _, u := range slices.Backward(undo) {
		logits[u.id] = u.logit
	}
}

// ends reports whether tok ends s: an end-of-generation id (unless
// IgnoreEOS: then it is delivered like any token) or one of its stop ids.
func (s *Sequence) ends(tok int32, eog []int32) bool {
	return !s.req.IgnoreEOS && slices.Contains(eog, tok) || slices.Contains(s.req.StopTokens, tok)
}
