package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// Engine runs a Model over continuously batched sequences. One goroutine
// (the loop) owns the scheduler, the KV pool and every sequence's state;
// Submit, Abort and context cancellations reach it through channels and take
// effect at the next step boundary.
type Engine struct {
	model Model
	cfg   Config
	limit int // longest sequence: min(model context, KV pool capacity)

	// Edge state, shared with callers.
	closeMu  sync.RWMutex // Close vs Submit's send: nothing is sent after the loop drains
	closed   bool
	nextID   atomic.Uint64
	queued   atomic.Int64 // accepted, not yet started: bounded by 2*cfg.MaxQueue
	shares   *queueShares // each tenant's part of queued (fair.go)
	arrivals chan *Sequence
	aborts   chan abortReq
	stop     chan struct{}
	done     chan struct{}
	stats    atomic.Pointer[Stats]
	broken   *brokenState // closed by the loop when the backend is gone (fault.go)
	status   statusFeed   // Status frames for watchers (status.go)

	// Loop-owned.
	pool      *kvcache.Pool
	sched     *scheduler.Scheduler
	live      map[*Sequence]struct{}
	batch     kernels.Batch
	st        Stats           // counters behind the published snapshot
	dev       *deviceSampling // nil: logits come back whole, sampled on the host (devsample.go)
	specCost  rowCost         // the price of a draft row (spec.go)
	specPrior specPrior       // recent acceptance, a new sequence's start (spec.go)
	draft     *drafter        // speculative method draft's model and KV (draft.go)
	mtp       *mtpDrafter     // speculative method mtp's head and KV (mtp.go)
	assist    *assistDrafter  // method draft with an assistant drafter (assistant.go)
	plRows    []int32         // promptLogprobs' scratch (logprobs.go)
	plDsts    []plDst
}

