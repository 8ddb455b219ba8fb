package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

var bg = context.Background()

func submit(t testing.TB, e *Engine, req Request) *Sequence {
	t.Helper()
	s, err := e.Submit(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Greedy output equals the cache-free reference whatever the chunking,
// block size or prefix caching.
func TestGreedyMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name                string
		cfg                 Config
		blocks, bs, plen, n int
	}{
		{"whole prompt in one step", Config{}, 64, 16, 37, 40},
		{"chunks of 5, blocks of 4", Config{MaxBatchTokens: 5}, 64, 4, 50, 20},
		{"no prefix cache", Config{DisablePrefixCache: true}, 64, 8, 30, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newHashModel(64, 1024, tc.blocks, tc.bs)
			e := newTestEngine(t, m, tc.cfg)
			p := prompt(tc.plen, 1, 64)
			got, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: tc.n}), 0)
			if want := m.reference(p, tc.n); !slices.Equal(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			if r != (Result{Finish: FinishLength, PromptTokens: tc.plen, CompletionTokens: tc.n}) {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

// runConcurrent submits each prompt once the previous one has produced its
// first token (staggered arrivals, joining a running batch) and returns the
// outputs.
func runConcurrent(t *testing.T, e *Engine, prompts [][]int32, n int) [][]int32 {
	t.Helper()
	seqs := make([]*Sequence, len(prompts))
	first := make([]int32, len(prompts))
	for i, p := range prompts {
		seqs[i] = submit(t, e, Request{Prompt: p, MaxTokens: n})
		tok, ok := <-seqs[i].Tokens()
		if !ok {
			t.Fatalf("seq %d ended before its first token: %+v", i, seqs[i].Result())
		}
		first[i] = tok.ID
	}
	out := make([][]int32, len(prompts))
	for i, s := range seqs {
		rest, r := collect(t, s, 1)
		if r.Finish != FinishLength {
			t.Fatalf("seq %d: %+v", i, r)
		}
		out[i] = append([]int32{first[i]}, rest...)
	}
	return out
}

// runAtOnce holds the loop inside its first step (install sets the model's
// pre-Forward hook) until every prompt is submitted, so they all compete for
// the pool whatever the timing, then returns the outputs.
func runAtOnce(t *testing.T, e *Engine, install func(func(*kernels.Batch) error), prompts [][]int32, n int) [][]int32 {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	install(func(*kernels.Batch) error {
		if first {
			first = false
			held <- struct{}{}
			<-release
		}
		return nil
	})
	seqs := []*Sequence{submit(t, e, Request{Prompt: prompts[0], MaxTokens: n})}
	<-held
	for _, p := range prompts[1:] {
		seqs = append(seqs, submit(t, e, Request{Prompt: p, MaxTokens: n}))
	}
	close(release)
	out := make([][]int32, len(prompts))
	for i, s := range seqs {
		var r Result
		if out[i], r = collect(t, s, 0); r.Finish != FinishLength {
			t.Fatalf("seq %d: %+v", i, r)
		}
	}
	return out
}

// Batch invariance: each of 16 prompts gives the same greedy output alone
// and inside a batch with staggered arrivals. The model is exact (integer
// hashing), so the tolerance is zero: any difference is a paging bug.
func TestBatchInvariance(t *testing.T) {
	m := newHashModel(64, 1024, 256, 16)
	e := newTestEngine(t, m, Config{MaxBatchTokens: 64, MaxSeqs: 16})
	prompts := vocabPrompts(16, 64)
	const n = 24
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		alone[i], _ = collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
		if want := m.reference(p, n); !slices.Equal(alone[i], want) {
			t.Fatalf("prompt %d alone: %v, reference %v", i, alone[i], want)
		}
	}
	together := runConcurrent(t, e, prompts, n)
	for i := range prompts {
		if !slices.Equal(together[i], alone[i]) {
			t.Fatalf("prompt %d: batched %v, alone %v", i, together[i], alone[i])
		}
	}
}

// With a pool far too small for 16 sequences, preemption by recompute still
// gives every sequence its solo greedy output.
func TestPreemptionKeepsOutputs(t *testing.T) {
	for _, cache := range []bool{true, false} {
		t.Run(fmt.Sprintf("prefix-cache=%v", cache), func(t *testing.T) {
			m := newHashModel(64, 1024, 14, 8)
			e := newTestEngine(t, m, Config{MaxBatchTokens: 32, MaxSeqs: 16, DisablePrefixCache: !cache})
			prompts := vocabPrompts(16, 64)[:10] // up to 50 + 24 tokens: 10 blocks each, 14 in the pool
			got := runAtOnce(t, e, func(h func(*kernels.Batch) error) { m.onForward = h }, prompts, 24)
			for i, p := range prompts {
				if want := m.reference(p, 24); !slices.Equal(got[i], want) {
					t.Fatalf("prompt %d: %v, reference %v", i, got[i], want)
				}
			}
			if err := e.Close(bg); err != nil { // its last snapshot is final
				t.Fatal(err)
			}
			if st := e.Stats(); st.Preemptions == 0 || st.KV.Used != 0 {
				t.Fatalf("stats %+v: want preemptions and no block in use", st)
			}
		})
	}
}

// A second request with the same 500-token system prompt computes only its
// new tokens, and its output is unchanged.
func TestPrefixCacheSkipsSharedPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 2048, 128, 16)
		e := newTestEngine(t, m, Config{MaxBatchTokens: 1024})
		system := prompt(500, 9, 64)
		p1 := append(slices.Clone(system), 1, 2, 3)
		p2 := append(slices.Clone(system), 4, 5, 6, 7)
		out1, r1 := collect(t, submit(t, e, Request{Prompt: p1, MaxTokens: 8}), 0)
		synctest.Wait() // the loop is idle: its last snapshot is published
		before := e.Stats()
		out2, r2 := collect(t, submit(t, e, Request{Prompt: p2, MaxTokens: 8}), 0)
		synctest.Wait()
		after := e.Stats()
		const shared = 500 / 16 * 16 // whole blocks: 496
		if r1.CachedTokens != 0 || r2.CachedTokens != shared {
			t.Fatalf("cached tokens %d then %d, want 0 then %d", r1.CachedTokens, r2.CachedTokens, shared)
		}
		if got := after.PromptTokens - before.PromptTokens; got != int64(len(p2)-shared) {
			t.Fatalf("second request prefilled %d tokens, want %d", got, len(p2)-shared)
		}
		if got := after.PrefixHitTokens - before.PrefixHitTokens; got != shared {
			t.Fatalf("prefix hit tokens %d, want %d", got, shared)
		}
		if !slices.Equal(out1, m.reference(p1, 8)) || !slices.Equal(out2, m.reference(p2, 8)) {
			t.Fatal("output changed with the prefix cache")
		}
	})
}

