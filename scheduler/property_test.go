package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// runEvents interprets pairs of bytes as arrivals, aborts and steps, checking
// the scheduler's and the pool's invariants and the shadow KV after each,
// then drains: every sequence must end and no block may stay in use.
func runEvents(t *testing.T, cfg Config, blocks, bs int, events []byte) *harness {
	t.Helper()
	h := newHarness(t, cfg, blocks, bs, true)
	r := rand.New(rand.NewPCG(3, 4))
	bases := [][]int32{tokens(3*bs+1, 1000), tokens(5*bs, 2000)}
	var live []*Seq
	for i := 0; i+1 < len(events); i += 2 {
		op, arg := events[i]%5, int(events[i+1])
		switch {
		case op <= 1:
			var prompt []int32
			if arg%3 != 0 {
				prompt = slices.Clone(bases[arg%2])
			}
			for range 1 + arg%(3*bs) {
				prompt = append(prompt, int32(r.IntN(8)))
			}
			tenant := []string{"", "a", "b"}[arg/3%3]
			live = append(live, h.addFor(tenant, prompt, 1+arg%13, arg%3))
		case op == 2 && len(live) > 0:
			q := live[arg%len(live)]
			h.s.Finish(q) // aborted (or already done: harmless)
			live = slices.DeleteFunc(live, func(x *Seq) bool { return x == q })
			if err := h.s.CheckInvariants(); err != nil {
				t.Fatalf("event %d: abort: %v", i/2, err)
			}
		default:
			if _, err := h.step(); err != nil {
				t.Fatalf("event %d: step: %v", i/2, err)
			}
		}
	}
	h.drain(100000)
	return h
}

func TestRandomEvents(t *testing.T) {
	for _, tc := range []struct {
		cfg        Config
		blocks, bs int
	}{
		{Config{MaxBatchTokens: 16, MaxSeqs: 4}, 12, 4},
		{Config{MaxBatchTokens: 64, MaxSeqs: 16, Watermark: 0.1, AgingSteps: 4}, 20, 4},
		{Config{MaxBatchTokens: 7, MaxSeqs: 3}, 30, 2},
		{Config{MaxBatchTokens: 32, MaxPrefillTokensWithDecodes: 3, MaxSeqs: 6}, 24, 4},
	} {
		t.Run(fmt.Sprintf("%+v/blocks=%d", tc.cfg, tc.blocks), func(t *testing.T) {
			var st Stats
			for seed := range uint64(3) {
				r := rand.New(rand.NewPCG(seed, 1))
				events := make([]byte, 2*1500)
				for i := range events {
					events[i] = byte(r.UintN(256))
				}
				h := runEvents(t, tc.cfg, tc.blocks, tc.bs, events)
				s := h.s.Stats()
				st.Preemptions += s.Preemptions
				st.HitTokens += s.HitTokens
			}
			// The sizes are chosen so these paths run; if not, the test tests nothing.
			if st.Preemptions == 0 || st.HitTokens == 0 {
				t.Errorf("stats %+v: want preemptions and prefix hits", st)
			}
		})
	}
}

func FuzzScheduler(f *testing.F) {
	f.Add([]byte{0, 5, 0, 9, 3, 0, 3, 0, 2, 1, 4, 0, 1, 200, 3, 3})
	f.Fuzz(func(t *testing.T, events []byte) {
		runEvents(t, Config{MaxBatchTokens: 9, MaxSeqs: 3}, 10, 3, events)
		runEvents(t, Config{MaxBatchTokens: 9, MaxPrefillTokensWithDecodes: 2, MaxSeqs: 3}, 10, 3, events)
	})
}