// New validates cfg and starts the engine loop. The model's KV store must
// hold cfg.Blocks blocks of cfg.BlockSize slots. Call Close to stop it.
func New(model Model, cfg Config) (*Engine, error) {
	if err := cfg.validate(model); err != nil {
		return nil, err
	}
	states, stateBytes := stateSlots(model) // state.go
	pool, err := kvcache.NewPool(kvcache.Config{
		Blocks: cfg.Blocks, BlockSize: cfg.BlockSize, PrefixCaching: !cfg.DisablePrefixCache, Events: cfg.KVEvents,
		Window: cfg.windowGroup(), States: states,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pool.SetStateRollBack(canRollBackState(model)) // state.go: speculation on hybrid models
	shares := newQueueShares(cfg.MaxQueue)
	sc := cfg.schedulerConfig()
	sc.OnAdmit = func(q *scheduler.Seq) { shares.leave(owner(q).req.Tenant) }
	var e *Engine
	if cfg.Speculate.Method != "" {
		sc.Propose = func(q *scheduler.Seq, max int) []int32 { return e.propose(q, max) }
	}
	sched, err := scheduler.New(sc, pool)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	draft, err := newDrafter(model, &cfg)
	if err != nil {
		return nil, err
	}
	mtp, err := newMTPDrafter(model, &cfg)
	if err != nil {
		return nil, err
	}
	assist, err := newAssistDrafter(model, &cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkWindow(sched.Config().MaxBatchTokens); err != nil {
		return nil, err
	}
	e = &Engine{
		model: model,
		cfg:   cfg,
		limit: min(model.ContextLen(), cfg.Blocks*cfg.BlockSize),
		// Every queued sequence fits in the buffer, so Submit never blocks on
		// it: the queue holds MaxQueue and as much again for tenants under
		// their share (fair.go).
		arrivals: make(chan *Sequence, 2*cfg.MaxQueue),
		shares:   shares,
		// One abort per sequence: room for every queued and running one, and
		// as many preempted ones again, so Abort practically never waits.
		aborts: make(chan abortReq, 2*cfg.MaxQueue+2*sched.Config().MaxSeqs),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		pool:   pool,
		sched:  sched,
		live:   make(map[*Sequence]struct{}),
		broken: newBrokenState(),
		dev:    newDeviceSampling(model),
		draft:  draft,
		mtp:    mtp,
		assist: assist,
	}
	e.st.StateSlotBytes = stateBytes
	e.st.Speculating = cfg.Speculate.Method != ""
	e.st.SpecMethod = cfg.Speculate.Method
	e.status.init()
	e.publish()
	go e.loop()
	return e, nil
}

// MaxSequenceLen is the longest sequence (prompt + output) the engine accepts:
// the model's context length or the KV pool's capacity, whichever is smaller.
func (e *Engine) MaxSequenceLen() int { return e.limit }

// Stats returns the latest snapshot the loop published.
func (e *Engine) Stats() *Stats { return e.stats.Load() }

// Submit validates req and queues it. The sequence is aborted with
// CauseClientDisconnect when ctx is done. Errors: ErrInvalidRequest,
// ErrPromptTooLong, ErrQueueFull (backpressure: retry later; it is
// ErrTenantQueueFull when req's Tenant holds its share of a full queue),
// ErrClosed, or ctx's error if it is already done.
//
// MaxTokens bounds the whole output, Resume included; 0 means up to
// MaxSequenceLen. The output channel holds every token the sequence may
// still produce.
func (e *Engine) Submit(ctx context.Context, req Request) (*Sequence, error) {
	maxLen, err := e.validate(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("engine: submit: %w", err)
	}
	if err := e.BrokenErr(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClosed, err)
	}
	s := e.newSequence(ctx, req, maxLen)
	if err := e.send(s, 1); err != nil {
		return nil, err
	}
	return s, nil
}

func (e *Engine) newSequence(ctx context.Context, req Request, maxLen int) *Sequence {
	known := len(req.Prompt) + len(req.Resume)
	req.StopTokens = slices.Clone(req.StopTokens) // the loop reads them; the caller may reuse its slice
	s := &Sequence{
		id:        e.nextID.Add(1),
		req:       req,
		submitted: time.Now(),
		eng:       e,
		ctx:       ctx,
		out:       make(chan Token, maxLen-known),
		admitted:  make(chan struct{}),
		progress:  make(chan struct{}, 1),
		done:      make(chan struct{}),
		sampler:   newSampler(req.Sampling),
		maxLen:    maxLen,
		emitted:   len(req.Resume),
	}
	s.sampler.resume(len(req.Resume)) // the PRNG continues from the resumed tokens
	s.sq.Tokens = make([]int32, 0, maxLen)
	s.sq.Tokens = append(append(s.sq.Tokens, req.Prompt...), req.Resume...)
	s.sq.Priority = req.Priority
	s.sq.Tenant = req.Tenant
	s.sq.Salt = kvcache.SaltOf(req.CacheSalt)
	if pl := req.PromptLogprobs; pl != nil && len(req.Resume) == 0 {
		pl.Logprobs = make([]*Logprob, len(req.Prompt))
		s.promptLP = pl
		// A salt of its own: no cached block (no logits) serves its prompt.
		s.sq.Salt = kvcache.SaltOf(fmt.Sprintf("prompt-logprobs\x00%d\x00%s", s.id, req.CacheSalt))
	}
	s.sq.Owner = s
	return s
}

// send queues s, which brings n sequences (a group's leader brings its
// choices): n queue places of its tenant's share, one arrival.
func (e *Engine) send(s *Sequence, n int) error {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	if err := e.shares.enter(s.req.Tenant, n, &e.queued); err != nil {
		return err
	}
	e.arrivals <- s // never blocks: queued ≤ 2*MaxQueue = cap(arrivals)
	return nil
}

// validate checks req and returns the sequence's length limit (prompt,
// resume and output tokens).
func (e *Engine) validate(req Request) (int, error) {
	vocab := int32(e.model.VocabSize())
	for _, ids := range [][]int32{req.Prompt, req.Resume, req.StopTokens} {
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return 0, fmt.Errorf("%w: token id %d outside vocab %d", ErrInvalidRequest, id, vocab)
			}
		}
	}
	switch {
	case len(req.Prompt) == 0:
		return 0, fmt.Errorf("%w: empty prompt", ErrInvalidRequest)
	case req.MaxTokens < 0:
		return 0, fmt.Errorf("%w: max tokens %d", ErrInvalidRequest, req.MaxTokens)
	case req.MaxTokens > 0 && len(req.Resume) >= req.MaxTokens:
		return 0, fmt.Errorf("%w: %d resumed tokens leave nothing of max tokens %d", ErrInvalidRequest, len(req.Resume), req.MaxTokens)
	}
	if err := validateSampling(req.Sampling); err != nil {
		return 0, err
	}
	if err := validateLogprobs(req); err != nil {
		return 0, err
	}
	if _, ok := e.model.(RowLogitsModel); req.PromptLogprobs != nil && !ok {
		return 0, fmt.Errorf("%w: this model cannot give prompt logprobs", ErrInvalidRequest)
	}
	if err := e.validateControls(req); err != nil {
		return 0, err
	}
	// Compared as room left, never as a sum: prompt + MaxTokens overflows
	// for a MaxTokens near MaxInt, and a negative length would size the
	// output channel.
	known := len(req.Prompt) + len(req.Resume)
	if known >= e.limit || req.MaxTokens > e.limit-len(req.Prompt) {
		return 0, fmt.Errorf("%w: %d prompt + %d output tokens, limit %d", ErrPromptTooLong, len(req.Prompt), req.MaxTokens, e.limit)
	}
	if req.MaxTokens == 0 {
		return e.limit, nil
	}
	return len(req.Prompt) + req.MaxTokens, nil
}

