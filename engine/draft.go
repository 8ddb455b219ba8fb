package engine

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// Speculation with a draft model (SpecConfig.Method "draft"): a smaller
// model sharing the target's vocabulary guesses each sequence's next tokens
// greedily (a point mass, so spec.go's verify rule keeps the target's
// distribution), and the target verifies them as it does n-gram drafts;
// the self-tuning and what is not speculated are spec.go's, unchanged.
//
// The draft has a KV store of its own, paged by a kvcache.Pool of its own
// (no prefix cache: its blocks are never shared), one table per sequence.
// A sequence's draft KV covers its known tokens and then the draft tokens
// the last pass fed back in; it is brought into step lazily, at the next
// pass, by comparing those drafts with the tokens the sequence really has:
// the KV of the positions after the first mismatch (verification's
// rejection) is dropped (Truncate), and the tokens the draft has not seen
// yet (the verified ones, the bonus token, or the whole prompt the first
// time) are fed in. A sequence that ends gives its draft blocks back in
// finish, a preempted one in the step that preempts it.
//
// Proposals are made for all of a step's decoding sequences at once, on
// the scheduler's first Propose call of the step (which comes once the
// plan holds everything but drafts): the first draft forward carries every
// sequence's catch-up rows and gives each its first draft token; each of
// the next k−1 forwards carries one row per sequence still drafting. How
// many drafts each sequence wants is spec.go's propose itself, asked for
// every decoding sequence with the drafter collecting instead of drafting.

// drafter is Method "draft"'s model and its KV memory; loop-owned.
type drafter struct {
	model Model
	pool  *kvcache.Pool
	bs    int
	ctx   int // the draft model's context: it drafts no position past it
	seqs  map[*Sequence]*draftSeq

	step       int64 // the scheduler step of the last pass
	collecting bool  // inside a pass: propose records wants, drafts nothing
	wants      []draftWant
	budget     int // most catch-up rows in one pass's first forward
	// longBudget bounds, within budget, the rows of long catch-ups (a
	// prompt, a rebuild after release): they stall every stream in the
	// step as a prompt chunk does, so they get the scheduler's prefill cap.
	longBudget int
	batch      kernels.Batch
	live       []*Sequence // the pass's sequences in id order (scratch)

	draftClock

	// Counters for tests and benchmarks.
	forwards, rows int64
	failures       int64 // passes whose draft forward failed: no drafts that step
}

type draftWant struct {
	s *Sequence
	n int
}

// draftSeq is one sequence's draft state.
type draftSeq struct {
	table kvcache.Table
	// at is len(Tokens) when out was drafted; computed counts the positions
	// whose KV the draft holds: Tokens[:at] and then out[:computed-at].
	at, computed int
	prompt       int     // the request's prompt length (kernels.SeqRows.Prompt)
	out          []int32 // the drafts proposed at at
	ok           bool    // out is this step's proposal (or last step's, unused)
	idle         int     // steps since it last drafted, while not speculating
}

// newDrafter checks cfg's draft model against the target and sizes its
// pool; nil when cfg does not ask for one.
func newDrafter(target Model, cfg *Config) (*drafter, error) {
	sc := &cfg.Speculate
	if sc.Assistant != nil {
		return nil, nil // assistant.go's
	}
	if sc.Method != "draft" {
		if sc.Draft != nil || sc.DraftBlocks != 0 {
			return nil, fmt.Errorf("%w: a draft model is given but the speculative method is %q, not draft", ErrConfig, sc.Method)
		}
		return nil, nil
	}
	m := sc.Draft
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: speculative method draft without a draft model", ErrConfig)
	case m.VocabSize() != target.VocabSize():
		return nil, fmt.Errorf("%w: draft model vocab %d, target %d: a draft must share the target's tokenizer", ErrConfig, m.VocabSize(), target.VocabSize())
	case m.ContextLen() <= 1:
		return nil, fmt.Errorf("%w: draft model context %d", ErrConfig, m.ContextLen())
	}
	if n, _ := stateSlots(m); n > 0 {
		// A recurrent state cannot be rolled back to the verified length.
		return nil, fmt.Errorf("%w: a draft model with recurrent state cannot be rolled back", ErrConfig)
	}
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: sc.DraftBlocks, BlockSize: cfg.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: draft KV: %w", ErrConfig, err)
	}
	return &drafter{model: m, pool: pool, bs: cfg.BlockSize, ctx: m.ContextLen(), seqs: make(map[*Sequence]*draftSeq)}, nil
}

// draftProbeEvery is how many steps apart a sequence that is not
// speculating (spec.go's shadow) runs the draft to see whether it would
// have been right: unlike an n-gram lookup a draft forward costs a good
// part of a step, and an off sequence is one whose drafts did not pay.
const draftProbeEvery = 8

