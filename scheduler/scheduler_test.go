package scheduler

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
)

func TestConfigValidation(t *testing.T) {
	pool, _ := kvcache.NewPool(kvcache.Config{Blocks: 8})
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{MaxBatchTokens: 1, MaxSeqs: 1, Watermark: 0.5}, true},
		{Config{MaxBatchTokens: -1}, false},
		{Config{MaxSeqs: -3}, false},
		{Config{Watermark: 1}, false},
		{Config{Watermark: -0.1}, false},
		{Config{AgingSteps: 1<<20 + 1}, false},
		{Config{MaxPrefillTokensWithDecodes: -1}, false},
		{Config{MaxBatchTokens: 16, MaxPrefillTokensWithDecodes: 1000}, true}, // above the budget: no cap
	} {
		_, err := New(tc.cfg, pool)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%+v: err=%v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
	if _, err := New(Config{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil pool: %v", err)
	}
	for _, tc := range []struct{ batch, prefill, want int }{
		{0, 0, DefaultMaxPrefillTokensWithDecodes},
		{64, 0, 64},
		{64, 1000, 64},
		{512, 1, 1},
	} {
		s, err := New(Config{MaxBatchTokens: tc.batch, MaxPrefillTokensWithDecodes: tc.prefill}, pool)
		if err != nil || s.cfg.MaxPrefillTokensWithDecodes != tc.want {
			t.Errorf("%+v: cap %d, err %v; want %d", tc, s.cfg.MaxPrefillTokensWithDecodes, err, tc.want)
		}
	}
}

type itemWant struct {
	seq      *Seq
	start, n int
	sample   bool
}

func checkPlan(t *testing.T, step int, p *Plan, want []itemWant) {
	t.Helper()
	var got []itemWant
	for _, it := range p.Items {
		got = append(got, itemWant{it.Seq, it.Start, it.N, it.Sample})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: plan %+v, want %+v", step, got, want)
	}
}

// A long prompt is split across steps and shares each step with decodes,
// which go first.
func TestChunkedPrefillMixesWithDecodes(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 8, MaxSeqs: 4}, 16, 4, false)
	a := h.add(tokens(3, 1), 10, 0)
	b := h.add(tokens(20, 100), 10, 0)
	checkPlan(t, 1, h.mustStep(), []itemWant{{a, 0, 3, true}, {b, 0, 5, false}})
	checkPlan(t, 2, h.mustStep(), []itemWant{{a, 3, 1, true}, {b, 5, 7, false}})
	checkPlan(t, 3, h.mustStep(), []itemWant{{a, 4, 1, true}, {b, 12, 7, false}})
	checkPlan(t, 4, h.mustStep(), []itemWant{{a, 5, 1, true}, {b, 19, 1, true}})
	checkPlan(t, 5, h.mustStep(), []itemWant{{a, 6, 1, true}, {b, 20, 1, true}})
	h.drain(100)
}

// While anything decodes, a step's prompt tokens (chunks and admissions
// together) stay within MaxPrefillTokensWithDecodes, so the running streams
// wait for a short step; the rest of the batch budget goes unused.
func TestPrefillCapWithDecodes(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxPrefillTokensWithDecodes: 8, MaxSeqs: 4}, 64, 4, false)
	a := h.add(tokens(3, 1), 20, 0)
	checkPlan(t, 1, h.mustStep(), []itemWant{{a, 0, 3, true}})
	b := h.add(tokens(30, 100), 5, 0)
	c := h.add(tokens(10, 200), 5, 0)
	for _, tc := range []struct {
		want    []itemWant
		decodes int
	}{
		{[]itemWant{{a, 3, 1, true}, {b, 0, 8, false}}, 1}, // c waits: the cap is spent
		{[]itemWant{{a, 4, 1, true}, {b, 8, 8, false}}, 1},
		{[]itemWant{{a, 5, 1, true}, {b, 16, 8, false}}, 1},
		{[]itemWant{{a, 6, 1, true}, {b, 24, 6, true}, {c, 0, 2, false}}, 1},
		{[]itemWant{{a, 7, 1, true}, {b, 30, 1, true}, {c, 2, 8, true}}, 2},
		{[]itemWant{{a, 8, 1, true}, {b, 31, 1, true}, {c, 10, 1, true}}, 3},
	} {
		step := int(h.s.step) + 1
		p := h.mustStep()
		checkPlan(t, step, p, tc.want)
		if d := numDecodes(p); d != tc.decodes {
			t.Fatalf("step %d: %d decodes, want %d", step, d, tc.decodes)
		}
	}
	h.drain(100)
}