// Close aborts every sequence with CauseShutdown, stops the loop and waits
// for it, or for ctx. Submit fails with ErrClosed from the start of Close.
func (e *Engine) Close(ctx context.Context) error {
	e.closeMu.Lock()
	if !e.closed {
		e.closed = true
		close(e.stop)
	}
	e.closeMu.Unlock()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: close: %w", ctx.Err())
	}
}

// abort hands a cancellation to the loop. Only a sequence's first abort is
// sent, so the channel cannot fill with repeats; should more sequences be
// live than it holds, the sender waits for the loop's next step boundary.
func (e *Engine) abort(s *Sequence, cause AbortCause) {
	if !s.aborting.CompareAndSwap(false, true) {
		return
	}
	select {
	case e.aborts <- abortReq{seq: s, cause: cause, at: time.Now()}:
	case <-e.done: // the loop has ended every sequence already
	}
}

// loop is the engine: apply what arrived, run a step, publish, repeat;
// block only when there is nothing to run.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		if e.sched.NumRunning()+e.sched.NumWaiting() == 0 {
			select {
			case s := <-e.arrivals:
				e.arrive(s)
			case a := <-e.aborts:
				e.takeArrivals()
				e.applyAbort(a)
			case <-e.stop:
				e.shutdown()
				return
			}
		}
		if !e.drain() {
			e.shutdown()
			return
		}
		if e.sched.NumRunning()+e.sched.NumWaiting() > 0 {
			e.step()
		}
		e.publish()
	}
}

// drain applies every pending arrival, then every pending abort, without
// blocking; false means stop was requested.
func (e *Engine) drain() bool {
	for {
		e.takeArrivals()
		select {
		case a := <-e.aborts:
			// Submit's send completed before anyone held the sequence to
			// abort it, so its arrival is in the channel now, if not taken:
			// take it before applying the abort, which then never finds a
			// sequence the loop has not seen.
			e.takeArrivals()
			e.applyAbort(a)
		case <-e.stop:
			return false
		default:
			return true
		}
	}
}

// takeArrivals applies every arrival waiting in the channel.
func (e *Engine) takeArrivals() {
	for {
		select {
		case s := <-e.arrivals:
			e.arrive(s)
		default:
			return
		}
	}
}

