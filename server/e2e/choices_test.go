package e2e

import (
	"testing"
	"time"
)

// TestOpenAIPythonChoices runs tests/openai-python/choices.py (the official
// `openai` package, pinned) against the live server on the default model: n=3
// with a seed, whole and streamed, indexes 0..2, usage with the prompt once,
// completions prompt lists with n and echo, n outside 1-16 refused; then a
// stream of three choices cut mid-way, after which every choice has been
// aborted and every KV block is back.
func TestOpenAIPythonChoices(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	before := r.stats().Aborted
	runPython(t, r, python, "choices.py") // ends with waitIdle: no block in use
	// The aborts land as the server sees the connection close; idle (above)
	// can come first when the cut choices were still queued.
	deadline := time.Now().Add(5 * time.Second)
	for r.stats().Aborted-before < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sequences aborted after the cut stream, want its 3 choices", r.stats().Aborted-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := r.waitIdle(t, 5*time.Second); s.KV.Used != 0 {
		t.Fatalf("KV %+v after the cut stream", s.KV)
	}
}
