package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestRandomTraffic drives the engine from 8 concurrent clients through
// hundreds of requests — random lengths and priorities, some cancelled or
// aborted at random points — on a pool small enough to force preemption.
// At every step (inside Forward, on the loop goroutine) the scheduler's and
// the pool's invariants must hold (free+used+cached = total, reference
// counts match the live tables); every completed output must equal the
// cache-free reference and every aborted one must be a prefix of it; at the
// end no block is in use.
func TestRandomTraffic(t *testing.T) {
	m := newHashModel(64, 4096, 40, 8)
	e := newTestEngine(t, m, Config{MaxBatchTokens: 24, MaxSeqs: 8, MaxQueue: 64})
	var invErr error
	check := func(*kernels.Batch) error { // on the loop, inside Forward
		if err := e.sched.CheckInvariants(); err != nil && invErr == nil {
			invErr = err
		}
		return nil
	}
	m.onForward = check
	const clients, perClient = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for range perClient {
				if err := oneRequest(e, m, r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Random arrivals alone need not overcommit the pool: on a fast machine
	// each client's request can end before the next one arrives. So a burst
	// follows, submitted while the loop is held: ten prompts of 50–59 tokens
	// that grow by 30 (up to 12 blocks each) against 40 blocks must preempt.
	var burst [][]int32
	for i := range 10 {
		burst = append(burst, prompt(50+i, int32(100+i), 64))
	}
	got := runAtOnce(t, e, func(h func(*kernels.Batch) error) {
		m.onForward = func(b *kernels.Batch) error {
			check(b)
			return h(b)
		}
	}, burst, 30)
	for i, p := range burst {
		if want := m.reference(p, 30); !slices.Equal(got[i], want) {
			t.Fatalf("burst prompt %d: %v, reference %v", i, got[i], want)
		}
	}
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	if invErr != nil { // written by the loop, which has ended
		t.Fatal(invErr)
	}
	st := e.Stats()
	if st.KV.Used != 0 || st.Finished != int64(clients*perClient+len(burst)) || st.Preemptions == 0 || st.Reclaims == 0 {
		t.Fatalf("stats %+v: want every request finished, none holding blocks, and preemptions and aborts exercised", st)
	}
}

// oneRequest submits a random request, maybe cancels or aborts it after a
// random number of tokens, and checks what it got against the reference.
func oneRequest(e *Engine, m *hashModel, r *rand.Rand) error {
	p := make([]int32, 1+r.IntN(60))
	for i := range p {
		p[i] = int32(r.IntN(64))
	}
	if r.IntN(3) == 0 { // a shared prefix: exercises the prefix cache
		p = append(prompt(24, 1, 64), p...)
	}
	n := 1 + r.IntN(30)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	s, err := e.Submit(ctx, Request{Prompt: p, MaxTokens: n, Priority: r.IntN(3)})
	if err != nil {
		return err
	}
	stopAt := -1 // after how many tokens to cancel (-1: never)
	action := r.IntN(4)
	if action < 2 {
		stopAt = r.IntN(n + 1)
	}
	var got []int32
	for {
		if len(got) == stopAt {
			if action == 0 {
				cancel()
			} else {
				s.Abort(CauseStall)
			}
		}
		tok, ok := <-s.Tokens()
		if !ok {
			break
		}
		got = append(got, tok.ID)
	}
	res, want := s.Result(), m.reference(p, n)
	switch {
	case res.Finish == FinishLength && !slices.Equal(got, want):
		return fmt.Errorf("prompt %v: got %v, want %v", p, got, want)
	case res.Finish == FinishAbort && !slices.Equal(got, want[:len(got)]):
		return fmt.Errorf("aborted prompt %v: got %v, not a prefix of %v", p, got, want)
	case res.Finish != FinishLength && res.Finish != FinishAbort:
		return fmt.Errorf("unexpected result %+v", res)
	case res.Finish == FinishAbort && stopAt < 0:
		return fmt.Errorf("aborted without a cancel: %+v", res)
	}
	return nil
}
