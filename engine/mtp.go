package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// Speculation with the target's own multi-token-prediction head
// (SpecConfig.Method "mtp"; Qwen3.5/3.6's nextn block, models.Qwen35MTP):
// the head reads the target's final-normed hidden state at position t and
// the embedding of token t+1 and guesses token t+2, then chains on its own
// output state for the tokens after. Its guesses are greedy (a point mass,
// so spec.go's verify keeps the target's distribution), and the
// self-tuning and what is not speculated are spec.go's, as for a draft
// model (draft.go), whose pass this follows.
//
// The head has a one-layer KV of its own, paged by a kvcache.Pool of its
// own, one table per sequence; its row at position p holds the pair
// (h(p−1), token p). Those pairs can be made only while the target's
// forward that computed h(p−1) is its latest (it keeps the rows on the
// device for the head), so every target step leaves, for each of its
// items, the catch-up of the positions from the head's last valid one
// through the one after the item's last verified row (after), and the
// next step writes them before its own target forward: in the first
// forward of its pass (propose, on the step's first call, as draft.go's),
// where a sequence's last catch-up row is its newest token's and gives its
// first draft, or else in a forward of their own (flush). What the target
// did not compute there (a prefix-cache hit's cached prompt, a sequence's
// first row) pairs with a zero h, as llama.cpp's first pending row: the
// head sees the tokens alone. The drafts then chain on the head's own
// state; the KV they write past the sequence's tokens is not counted
// (computed stays at its length) and is overwritten by the next catch-up.
// A sequence whose newest token's h is not in the latest step (it was not
// scheduled) drafts nothing that step.

// MTPHead is a target model's multi-token-prediction head readied to run
// (models.Qwen35MTP), bound to the target: every target forward leaves its
// rows' hidden states for it.
type MTPHead interface {
	// Forward runs the head over b (slots in its own KV store), row i
	// pairing b.Tokens[i] with hidden row hidden[i]: a row of the target's
	// latest forward by batch row (negative: a zero row), or with fromHead
	// the state of the head's previous Forward's logit row hidden[i]. It
	// returns the logits of b.LogitRows, valid until the next call.
	Forward(b *kernels.Batch, hidden []int32, fromHead bool) ([]float32, error)
	VocabSize() int
	MaxRows() int      // rows one Forward may carry
	MaxLogitRows() int // logit rows one Forward may ask for
	KVBlocks() int     // the head's KV store's blocks
	BlockSize() int    // and block size, the engine's
}

// mtpDrafter is Method "mtp"'s head and its KV memory; loop-owned.
type mtpDrafter struct {
	head MTPHead
	pool *kvcache.Pool
	bs   int
	ctx  int
	seqs map[*Sequence]*mtpSeq
	gen  int64 // target forwards seen: an h row is good while its gen is the latest
	// pending are the sequences with a catch-up to write before the next
	// target forward (after, flush).
	pending []*Sequence

	step       int64 // the scheduler step of the last pass
	collecting bool
	wants      []draftWant
	live       []*Sequence
	batch      kernels.Batch
	hidden     []int32

	draftClock // one chained forward's time and the target's part of a step

	forwards, rows, failures int64
}

// mtpSeq is one sequence's head state.
type mtpSeq struct {
	table    kvcache.Table
	computed int   // positions whose (h, token) row the head's KV holds
	hRow     int32 // the latest target step's row of h(len(Tokens)−2); −1 none
	hGen     int64
	// The catch-up the latest target step left: positions computed…end−1,
	// h(p−1) its row row0+p−1−a for p−1 ≥ a, a zero row below.
	catchA, catchEnd int
	catchRow0        int32
	catchGen         int64
	prompt           int
	at               int     // len(Tokens) when out was drafted
	out              []int32 // the drafts proposed at at
	ok               bool
	idle             int
}