// propose is spec.go's hook: up to want greedy draft tokens for s, from
// this step's pass (made on the step's first call); want 0 is a shadow
// proposal of one token, made only every draftProbeEvery steps.
func (d *drafter) propose(e *Engine, s *Sequence, want int) []int32 {
	if d.collecting {
		if !e.cfg.Speculate.Fixed {
			want = d.worth(e, s, want)
		}
		if want == 0 {
			ds := d.seqs[s]
			if ds == nil {
				ds = &draftSeq{prompt: len(s.req.Prompt)}
				d.seqs[s] = ds
			}
			if ds.idle++; ds.idle < draftProbeEvery {
				return nil
			}
		}
		d.wants = append(d.wants, draftWant{s, max(want, 1)})
		return nil
	}
	want = max(want, 1)
	if st := e.sched.Stats().Steps; st != d.step {
		consecutive := st == d.step+1
		d.step = st
		d.pass(e, consecutive)
	}
	ds := d.seqs[s]
	if ds == nil || !ds.ok || ds.at != len(s.sq.Tokens) {
		return nil
	}
	return ds.out[:min(want, len(ds.out))]
}

// draftClock times a proposer that runs forwards of its own (a draft
// model, an MTP head, an assistant) beside the target's step, for worth.
type draftClock struct {
	// Seconds, exponentially weighted: one draft forward, and the target's
	// part of a step; passTime is the last pass's.
	forwardTime, targetTime float64
	targetSteps             int
	passTime                time.Duration
	timed                   time.Duration // this pass's draft-token forwards
	timedN                  int
}

// worth trims spec.go's want for s by the proposer's own cost, which the
// row-cost fit does not see: each draft token costs a draft forward (the
// whole batch's, as the target's step is), so draft i is worth proposing
// while α^i > c + r, r being a draft forward's time over the target's part
// of a step. 0: not worth it; the sequence then only probes.
func (d *draftClock) worth(e *Engine, s *Sequence, want int) int {
	a, c := s.spec.alpha(), e.specCost.cost()
	if d.targetTime > 0 {
		c += d.forwardTime / d.targetTime
	}
	n := 0
	for p := a; n < want && p > c; p *= a {
		n++
	}
	return n
}

// beginPass starts the timing of a proposer's pass; the function it
// returns, deferred, ends it. consecutive: the previous step ran a pass
// too (its time is not all the target's).
func (d *draftClock) beginPass(e *Engine, consecutive bool) (end func()) {
	if !consecutive {
		d.passTime = 0
	}
	start := time.Now()
	d.timed, d.timedN = 0, 0
	return func() {
		last := e.st.LastStep
		if e.st.LastBatchRows > e.st.LastBatchSeqs*(1+e.cfg.Speculate.K) {
			last = 0 // it carried prompt chunks: not a decode step's time
		}
		d.timeStep(last, time.Since(start))
	}
}

// liveByID refills buf with e's live sequences in id order, so a pass
// lays its batch out the same way every time.
func liveByID(e *Engine, buf []*Sequence) []*Sequence {
	buf = buf[:0]
	for s := range e.live {
		buf = append(buf, s)
	}
	slices.SortFunc(buf, func(a, b *Sequence) int { return cmp.Compare(a.id, b.id) })
	return buf
}

// timeStep updates the forward and target times worth reads: the last
// step's time less its pass (d.passTime) is the target's part.
func (d *draftClock) timeStep(last, pass time.Duration) {
	const decay = 0.9
	if t := (last - d.passTime).Seconds(); last > 0 && t > 0 {
		d.targetTime = d.targetTime*decay + t*(1-decay)
		if d.targetSteps++; d.targetSteps == 1 {
			d.targetTime = t
		}
	}
	if d.timedN > 0 {
		t := d.timed.Seconds() / float64(d.timedN)
		if d.forwardTime == 0 {
			d.forwardTime = t
		}
		d.forwardTime = d.forwardTime*decay + t*(1-decay)
	}
	d.passTime = pass
}

// dropPreempted gives back the draft blocks of the sequences the step's
// plan preempted: they recompute from scratch, and until then the blocks
// would only crowd the running ones out of the draft pool. Nil-safe.
func (d *drafter) dropPreempted(plan *scheduler.Plan) {
	if d == nil {
		return
	}
	for _, q := range plan.Preempted {
		d.release(owner(q))
	}
}

// release gives s's draft blocks back; nil-safe.
func (d *drafter) release(s *Sequence) {
	if d == nil {
		return
	}
	if ds := d.seqs[s]; ds != nil {
		d.pool.Free(&ds.table)
		delete(d.seqs, s)
	}
}

// pass drafts for every decoding sequence that wants drafts this step.
// consecutive: the previous step ran a pass too (its time is not all the
// target's).
func (d *drafter) pass(e *Engine, consecutive bool) {
	if d.budget == 0 {
		sc := e.sched.Config()
		d.budget, d.longBudget = sc.MaxBatchTokens, sc.MaxPrefillTokensWithDecodes
	}
	d.live = liveByID(e, d.live)
	defer d.beginPass(e, consecutive)()
	d.wants = d.wants[:0]
	d.collecting = true
	for _, s := range d.live {
		q := &s.sq
		if q.State() != scheduler.StateRunning {
			d.release(s) // preempted: it recomputes from scratch anyway
			continue
		}
		if q.NumComputed() == len(q.Tokens)-1 { // decoding
			e.propose(q, e.cfg.Speculate.K)
		}
	}
	d.collecting = false
	if err := d.draft(e); err != nil {
		// Drafts only speed the target up: a failing draft model costs this
		// step its drafts, and the KV it may have half written.
		d.failures++
		if d.failures&(d.failures-1) == 0 { // the 1st, 2nd, 4th, …: seen, never a flood
			slog.Warn("engine: draft model failed; its steps go without drafts", "err", err, "failures", d.failures)
		}
		for s := range d.seqs {
			d.release(s)
		}
	}
}