// With nothing decoding the whole batch budget goes to prefill: an idle
// server starts a long prompt at full speed.
func TestPrefillUncappedWithoutDecodes(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxPrefillTokensWithDecodes: 8, MaxSeqs: 4}, 64, 4, false)
	big := h.add(tokens(150, 1), 2, 0)
	small := h.add(tokens(5, 500), 2, 0)
	checkPlan(t, 1, h.mustStep(), []itemWant{{big, 0, 64, false}})
	checkPlan(t, 2, h.mustStep(), []itemWant{{big, 64, 64, false}})
	checkPlan(t, 3, h.mustStep(), []itemWant{{big, 128, 22, true}, {small, 0, 5, true}})
	// Now both decode: the next arrival's prompt is capped.
	next := h.add(tokens(20, 900), 2, 0)
	checkPlan(t, 4, h.mustStep(), []itemWant{{big, 150, 1, true}, {small, 5, 1, true}, {next, 0, 8, false}})
	h.drain(100)
}

// The default cap does not shrink with the batch: a step carrying prompt
// tokens pays a fixed cost, so a short prompt joins even one or a few
// decoding streams in one step, and a long one in as few as the cap allows.
// Before (4 prompt tokens per decode, at least 16) a 69-token prompt beside
// 4 streams took five steps.
func TestPromptChunksWhileDecoding(t *testing.T) {
	for _, decoders := range []int{1, 4, 16} {
		for _, tc := range []struct {
			prompt int
			chunks []int
		}{
			{69, []int{69}},
			{300, []int{DefaultMaxPrefillTokensWithDecodes, DefaultMaxPrefillTokensWithDecodes, 300 - 2*DefaultMaxPrefillTokensWithDecodes}},
		} {
			h := newHarness(t, Config{MaxBatchTokens: 512}, 512, 4, false)
			for i := range decoders {
				h.add(tokens(2, int32(10*i)), 50, 0)
			}
			h.mustStep() // every decoder's prompt, in one step
			long := h.add(tokens(tc.prompt, 1000), 5, 0)
			var chunks []int
			for long.NumComputed() < tc.prompt {
				p := h.mustStep()
				if d := numDecodes(p); d != decoders {
					t.Fatalf("%d decoders, %d-token prompt: a step decoded %d", decoders, tc.prompt, d)
				}
				i := slices.IndexFunc(p.Items, func(it Item) bool { return it.Seq == long })
				if i < 0 {
					t.Fatalf("%d decoders, %d-token prompt: a step without it: %+v", decoders, tc.prompt, p)
				}
				chunks = append(chunks, p.Items[i].N)
			}
			if !slices.Equal(chunks, tc.chunks) {
				t.Errorf("%d decoders, %d-token prompt: chunks %v, want %v", decoders, tc.prompt, chunks, tc.chunks)
			}
			h.drain(1000)
		}
	}
}

// A long prompt still advances every step while others decode, even with
// the smallest cap, and starts generating long before they finish.
func TestLongPromptProgressesWhileOthersDecode(t *testing.T) {
	for _, limit := range []int{1, 8} {
		h := newHarness(t, Config{MaxBatchTokens: 32, MaxPrefillTokensWithDecodes: limit, MaxSeqs: 8}, 512, 4, false)
		var decoders []*Seq
		for i := range 4 {
			decoders = append(decoders, h.add(tokens(2, int32(10*i)), 400, 0))
		}
		h.mustStep()
		long := h.add(tokens(100, 1000), 5, 0)
		steps := 0
		for long.State() != StateRunning || long.NumComputed() < 100 {
			before := long.NumComputed()
			h.mustStep()
			steps++
			if long.State() == StateRunning && long.NumComputed() <= before && long.NumComputed() < 100 {
				t.Fatalf("cap %d: step %d: long prompt stuck at %d computed", limit, steps, before)
			}
			if steps > 100/limit+1 {
				t.Fatalf("cap %d: long prompt not prefilled after %d steps", limit, steps)
			}
		}
		for _, d := range decoders {
			if d.State() != StateRunning {
				t.Fatalf("cap %d: a decoder left (%v) before the long prompt was in", limit, d.State())
			}
		}
		h.drain(1000)
	}
}

