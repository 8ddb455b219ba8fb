package stream

import (
	"slices"

	"github.com/sluicehq/sluice/engine"
)

// The reasoning budget, enforced where the tokens are chosen: once the
// reasoning has taken its budget of tokens (its opening marker included),
// the constraint allows only the closing marker's tokens, one by one, so
// the model is made to close its reasoning and answer. The reasoning then
// takes at most the budget plus the closing marker. A request under a
// grammar (structured outputs, a forced tool call) has no reasoning to
// budget: the grammar holds the whole reply.

type budget struct {
	open, close []int32
	limit       int
	inside      bool
	n           int     // tokens of the reasoning so far
	forced      int     // closing tokens forced so far
	done        bool    // the reasoning is closed
	tail        []int32 // the last committed tokens, to spot the markers
}

// reasoningBudget is g's budget constraint on b, after the resumed tokens
// (nil when there is no budget to keep).
func (b *Backend) reasoningBudget(g *GenRequest, resume []int32) engine.Constraint {
	mk := b.Reasoning
	if !mk.On() || g.Reasoning.Off || g.Reasoning.Budget <= 0 || !g.Chat {
		return nil
	}
	open, err1 := b.Tokenizer.Encode(mk.Open, false)
	close, err2 := b.Tokenizer.Encode(mk.Close, false)
	if err1 != nil || err2 != nil || len(open) == 0 || len(close) == 0 {
		return nil
	}
	c := &budget{open: open, close: close, limit: g.Reasoning.Budget, inside: g.reasoningOpened}
	for _, id := range resume {
		_ = c.Commit(id)
	}
	return c
}

// Mask allows every token, or only the next closing token past the budget.
func (c *budget) Mask(dst []uint32) error {
	if c.inside && !c.done && c.n >= c.limit {
		id := c.close[c.forced]
		if int(id)/32 < len(dst) {
			dst[id/32] |= 1 << (uint(id) % 32)
			return nil
		}
	}
	for i := range dst {
		dst[i] = ^uint32(0)
	}
	return nil
}

// Commit follows the reasoning's markers and counts its tokens.
func (c *budget) Commit(tok int32) error {
	if c.done {
		return nil
	}
	c.tail = append(c.tail, tok)
	if n := max(len(c.open), len(c.close)); len(c.tail) > n {
		c.tail = c.tail[len(c.tail)-n:]
	}
	if !c.inside {
		if hasSuffix(c.tail, c.open) {
			c.inside, c.n = true, len(c.open)
		}
		return nil
	}
	c.n++
	if c.n > c.limit && c.forced < len(c.close) && tok == c.close[c.forced] {
		c.forced++
	}
	if c.forced == len(c.close) || hasSuffix(c.tail, c.close) {
		c.done = true
	}
	return nil
}

func hasSuffix(s, suffix []int32) bool {
	return len(s) >= len(suffix) && slices.Equal(s[len(s)-len(suffix):], suffix)
}
