package engine

import (
	"errors"
	"slices"
	"testing"
)

func firstToken(t *testing.T, s *Sequence) []Token {
	t.Helper()
	var out []Token
	for tok := range s.Tokens() {
		out = append(out, tok)
	}
	return out
}

// TestLogitBias: +100 makes a token win every step, -100 bans the greedy
// one; logprobs still report the unbiased distribution.
func TestLogitBias(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	e := newTestEngine(t, m, Config{})
	p := prompt(20, 1, 64)
	ref := m.reference(p, 4)
	x := (ref[0] + 1) % 64
	got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 4, LogitBias: map[int32]float32{x: 100}}), 0)
	if !slices.Equal(got, []int32{x, x, x, x}) {
		t.Errorf("+100 on %d: %v", x, got)
	}
	banned, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 1, LogitBias: map[int32]float32{ref[0]: -100}}), 0)
	if banned[0] == ref[0] {
		t.Errorf("-100 on %d still chose it", ref[0])
	}
	plain := firstToken(t, submit(t, e, Request{Prompt: p, MaxTokens: 1, Logprobs: true, TopLogprobs: 3}))
	biased := firstToken(t, submit(t, e, Request{Prompt: p, MaxTokens: 1, Logprobs: true, TopLogprobs: 3, LogitBias: map[int32]float32{x: 100}}))
	if !slices.Equal(plain[0].Logprob.Top, biased[0].Logprob.Top) || biased[0].ID != x {
		t.Errorf("logprobs under a bias: %+v, without: %+v", biased[0].Logprob, plain[0].Logprob)
	}
}

// TestMinTokensAndIgnoreEOS: an end-of-generation or stop id cannot end the
// output before MinTokens; with IgnoreEOS an end-of-generation token is
// delivered and generation goes on to MaxTokens, as the reference without
// any stop does.
func TestMinTokensAndIgnoreEOS(t *testing.T) {
	m := newHashModel(64, 1024, 64, 16)
	p := prompt(20, 1, 64)
	ref := m.reference(p, 6)
	e := newTestEngine(t, m, Config{EOG: []int32{ref[0]}})
	if got, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 6}), 0); len(got) != 0 || r.Finish != FinishStop {
		t.Fatalf("the first token is EOG here: got %v %s", got, r.Finish)
	}
	if got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 6, IgnoreEOS: true}), 0); !slices.Equal(got, ref) {
		t.Errorf("ignore_eos: %v, want %v", got, ref)
	}
	got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 6, MinTokens: 3, StopTokens: []int32{ref[1]}}), 0)
	if len(got) < 3 || slices.Contains(got[:3], ref[0]) || slices.Contains(got[:3], ref[1]) {
		t.Errorf("min_tokens 3: %v (EOG %d, stop %d)", got, ref[0], ref[1])
	}
	for _, req := range []Request{
		{Prompt: p, LogitBias: map[int32]float32{64: 1}},
		{Prompt: p, LogitBias: map[int32]float32{1: 101}},
		{Prompt: p, MinTokens: -1},
		{Prompt: p, MaxTokens: 2, MinTokens: 3},
	} {
		if _, err := e.Submit(bg, req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v", req, err)
		}
	}
}