// When blocks run out mid-generation the lowest-precedence running sequence
// is preempted, returns to the head of the queue, and later recomputes its
// prompt and generated tokens (from the prefix cache where it can).
func TestPreemptionByRecompute(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 4}, 4, 4, true)
	a := h.add(tokens(6, 1), 6, 0)   // grows to 12 tokens = 3 blocks
	b := h.add(tokens(6, 50), 4, 0)  // grows to 10 tokens = 3 blocks
	c := h.add(tokens(2, 90), 10, 0) // arrives last, waits
	checkPlan(t, 1, h.mustStep(), []itemWant{{a, 0, 6, true}, {b, 0, 6, true}})
	checkPlan(t, 2, h.mustStep(), []itemWant{{a, 6, 1, true}, {b, 6, 1, true}})
	checkPlan(t, 3, h.mustStep(), []itemWant{{a, 7, 1, true}, {b, 7, 1, true}})
	// a needs a third block for position 8: b, admitted later, is preempted.
	p := h.mustStep()
	checkPlan(t, 4, p, []itemWant{{a, 8, 1, true}})
	if !slices.Equal(p.Preempted, []*Seq{b}) || b.State() != StateWaiting || b.NumComputed() != 0 || b.Preemptions() != 1 {
		t.Fatalf("preempted %v; b state %v computed %d", p.Preempted, b.State(), b.NumComputed())
	}
	if got := h.s.queue.next().head(); got != b {
		t.Fatalf("b should be next to admit, ahead of c")
	}
	if len(b.Tokens) != 9 {
		t.Fatalf("b lost its generated tokens: %d", len(b.Tokens))
	}
	h.drain(100)
	if !slices.Contains(h.done, b) || !slices.Contains(h.done, c) {
		t.Fatal("not all finished")
	}
	st := h.s.Stats()
	if st.Preemptions < 1 || st.HitTokens == 0 {
		t.Fatalf("stats %+v: want a preemption and prefix hits on readmission", st)
	}
	if b.CachedTokens() != 0 {
		t.Fatalf("readmission counted as a first-admission cache hit: %d", b.CachedTokens())
	}
}

// Higher priority is admitted first; FCFS within a priority.
func TestPriorityThenFCFS(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 16, 4, false)
	var order []*Seq
	lo1 := h.add(tokens(2, 1), 1, 0)
	hi1 := h.add(tokens(2, 2), 1, 5)
	lo2 := h.add(tokens(2, 3), 1, 0)
	hi2 := h.add(tokens(2, 4), 1, 5)
	for h.s.NumRunning()+h.s.NumWaiting() > 0 {
		for _, it := range h.mustStep().Items {
			if it.Start == 0 {
				order = append(order, it.Seq)
			}
		}
	}
	if want := []*Seq{hi1, hi2, lo1, lo2}; !slices.Equal(order, want) {
		t.Fatalf("admission order wrong")
	}
}

