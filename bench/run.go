package bench

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Load says how requests are offered.
type Load struct {
	// Concurrency: with Rate 0, this many clients each send their next
	// request when the previous one ends (closed loop). With Rate > 0, a cap
	// on requests in flight (0 = none).
	Concurrency int
	// Rate > 0: requests arrive as a Poisson process of this many per second
	// (exponential gaps), whether or not earlier ones have finished.
	Rate float64
	// Requests to send; 0 = as many as fit in Duration.
	Requests int
	// Duration caps the run: no request starts after it, and the ones still
	// running Drain later are cut (Result.Cut). 0 = no cap (Requests must
	// be > 0).
	Duration, Drain time.Duration
	Seed            uint64 // arrival times and synthetic prompts
}

// Progress is read by a progress printer while a run goes on.
type Progress struct {
	Sent, Done, Failed, Tokens atomic.Int64
	Started                    atomic.Int64 // unix nanoseconds
}

// InFlight is Sent − Done.
func (p *Progress) InFlight() int64 { return p.Sent.Load() - p.Done.Load() }

// Run offers load to c, taking request i from next(i), and returns every
// result in completion order. It returns when all sent requests have ended.
// p may be nil.
func Run(ctx context.Context, c *Client, load Load, next func(i int) Request, p *Progress) []Result {
	if p == nil {
		p = new(Progress)
	}
	p.Started.Store(time.Now().UnixNano())
	sendCtx, reqCtx := ctx, ctx // sending stops at Duration; requests end at Duration+Drain
	if load.Duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, load.Duration)
		defer cancel()
		reqCtx = sendCtx // one timer: a request cut at the deadline must not find sending still open
		if load.Drain > 0 {
			reqCtx, cancel = context.WithTimeout(ctx, load.Duration+load.Drain)
			defer cancel()
		}
	}
	results := make(chan Result)
	var out []Result
	collected := make(chan struct{})
	go func() {
		for r := range results {
			out = append(out, r)
		}
		close(collected)
	}()
	do := func(i int) {
		p.Sent.Add(1)
		r := c.Do(reqCtx, next(i))
		p.Tokens.Add(int64(r.OutputTokens))
		if r.Err != "" {
			p.Failed.Add(1)
		}
		p.Done.Add(1)
		results <- r
	}
	var wg sync.WaitGroup
	if load.Rate > 0 {
		openLoop(sendCtx, load, do, &wg)
	} else {
		closedLoop(sendCtx, load, do, &wg)
	}
	wg.Wait()
	close(results)
	<-collected
	return out
}

// more reports whether request i may start.
func (l Load) more(ctx context.Context, i int) bool {
	return ctx.Err() == nil && (l.Requests <= 0 || i < l.Requests)
}

func closedLoop(ctx context.Context, load Load, do func(int), wg *sync.WaitGroup) {
	var next atomic.Int64
	for range max(load.Concurrency, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if !load.more(ctx, i) {
					return
				}
				do(i)
			}
		})
	}
}

// openLoop sends on a Poisson schedule from this goroutine; each request runs
// on its own.
func openLoop(ctx context.Context, load Load, do func(int), wg *sync.WaitGroup) {
	rng := rand.New(rand.NewPCG(load.Seed, 0x5eed))
	var slots chan struct{}
	if load.Concurrency > 0 {
		slots = make(chan struct{}, load.Concurrency)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for i := 0; load.more(ctx, i); i++ {
		gap := time.Duration(rng.ExpFloat64() / load.Rate * float64(time.Second))
		t.Reset(gap)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if slots != nil {
			select {
			case <-ctx.Done():
				return
			case slots <- struct{}{}:
			}
		}
		wg.Go(func() {
			do(i)
			if slots != nil {
				<-slots
			}
		})
	}
}