// The engine passes MaxPrefillTokensWithDecodes to its scheduler: while two
// sequences decode, a long prompt is fed in chunks of at most the cap; on an
// idle engine a prompt gets the whole batch budget.
func TestPrefillCapWhileDecoding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newHashModel(64, 1024, 256, 16)
		// A step takes (fake) time, so the decoders are still decoding when
		// the long prompt arrives rather than done in a blink.
		m.onForward = func(*kernels.Batch) error { time.Sleep(time.Millisecond); return nil }
		rec := &stepTimes{}
		rec.reset()
		e := newTestEngine(t, m, Config{MaxBatchTokens: 256, MaxPrefillTokensWithDecodes: 8, MaxSeqs: 8, Observer: rec})
		alone := submit(t, e, Request{Prompt: prompt(300, 1, 64), MaxTokens: 1})
		alone.Result() // its first step's OnStep has run: the loop calls it before the next step
		rec.mu.Lock()
		if rec.count[256] != 1 {
			t.Fatalf("idle engine: steps by rows %v, want one of the whole budget (256)", rec.count)
		}
		rec.mu.Unlock()
		var decoders []*Sequence
		for i := range 2 {
			decoders = append(decoders, submit(t, e, Request{Prompt: prompt(4, int32(2+i), 64), MaxTokens: 500}))
		}
		for _, s := range decoders {
			<-s.Tokens()
		}
		rec.reset()
		long := submit(t, e, Request{Prompt: prompt(100, 9, 64), MaxTokens: 1})
		if r := long.Result(); r.Finish != FinishLength {
			t.Fatalf("long prompt: %+v", r)
		}
		for _, s := range decoders { // their aborts land after the long prompt's last OnStep
			s.Abort(CauseStopString)
			if r := s.Result(); r.Cause != CauseStopString {
				t.Fatalf("a decoder ended before the long prompt was in: %+v", r)
			}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		mixed := 0
		for rows, n := range rec.count {
			if rows > 2+8 {
				t.Fatalf("a step of %d rows while 2 sequences decode, cap 8 (steps by rows %v)", rows, rec.count)
			}
			if rows > 2 {
				mixed += n
			}
		}
		if mixed < 100/8 {
			t.Fatalf("the 100-token prompt took %d steps with the decodes, want ≥ %d", mixed, 100/8)
		}
	})
}