// draft runs the pass's forwards.
func (d *drafter) draft(e *Engine) error {
	b := &d.batch
	resetBatch(b)
	budget, long := d.budget, d.longBudget
	var active []*draftSeq // those whose catch-up reached their end, in wants order
	var wants []int
	for _, w := range d.wants {
		s, q := w.s, &w.s.sq
		ds := d.seqs[s]
		if ds == nil {
			ds = &draftSeq{prompt: len(s.req.Prompt)}
			d.seqs[s] = ds
		}
		ds.idle = 0
		l := len(q.Tokens)
		if ds.ok && ds.at == l && len(ds.out) >= w.n {
			continue // drafted at this length already (its decode was not scheduled)
		}
		// Keep the KV of the drafts the sequence went on to take.
		fed := ds.computed - ds.at
		keep := ds.at
		for i := 0; i < fed && ds.at+i < l && ds.out[i] == q.Tokens[ds.at+i]; i++ {
			keep++
		}
		ds.computed = min(ds.computed, keep, l-1) // at least the newest token is fed: its row gives the first draft
		ds.ok, ds.out, ds.at = false, ds.out[:0], l
		d.pool.Truncate(&ds.table, ds.computed)
		n := min(l-ds.computed, budget)
		if n > draftProbeEvery+2 { // past a probe's or an accepted run's catch-up
			n = min(n, long)
			long -= n
		}
		if n <= 0 || l > d.ctx {
			continue
		}
		if !d.pool.Allocate(&ds.table, nil, ds.computed+n, 0) {
			d.release(s) // no room: it drafts nothing until there is
			continue
		}
		d.addRows(b, ds, q.Tokens[ds.computed:ds.computed+n])
		budget -= n
		ds.computed += n
		if ds.computed == l {
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
			active = append(active, ds)
			wants = append(wants, w.n)
		}
	}
	for len(b.Tokens) > 0 {
		t0 := time.Now()
		logits, err := d.forward(b)
		if err != nil {
			return err
		}
		if len(b.Tokens) <= 2*len(b.Seqs) {
			// A draft token's forward: a catch-up longer than the newest
			// token and one accepted draft is not what worth prices.
			d.timed += time.Since(t0)
			d.timedN++
		}
		vocab := d.model.VocabSize()
		if len(logits) < len(b.LogitRows)*vocab {
			return fmt.Errorf("draft model returned %d logits, want %d", len(logits), len(b.LogitRows)*vocab)
		}
		for i, ds := range active {
			ds.out = append(ds.out, argmax(logits[i*vocab:(i+1)*vocab]))
			ds.ok = true
		}
		// The next forward feeds back the drafts of those wanting more.
		resetBatch(b)
		next, nextWants := active[:0], wants[:0]
		for i, ds := range active {
			pos := ds.at + len(ds.out) - 1
			if len(ds.out) >= wants[i] || pos+1 > d.ctx || !d.pool.Allocate(&ds.table, nil, pos+1, 0) {
				continue
			}
			d.addRows(b, ds, ds.out[len(ds.out)-1:])
			ds.computed = pos + 1
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
			next, nextWants = append(next, ds), append(nextWants, wants[i])
		}
		active, wants = next, nextWants
	}
	return nil
}

// addRows appends toks at ds's positions from ds.computed on.
func (d *drafter) addRows(b *kernels.Batch, ds *draftSeq, toks []int32) {
	table := ds.table.Blocks()
	bs := int32(d.bs)
	first := len(b.Tokens)
	for i, tok := range toks {
		pos := int32(ds.computed + i)
		b.Tokens = append(b.Tokens, tok)
		b.Positions = append(b.Positions, pos)
		b.Slots = append(b.Slots, table[pos/bs]*bs+pos%bs)
	}
	b.Seqs = append(b.Seqs, kernels.SeqRows{Start: first, End: len(b.Tokens), ContextLen: ds.computed + len(toks),
		Blocks: table, Prompt: ds.prompt})
}

func resetBatch(b *kernels.Batch) {
	b.Tokens, b.Positions, b.Slots = b.Tokens[:0], b.Positions[:0], b.Slots[:0]
	clear(b.Seqs)
	b.Seqs, b.LogitRows = b.Seqs[:0], b.LogitRows[:0]
}

func (d *drafter) forward(b *kernels.Batch) (logits []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("draft forward", r)
		}
	}()
	d.forwards++
	d.rows += int64(len(b.Tokens))
	return d.model.Forward(b)
}