// newMTPDrafter checks cfg's MTP head and sizes its pool; nil when cfg does
// not ask for one.
func newMTPDrafter(target Model, cfg *Config) (*mtpDrafter, error) {
	sc := &cfg.Speculate
	if sc.Method != "mtp" {
		if sc.MTP != nil {
			return nil, fmt.Errorf("%w: an MTP head is given but the speculative method is %q, not mtp", ErrConfig, sc.Method)
		}
		return nil, nil
	}
	h := sc.MTP
	switch {
	case h == nil:
		return nil, fmt.Errorf("%w: speculative method mtp on a model without a multi-token-prediction (nextn) head", ErrConfig)
	case h.VocabSize() != target.VocabSize():
		return nil, fmt.Errorf("%w: MTP head vocab %d, target %d", ErrConfig, h.VocabSize(), target.VocabSize())
	case h.BlockSize() != cfg.BlockSize:
		return nil, fmt.Errorf("%w: MTP head KV block size %d, the engine's %d", ErrConfig, h.BlockSize(), cfg.BlockSize)
	case h.MaxRows() < 2 || h.MaxLogitRows() < 1:
		return nil, fmt.Errorf("%w: MTP head of %d rows, %d logit rows a forward", ErrConfig, h.MaxRows(), h.MaxLogitRows())
	}
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: h.KVBlocks(), BlockSize: cfg.BlockSize})
	if err != nil {
		return nil, fmt.Errorf("%w: MTP KV: %w", ErrConfig, err)
	}
	return &mtpDrafter{head: h, pool: pool, bs: cfg.BlockSize, ctx: target.ContextLen(), seqs: make(map[*Sequence]*mtpSeq)}, nil
}

func (d *mtpDrafter) seq(s *Sequence) *mtpSeq {
	ds := d.seqs[s]
	if ds == nil {
		ds = &mtpSeq{prompt: len(s.req.Prompt), hRow: -1}
		d.seqs[s] = ds
	}
	return ds
}

// release gives s's head blocks back; nil-safe.
func (d *mtpDrafter) release(s *Sequence) {
	if d == nil {
		return
	}
	if ds := d.seqs[s]; ds != nil {
		d.pool.Free(&ds.table)
		delete(d.seqs, s)
	}
}

// dropPreempted releases the sequences plan preempted: they recompute
// from scratch. Nil-safe.
func (d *mtpDrafter) dropPreempted(plan *scheduler.Plan) {
	if d == nil {
		return
	}
	for _, q := range plan.Preempted {
		d.release(owner(q))
	}
}

// stepFailed forgets the failed step's h rows. Nil-safe.
func (d *mtpDrafter) stepFailed() {
	if d != nil {
		d.gen++
	}
}

// after records, after a delivered target step b of plan, each item's
// catch-up: its new (h, token) pairs, written by the next pass or flush.
// None for a sequence that never drafts (a constrained one, or any on a
// device-sampled engine: spec.go's propose), which would only pay for
// them. Nil-safe.
func (d *mtpDrafter) after(e *Engine, plan *scheduler.Plan, tb *kernels.Batch) {
	if d == nil {
		return
	}
	d.gen++
	d.pending = d.pending[:0]
	for i, it := range plan.Items {
		s, q := owner(it.Seq), it.Seq
		if s.finished || q.State() != scheduler.StateRunning || e.dev != nil || s.req.Constraint != nil {
			d.release(s)
			continue
		}
		ds := d.seq(s)
		ds.hRow = -1
		l, a := len(q.Tokens), it.Start
		row0 := int32(tb.Seqs[i].Start) // the batch row of position a
		last := min(a+it.N-1, l-2)      // the last row whose h is of the sequence's own tokens
		if last >= a && last == l-2 {
			ds.hRow, ds.hGen = row0+int32(last-a), d.gen
		}
		ds.catchA, ds.catchRow0, ds.catchEnd, ds.catchGen = a, row0, last+2, d.gen // pairs through position last+1
		if ds.computed < ds.catchEnd {
			d.pending = append(d.pending, s)
		}
	}
}

// flush writes the catch-ups no pass has, before the target's next
// forward overwrites the rows they read. Nil-safe.
func (d *mtpDrafter) flush() {
	if d == nil {
		return
	}
	if err := d.writePending(); err != nil {
		d.fail(err)
	}
}

