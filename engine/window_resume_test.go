package engine

import (
	"slices"
	"testing"
)

// TestWindowResume resumes generations on a pool with a window group (a
// reconnecting client hands back the tokens it already has): cut after k
// tokens, past the window, the resumed run gives the uninterrupted run's
// remaining tokens, greedy and seeded sampling alike. While the resumed
// sequence's last window blocks are still cached the resume is a prefix
// hit past the window; after another sequence has cycled the small window
// store (the global group still holds the whole chain) the hit is trimmed
// to what the window group still holds and the rest is recomputed, with
// the same tokens.
func TestWindowResume(t *testing.T) {
	const bs, window, vocab, n = 4, 22, 50, 40
	for _, tc := range []struct {
		name string
		sp   SamplingParams
	}{
		{"greedy", SamplingParams{}},
		{"seeded temperature", SamplingParams{Temperature: 0.9, TopP: 0.95, Seed: seed(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 14 window blocks: one other 60-token sequence evicts them all;
			// 90 global blocks keep every chain.
			m := &windowHashModel{hashModel: newHashModel(vocab, 1024, 90, bs), window: window, wkv: make([]uint64, 14*bs)}
			e := newWindowEngine(t, m, Config{MaxBatchTokens: 16, MaxSeqs: 2})
			p := prompt(30, 9, vocab)
			full, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n, Sampling: tc.sp}), 0)
			if len(full) != n {
				t.Fatalf("uninterrupted run gave %d tokens", len(full))
			}
			if tc.sp.Temperature == 0 && !slices.Equal(full, m.reference(p, n)) {
				t.Fatal("uninterrupted run differs from the cache-free reference")
			}
			resume := func(k int) (hit int) {
				t.Helper()
				s := submit(t, e, Request{Prompt: p, MaxTokens: n, Sampling: tc.sp, Resume: full[:k]})
				rest, r := collect(t, s, k)
				if !slices.Equal(rest, full[k:]) {
					t.Fatalf("resumed after %d tokens: %v\nuninterrupted:         %v", k, rest, full[k:])
				}
				if r.Finish != FinishLength || r.CompletionTokens != n {
					t.Fatalf("resumed after %d tokens: %+v", k, r)
				}
				t.Logf("resumed after %d tokens: %d cached", k, s.sq.CachedTokens())
				return s.sq.CachedTokens() // the loop is done with s: Done was closed after it wrote this
			}
			// Resumed at once: the window blocks at the cut are cached.
			if hit := resume(n - 1); hit <= window {
				t.Errorf("resumed after %d tokens from the cache: a hit of %d, want one past the %d-token window", n-1, hit, window)
			}
			for _, k := range []int{5, 20} {
				resume(k)
			}
			// Another sequence cycles the window store; the global chain stays.
			if _, r := collect(t, submit(t, e, Request{Prompt: prompt(60, 2, vocab), MaxTokens: 4}), 0); r.Finish != FinishLength {
				t.Fatalf("evicting sequence: %+v", r)
			}
			if hit := resume(n - 1); hit > window {
				t.Errorf("resumed after the window store was cycled: a hit of %d tokens, past the window", hit)
			}
			if err := e.Close(bg); err != nil {
				t.Fatal(err)
			}
			if err := e.pool.CheckRefs(nil); err != nil {
				t.Fatal(err)
			}
			wu, _ := e.pool.WindowUsage()
			if u := e.pool.Usage(); u.Used != 0 || wu.Used != 0 {
				t.Fatalf("after the end: global %+v, window %+v", u, wu)
			}
			if e.pool.WindowStats().Evictions == 0 {
				t.Errorf("no window block was evicted: %+v", e.pool.WindowStats())
			}
		})
	}
}