// A higher-priority arrival preempts a lower-priority running sequence when
// the sequence cap is reached; an equal-priority arrival waits its turn.
func TestPriorityPreemptsOnAdmission(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 16, 4, true)
	low := h.add(tokens(6, 1), 10, 0)
	checkPlan(t, 1, h.mustStep(), []itemWant{{low, 0, 6, true}})
	same := h.add(tokens(3, 50), 2, 0)
	checkPlan(t, 2, h.mustStep(), []itemWant{{low, 6, 1, true}}) // FCFS: same waits
	high := h.add(tokens(3, 90), 2, 5)
	p := h.mustStep()
	checkPlan(t, 3, p, []itemWant{{high, 0, 3, true}})
	if !slices.Equal(p.Preempted, []*Seq{low}) || low.State() != StateWaiting {
		t.Fatalf("preempted %v, low %v", p.Preempted, low.State())
	}
	h.drain(100)
	if !slices.Contains(h.done, low) || !slices.Contains(h.done, same) || h.done[0] != high {
		t.Fatal("high did not finish first, or others did not finish")
	}
}

// A low-priority sequence facing an endless stream of high-priority arrivals
// is admitted within AgingSteps steps per priority level; without aging it
// would wait forever.
func TestNoStarvation(t *testing.T) {
	for _, tc := range []struct {
		aging    int
		admitted bool
	}{
		{aging: 16, admitted: true},
		{aging: 1 << 20, admitted: false}, // aging effectively off: starves
	} {
		h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1, AgingSteps: tc.aging}, 64, 4, false)
		low := h.add(tokens(2, 1), 1, 0)
		admittedAt := -1
		const steps = 200
		for step := 1; step <= steps && admittedAt < 0; step++ {
			h.add(tokens(2, int32(10+step)), 2, 1) // two steps of work, one arrival per step
			for _, it := range h.mustStep().Items {
				if it.Seq == low {
					admittedAt = step
				}
			}
		}
		if got := admittedAt >= 0; got != tc.admitted {
			t.Fatalf("aging %d: admitted at step %d, want admitted=%v", tc.aging, admittedAt, tc.admitted)
		}
		// Bound: the arrivals ahead of it are those of the first aging steps.
		if tc.admitted && admittedAt > 3*tc.aging {
			t.Fatalf("aging %d: admitted only at step %d", tc.aging, admittedAt)
		}
	}
}

// Admission keeps the watermark free while others run; an idle pool admits
// regardless, so a large request is never stuck behind the watermark.
func TestWatermarkAdmission(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 4, Watermark: 0.25}, 8, 4, false)
	a := h.add(tokens(28, 1), 1, 0) // 7 of 8 blocks: more than 8-2, but the pool is idle
	b := h.add(tokens(1, 50), 1, 0)
	p := h.mustStep()
	checkPlan(t, 1, p, []itemWant{{a, 0, 28, true}})
	_ = b
	h.drain(10)
}

func TestUnfitSequenceIsRemoved(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 4}, 2, 4, false)
	big := h.add(tokens(9, 1), 1, 0)
	p := h.mustStep()
	if !slices.Equal(p.Unfit, []*Seq{big}) || big.State() != StateDone {
		t.Fatalf("unfit %v, state %v", p.Unfit, big.State())
	}
	grows := h.add(tokens(7, 1), 5, 0) // fits at first, then outgrows the pool alone
	h.drain(10)
	if grows.State() != StateDone || !slices.Contains(h.done, grows) {
		t.Fatal("sequence outgrowing the pool was not removed")
	}
}

// A second sequence with the same long prefix computes only its new tokens.
func TestPrefixCacheCounters(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 1024, MaxSeqs: 4}, 128, 16, true)
	system := tokens(500, 1000)
	first := h.add(append(slices.Clone(system), 1, 2, 3), 4, 0)
	h.drain(100)
	before := h.s.Stats().ComputedTokens
	second := h.add(append(slices.Clone(system), 7, 8, 9, 10), 4, 0)
	p := h.mustStep()
	const cached = 500 / 16 * 16 // whole blocks only: 496
	if second.CachedTokens() != cached || first.CachedTokens() != 0 {
		t.Fatalf("cached tokens: first %d, second %d (want 0, %d)", first.CachedTokens(), second.CachedTokens(), cached)
	}
	checkPlan(t, 1, p, []itemWant{{second, cached, 504 - cached, true}})
	if got := h.s.Stats().ComputedTokens - before; got != 504-cached {
		t.Fatalf("computed %d tokens, want %d", got, 504-cached)
	}
	h.drain(100)
}