// writePending runs the pending catch-ups in forwards of their own.
func (d *mtpDrafter) writePending() error {
	if len(d.pending) == 0 {
		return nil
	}
	b := &d.batch
	resetBatch(b)
	d.hidden = d.hidden[:0]
	err := d.catchUps(b)
	if err == nil && len(b.Tokens) > 0 {
		err = d.forward(b, false)
	}
	resetBatch(b)
	d.hidden = d.hidden[:0]
	return err
}

// catchUps adds the pending sequences' catch-up rows to b, running b
// whenever it fills: only writePending's b, which asks no logits, can
// (draft counts its rows first). A sequence without KV room is released.
func (d *mtpDrafter) catchUps(b *kernels.Batch) error {
	for _, s := range d.pending {
		ds := d.seqs[s]
		if ds == nil || s.finished || ds.catchGen != d.gen || ds.computed >= ds.catchEnd {
			continue
		}
		if err := d.catchUp(b, s, ds); err != nil {
			return err
		}
	}
	d.pending = d.pending[:0]
	return nil
}

// catchUp adds s's catch-up rows to b, running b first whenever it is
// full; a sequence without room is released.
func (d *mtpDrafter) catchUp(b *kernels.Batch, s *Sequence, ds *mtpSeq) error {
	end := ds.catchEnd
	if end > d.ctx || !d.pool.Allocate(&ds.table, nil, end, 0) {
		d.release(s) // no room: it drafts nothing until there is
		return nil
	}
	toks := s.sq.Tokens
	for p := ds.computed; p < end; {
		room := d.head.MaxRows() - len(b.Tokens)
		if room == 0 {
			if err := d.forward(b, false); err != nil {
				return err
			}
			resetBatch(b)
			d.hidden = d.hidden[:0]
			continue
		}
		n := min(room, end-p)
		d.addRows(b, ds, p, toks[p:p+n])
		for r := p; r < p+n; r++ {
			h := int32(-1)
			if r-1 >= ds.catchA {
				h = ds.catchRow0 + int32(r-1-ds.catchA)
			}
			d.hidden = append(d.hidden, h)
		}
		p += n
	}
	ds.computed = end
	return nil
}

