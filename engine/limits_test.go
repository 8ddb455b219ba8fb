package engine

import (
	"errors"
	"math"
	"testing"
)

// A MaxTokens near MaxInt once overflowed prompt + MaxTokens into a negative
// length that sized the output channel: makechan panicked in the caller's
// goroutine (a server handler) instead of an error.
func TestSubmitHugeMaxTokens(t *testing.T) {
	m := newHashModel(64, 100, 8, 16) // limit 100
	e := newTestEngine(t, m, Config{})
	p := prompt(10, 1, 64)
	for _, max := range []int{math.MaxInt, math.MaxInt - 5, math.MaxInt32, 91} {
		req := Request{Prompt: p, MaxTokens: max}
		if _, err := e.Submit(bg, req); !errors.Is(err, ErrPromptTooLong) {
			t.Errorf("Submit, MaxTokens %d: %v, want ErrPromptTooLong", max, err)
		}
		resumed := Request{Prompt: p, MaxTokens: max, Resume: []int32{1, 2}}
		if _, err := e.Submit(bg, resumed); !errors.Is(err, ErrPromptTooLong) {
			t.Errorf("Submit with Resume, MaxTokens %d: %v, want ErrPromptTooLong", max, err)
		}
		if _, err := e.SubmitGroup(bg, []Request{req, req}); !errors.Is(err, ErrPromptTooLong) {
			t.Errorf("SubmitGroup, MaxTokens %d: %v, want ErrPromptTooLong", max, err)
		}
	}
	// The bound itself still runs to the end, with the channel sized by it.
	s, err := e.Submit(bg, Request{Prompt: p, MaxTokens: 90})
	if err != nil {
		t.Fatal(err)
	}
	if cap(s.out) != 90 {
		t.Errorf("output channel holds %d, want 90", cap(s.out))
	}
	if r := s.Result(); r.CompletionTokens != 90 || r.Finish != FinishLength {
		t.Errorf("result %+v, want 90 tokens, length", r)
	}
}
