package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLogprobMatchesLogSoftmax checks a step's Logprob against log_softmax
// computed in float64 directly: the sampled token's value and the top k,
// most likely first, ties by the lower id.
func TestLogprobMatchesLogSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 4)
	}
	logits[7], logits[9] = 30, 30     // a tie at the top: 7 comes first
	logits[3] = float32(math.Inf(-1)) // masked by a constraint
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l))
	}
	want := func(id int) float64 { return float64(logits[id]) - math.Log(z) }
	s := &Sequence{req: Request{Logprobs: true, TopLogprobs: 20}}
	lp := s.logprob(logits, 42)
	if math.Abs(float64(lp.Logprob)-want(42)) > 1e-4 {
		t.Errorf("sampled: %v, want %v", lp.Logprob, want(42))
	}
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		if logits[a] > logits[b] {
			return -1
		} else if logits[a] < logits[b] {
			return 1
		}
		return 0
	})
	if len(lp.Top) != 20 {
		t.Fatalf("%d alternatives, want 20", len(lp.Top))
	}
	for i, c := range lp.Top {
		if int(c.ID) != ids[i] || math.Abs(float64(c.Logprob)-want(ids[i])) > 1e-4 {
			t.Errorf("top[%d] = %+v, want id %d logprob %v", i, c, ids[i], want(ids[i]))
		}
	}
	if got := s.logprob(logits, 3).Logprob; !math.IsInf(float64(got), -1) {
		t.Errorf("a masked token has logprob %v, want -Inf", got)
	}
	if (&Sequence{}).logprob(logits, 42) != nil {
		t.Error("a sequence that did not ask got logprobs")
	}
}

// TestTokensCarryLogprobs: through the engine, only a sequence that asks
// gets them; a greedy token is its step's most likely one; top_logprobs is
// bounded and needs logprobs.
func TestTokensCarryLogprobs(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{})
	p := prompt(20, 1, 64)
	asked := submit(t, e, Request{Prompt: p, MaxTokens: 8, Logprobs: true, TopLogprobs: 3})
	plain := submit(t, e, Request{Prompt: p, MaxTokens: 8})
	n := 0
	for tok := range asked.Tokens() {
		n++
		lp := tok.Logprob
		if lp == nil || len(lp.Top) != 3 || lp.Top[0].ID != tok.ID || lp.Top[0].Logprob != lp.Logprob ||
			lp.Logprob > 0 || lp.Top[1].Logprob > lp.Top[0].Logprob || lp.Top[2].Logprob > lp.Top[1].Logprob {
			t.Errorf("token %d (%d): %+v", tok.Index, tok.ID, lp)
		}
	}
	for tok := range plain.Tokens() {
		if tok.Logprob != nil {
			t.Errorf("unasked token %d has %+v", tok.Index, tok.Logprob)
		}
	}
	if n != 8 {
		t.Errorf("%d tokens", n)
	}
	for _, req := range []Request{
		{Prompt: p, Logprobs: true, TopLogprobs: MaxTopLogprobs + 1},
		{Prompt: p, Logprobs: true, TopLogprobs: -1},
		{Prompt: p, TopLogprobs: 2},
	} {
		if _, err := e.Submit(bg, req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v", req, err)
		}
	}
}