// propose is spec.go's hook, as drafter.propose: up to want greedy drafts
// for s from this step's pass; want 0 is a shadow proposal of one token,
// made only every draftProbeEvery steps.
func (d *mtpDrafter) propose(e *Engine, s *Sequence, want int) []int32 {
	if d.collecting {
		if !e.cfg.Speculate.Fixed {
			want = d.worth(e, s, want)
		}
		if want == 0 {
			ds := d.seq(s)
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

// pass drafts for every decoding sequence that wants drafts this step.
func (d *mtpDrafter) pass(e *Engine, consecutive bool) {
	d.live = liveByID(e, d.live)
	defer d.beginPass(e, consecutive)()
	d.wants = d.wants[:0]
	d.collecting = true
	for _, s := range d.live {
		q := &s.sq
		if q.State() == scheduler.StateRunning && q.NumComputed() == len(q.Tokens)-1 {
			e.propose(q, e.cfg.Speculate.K)
		}
	}
	d.collecting = false
	if err := d.draft(); err != nil {
		d.fail(err)
	}
}

// fail drops every sequence's head state: the head only speeds the target
// up, and a failed forward may have left its KV half written.
func (d *mtpDrafter) fail(err error) {
	d.failures++
	if d.failures&(d.failures-1) == 0 {
		slog.Warn("engine: MTP head failed; its steps go without drafts", "err", err, "failures", d.failures)
	}
	for s := range d.seqs {
		d.release(s)
	}
}

// draft runs the pass's chained forwards. The first carries every
// pending catch-up (after): a wanting sequence's ends at its newest token,
// whose row gives its first draft; where they would not fit in one forward
// they are written first (flush) and the newest tokens' rows written again.
func (d *mtpDrafter) draft() error {
	b := &d.batch
	resetBatch(b)
	d.hidden = d.hidden[:0]
	rows := len(d.wants)
	for _, s := range d.pending {
		if ds := d.seqs[s]; ds != nil && ds.catchGen == d.gen {
			rows += max(ds.catchEnd-ds.computed, 0)
		}
	}
	if rows > d.head.MaxRows() {
		if err := d.writePending(); err != nil {
			return err
		}
	}
	var active []*mtpSeq
	var wants []int
	for _, w := range d.wants {
		if len(active) == d.head.MaxLogitRows() || len(b.Tokens) == d.head.MaxRows() {
			break
		}
		s, q := w.s, &w.s.sq
		ds := d.seq(s)
		ds.idle = 0
		l := len(q.Tokens)
		if ds.ok && ds.at == l && len(ds.out) >= w.n {
			continue // drafted at this length already
		}
		ds.ok, ds.out, ds.at = false, ds.out[:0], l
		// The newest token's pair, h(l−2) from the latest step.
		if ds.hRow < 0 || ds.hGen != d.gen || l > d.ctx {
			continue
		}
		switch {
		case ds.catchGen == d.gen && ds.computed < ds.catchEnd && ds.catchEnd == l:
			if err := d.catchUp(b, s, ds); err != nil {
				return err
			}
			if d.seqs[s] == nil {
				continue // released: no room
			}
		case ds.computed >= l:
			d.addRows(b, ds, l-1, q.Tokens[l-1:]) // written already: the same row again
			d.hidden = append(d.hidden, ds.hRow)
		default:
			continue
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		active, wants = append(active, ds), append(wants, w.n)
	}
	if err := d.catchUps(b); err != nil { // the others', KV only
		return err
	}
	fromHead := false
	for len(b.Tokens) > 0 {
		t0 := time.Now()
		logits, err := d.forwardLogits(b, fromHead)
		if err != nil {
			return err
		}
		d.timed += time.Since(t0)
		d.timedN++
		vocab := d.head.VocabSize()
		if len(logits) < len(b.LogitRows)*vocab {
			return fmt.Errorf("MTP head returned %d logits, want %d", len(logits), len(b.LogitRows)*vocab)
		}
		for i, ds := range active {
			ds.out = append(ds.out, argmax(logits[i*vocab:(i+1)*vocab]))
			ds.ok = true
		}
		resetBatch(b)
		d.hidden = d.hidden[:0]
		next, nextWants := active[:0], wants[:0]
		for i, ds := range active {
			pos := ds.at + len(ds.out) - 1 // the newest draft's position
			if len(ds.out) >= wants[i] || pos+1 > d.ctx || !d.pool.Allocate(&ds.table, nil, pos+1, 0) {
				continue
			}
			d.addRows(b, ds, pos, ds.out[len(ds.out)-1:])
			d.hidden = append(d.hidden, int32(i)) // its logit row in the forward just run
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
			next, nextWants = append(next, ds), append(nextWants, wants[i])
		}
		active, wants = next, nextWants
		fromHead = true
	}
	// The drafts' KV is not the sequence's: give back the blocks past it.
	for _, w := range d.wants {
		if ds := d.seqs[w.s]; ds != nil {
			d.pool.Truncate(&ds.table, ds.computed)
		}
	}
	return nil
}

// addRows appends toks at positions from on of ds's table.
func (d *mtpDrafter) addRows(b *kernels.Batch, ds *mtpSeq, from int, toks []int32) {
	table := ds.table.Blocks()
	bs := int32(d.bs)
	first := len(b.Tokens)
	for i, tok := range toks {
		pos := int32(from + i)
		b.Tokens = append(b.Tokens, tok)
		b.Positions = append(b.Positions, pos)
		b.Slots = append(b.Slots, table[pos/bs]*bs+pos%bs)
	}
	b.Seqs = append(b.Seqs, kernels.SeqRows{Start: first, End: len(b.Tokens), ContextLen: from + len(toks),
		Blocks: table, Prompt: ds.prompt})
}

func (d *mtpDrafter) forward(b *kernels.Batch, fromHead bool) error {
	_, err := d.forwardLogits(b, fromHead)
	return err
}

func (d *mtpDrafter) forwardLogits(b *kernels.Batch, fromHead bool) (logits []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("MTP forward", r)
		}
	}()
	d.forwards++
	d.rows += int64(len(b.Tokens))
	return d.head.Forward(b, d.hidden, fromHead)
}
