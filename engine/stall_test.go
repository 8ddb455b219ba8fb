package engine

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// Sequence.Steps, which the server's stall clock reads: odd inside every
// step that includes the sequence (seen from the forward pass), even after
// it, and untouched by steps that do not include it (b waits in the queue
// while a runs: one running slot).
func TestSequenceSteps(t *testing.T) {
	m := newHashModel(64, 4096, 64, 16)
	e := newTestEngine(t, m, Config{MaxBatchTokens: 16, MaxSeqs: 1, DisablePrefixCache: true})
	var a, b *Sequence
	ready := make(chan struct{})
	var seen [][2]uint64 // a's and b's counts during each forward pass
	m.onForward = func(*kernels.Batch) error {
		<-ready
		seen = append(seen, [2]uint64{a.Steps(), b.Steps()})
		return nil
	}
	a = submit(t, e, Request{Prompt: prompt(32, 1, 64), MaxTokens: 3}) // 2 prompt chunks, 2 decodes
	b = submit(t, e, Request{Prompt: prompt(16, 2, 64), MaxTokens: 1}) // 1 step
	close(ready)
	collect(t, a, 0)
	collect(t, b, 0)
	if err := e.Close(bg); err != nil { // the loop's last additions happen before it exits
		t.Fatal(err)
	}
	want := [][2]uint64{{1, 0}, {3, 0}, {5, 0}, {7, 0}, {8, 1}}
	if !slices.Equal(seen, want) {
		t.Errorf("Steps during each forward pass (a, b) = %v, want %v", seen, want)
	}
	if a.Steps() != 8 || b.Steps() != 2 {
		t.Errorf("Steps after the end = %d, %d, want 8, 2", a.Steps(), b.Steps())
	}
}