func (e *Engine) arrive(s *Sequence) {
	e.live[s] = struct{}{}
	e.arriveGroup(s) // group.go
	// A context cancelled before the loop saw the arrival ends it here: an
	// AfterFunc registered now would run on its own goroutine, and its abort
	// could land after the sequence took part in a step.
	if s.ctx.Err() != nil && s.aborting.CompareAndSwap(false, true) {
		e.applyAbort(abortReq{seq: s, cause: CauseClientDisconnect, at: time.Now()})
		return
	}
	if err := e.sched.Add(&s.sq); err != nil { // cannot happen: validated, fresh
		e.finish(s, Result{Finish: FinishError, Err: err})
		return
	}
	s.ctxStop = context.AfterFunc(s.ctx, func() { e.abort(s, CauseClientDisconnect) })
}

// applyAbort ends a sequence and returns its blocks before the next step.
func (e *Engine) applyAbort(a abortReq) {
	s := a.seq
	if s.finished {
		return
	}
	e.sched.Finish(&s.sq)
	s.reclaim = time.Since(a.at)
	e.st.Reclaims++
	e.st.ReclaimTotal += s.reclaim
	e.st.ReclaimMax = max(e.st.ReclaimMax, s.reclaim)
	e.st.LastReclaimAt = time.Now()
	if o := e.cfg.Observer; o != nil {
		o.OnReclaim(s.reclaim)
	}
	e.finish(s, Result{Finish: FinishAbort, Cause: a.cause})
}

// shutdown ends everything still queued or running. Close set closed under
// closeMu before closing stop, so no Submit is mid-send and none will send:
// what is in arrivals now is all there will be.
func (e *Engine) shutdown() {
	for len(e.arrivals) > 0 {
		e.live[<-e.arrivals] = struct{}{}
	}
	for len(e.aborts) > 0 {
		<-e.aborts // shutdown is the cause that counts now
	}
	for s := range e.live {
		e.sched.Finish(&s.sq)
		e.finish(s, Result{Finish: FinishAbort, Cause: CauseShutdown})
	}
	e.publish()
}

// finish records r and closes the sequence's stream, exactly once. The
// sequence must already be out of the scheduler.
func (e *Engine) finish(s *Sequence, r Result) {
	if s.finished {
		return
	}
	s.finished = true
	delete(e.live, s)
	e.releaseGroup(s) // group.go
	e.draft.release(s)
	e.mtp.release(s)
	e.assist.release(s)
	if !s.started {
		e.queued.Add(-1)
	}
	if !s.sq.Admitted() { // else OnAdmit counted it out of its tenant's share
		e.shares.leave(s.req.Tenant)
	}
	if s.ctxStop != nil {
		s.ctxStop()
	}
	r.PromptTokens = len(s.req.Prompt)
	r.CompletionTokens = len(s.sq.Tokens) - len(s.req.Prompt)
	r.CachedTokens = min(s.sq.CachedTokens(), len(s.req.Prompt))
	e.st.Finished++
	if r.Finish == FinishAbort {
		e.st.Aborted++
	}
	s.result = r
	close(s.done)
	close(s.out)
	s.sq.Tokens = nil // the loop is done with them; let them be collected
	if o := e.cfg.Observer; o != nil {
		queued := time.Since(s.submitted)
		if s.started {
			queued = s.startedAt.Sub(s.submitted)
		}
		o.OnFinish(s, r, queued)
	}
}

func (e *Engine) publish() {
	st := e.st
	ss, ps := e.sched.Stats(), e.pool.Stats()
	st.At = time.Now()
	st.Steps = ss.Steps
	st.Running, st.Waiting = e.sched.NumRunning(), e.sched.NumWaiting()
	st.KV = e.pool.Usage()
	st.KVWindow, _ = e.pool.WindowUsage()
	st.KVEvicts = ps.Evictions
	st.Preemptions = ss.Preemptions
	st.PrefixHitTokens = ss.HitTokens
	if e.dev != nil {
		st.DeviceToHost, st.DeviceToHostBytes = true, e.dev.ds.DeviceToHostBytes()
	}
	e.stats.Store(&st)
	e.publishStatus(&st)
}
