package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// Speculation with an assistant drafter (SpecConfig.Assistant: method
// "draft" whose draft model is a Gemma 4 assistant, as llama.cpp's
// draft-mtp runs one given as its draft model): a small model that drafts
// from the target's own state instead of keeping one of its own. Its first
// draft for a sequence reads the token the sequence has not computed yet
// (at position p) and the target's final hidden row of position p−1 from
// the target's last forward; each next draft reads the previous draft and
// the assistant's own hidden output, at the same position p. Its attention
// reads the target's K/V below p through the sequence's own block table
// and writes nothing, so there is no draft KV to roll back, no catch-up
// and no memory per sequence beyond its drafts. The verify rule, the
// self-tuning and what is not speculated are spec.go's, and a draft
// forward is priced as draft.go prices a draft model's (worth).
//
// A sequence drafts only when the target's last forward computed its
// position p−1: the row whose K/V slot is that position's slot in the
// sequence's table (a slot is written by one sequence a step). One that
// was not in that forward (preempted, or a step that failed) drafts at its
// next step.

// Assistant is SpecConfig.Assistant (models.Gemma4Assistant), bound to the
// engine's model as its target.
type Assistant interface {
	VocabSize() int
	// MaxRows is the most rows one Forward takes.
	MaxRows() int
	// Forward runs a draft row per row of b, each sequence's rows at its
	// ContextLen, reading the target's K/V below it through its Blocks and
	// writing none, and returns their logits ([rows, vocab], valid until
	// the next call). fromTarget: row r's hidden input is the target's
	// final hidden at row rows[r] of its last forward batch; else the
	// hidden output of row rows[r] of the previous Forward.
	Forward(b *kernels.Batch, fromTarget bool, rows []int32) ([]float32, error)
}

// assistDrafter is the assistant proposer; loop-owned.
type assistDrafter struct {
	a    Assistant
	bs   int
	seqs map[*Sequence]*assistSeq

	step       int64 // the scheduler step of the last pass
	collecting bool  // inside a pass: propose records wants, drafts nothing
	wants      []draftWant
	// clock is its step timing and worth (draft.go): an
	// assistant forward is priced as a draft model's is.
	clock  draftClock
	slots  map[int32]int32 // the target's last batch: KV slot → row
	batch  kernels.Batch
	rows   []int32
	active []*assistSeq
	live   []*Sequence

	// Counters for tests and benchmarks.
	forwards, rowsRun, failures int64
}

// assistSeq is one sequence's proposal.
type assistSeq struct {
	at   int     // len(Tokens) when out was drafted
	out  []int32 // the drafts proposed at at
	ok   bool    // out is this step's proposal (or last step's, unused)
	idle int     // steps since it last drafted, while not speculating
	want int
}

// newAssistDrafter checks cfg's assistant against the target; nil when cfg
// does not give one.
func newAssistDrafter(target Model, cfg *Config) (*assistDrafter, error) {
	sc := &cfg.Speculate
	a := sc.Assistant
	switch {
	case a == nil:
		return nil, nil
	case sc.Method != "draft":
		return nil, fmt.Errorf("%w: an assistant drafter is given but the speculative method is %q, not draft", ErrConfig, sc.Method)
	case sc.Draft != nil || sc.DraftBlocks != 0:
		return nil, fmt.Errorf("%w: both a draft model and an assistant drafter: give one", ErrConfig)
	case a.VocabSize() != target.VocabSize():
		return nil, fmt.Errorf("%w: assistant vocab %d, target %d", ErrConfig, a.VocabSize(), target.VocabSize())
	case a.MaxRows() < 1:
		return nil, fmt.Errorf("%w: assistant takes %d rows", ErrConfig, a.MaxRows())
	}
	return &assistDrafter{a: a, bs: cfg.BlockSize, seqs: make(map[*Sequence]*assistSeq), slots: make(map[int32]int32)}, nil
}

// propose is spec.go's hook, as drafter.propose: up to want drafts for s
// from this step's pass; want 0 is a shadow proposal of one token, made
// every draftProbeEvery steps.
func (d *assistDrafter) propose(e *Engine, s *Sequence, want int) []int32 {
	if d.collecting {
		if !e.cfg.Speculate.Fixed {
			want = d.clock.worth(e, s, want)
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
	if st := e.sched.Stats().Steps; st != d.step {
		consecutive := st == d.step+1
		d.step = st
		d.pass(e, consecutive)
	}
	ds := d.seqs[s]
	if ds == nil || !ds.ok || ds.at != len(s.sq.Tokens) {
		return nil
	}
	return ds.out[:min(max(want, 1), len(ds.out))]
}

func (d *assistDrafter) seq(s *Sequence) *assistSeq {
	ds := d.seqs[s]
	if ds == nil {
		ds = &assistSeq{}
		d.seqs[s] = ds
	}
	return ds
}

// release forgets s; nil-safe.
func (d *assistDrafter) release(s *Sequence) {
	if d != nil {
		delete(d.seqs, s)
	}
}

// pass drafts for every decoding sequence that wants drafts this step.
func (d *assistDrafter) pass(e *Engine, consecutive bool) {
	d.live = liveByID(e, d.live)
	defer d.clock.beginPass(e, consecutive)()
	d.wants = d.wants[:0]
	d.collecting = true
	for _, s := range d.live {
		q := &s.sq
		if q.State() == scheduler.StateRunning && q.NumComputed() == len(q.Tokens)-1 { // decoding
			e.propose(q, e.cfg.Speculate.K)
		}
	}
	d.collecting = false
	if err := d.draft(e); err != nil {
		// Drafts only speed the target up: a failing assistant costs the
		// step its drafts.
		d.failures++
		if d.failures&(d.failures-1) == 0 { // the 1st, 2nd, 4th, …: seen, never a flood
			slog.Warn("engine: assistant drafter failed; its steps go without drafts", "err", err, "failures", d.failures)
		}
		for _, ds := range d.seqs {
			ds.ok = false
		}
	}
}

// draft runs the pass's forwards: the first with each sequence's token at
// p and the target's hidden row of p−1, the next ones with the drafts.
func (d *assistDrafter) draft(e *Engine) error {
	tb := &e.batch // the target's last forward; the next is built after this pass
	clear(d.slots)
	for r, slot := range tb.Slots {
		d.slots[slot] = int32(r)
	}
	b, bs := &d.batch, int32(d.bs)
	resetBatch(b)
	d.rows, d.active = d.rows[:0], d.active[:0]
	for _, w := range d.wants {
		s, q := w.s, &w.s.sq
		ds := d.seq(s)
		ds.idle = 0
		l := len(q.Tokens)
		if ds.ok && ds.at == l && len(ds.out) >= w.n {
			continue // drafted at this length already (its decode was not scheduled)
		}
		ds.ok, ds.out, ds.at, ds.want = false, ds.out[:0], l, w.n
		p := int32(l - 1) // the newest token's position: the target has no K/V there yet
		table := q.Blocks()
		if p < 1 || len(d.rows) == d.a.MaxRows() || int(p-1)/d.bs >= len(table) {
			continue
		}
		slot := table[(p-1)/bs]*bs + (p-1)%bs
		r, ok := d.slots[slot]
		if !ok || tb.Positions[r] != p-1 || tb.Tokens[r] != q.Tokens[p-1] {
			continue // the target's last forward did not compute p−1 for it
		}
		b.Tokens = append(b.Tokens, q.Tokens[p])
		b.Positions = append(b.Positions, p)
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: len(b.Tokens) - 1, End: len(b.Tokens), ContextLen: int(p), Blocks: table})
		d.rows = append(d.rows, r)
		d.active = append(d.active, ds)
	}
	fromTarget := true
	vocab := d.a.VocabSize()
	for len(b.Tokens) > 0 {
		t0 := time.Now()
		logits, err := d.forward(b, fromTarget, d.rows)
		if err != nil {
			return err
		}
		d.clock.timed += time.Since(t0)
		d.clock.timedN++
		if len(logits) < len(b.Tokens)*vocab {
			return fmt.Errorf("assistant returned %d logits, want %d", len(logits), len(b.Tokens)*vocab)
		}
		for i, ds := range d.active {
			ds.out = append(ds.out, argmax(logits[i*vocab:(i+1)*vocab]))
			ds.ok = true
		}
		// The next forward feeds back the drafts of those wanting more,
		// each at its sequence's same position, with its row's h_next.
		n := 0
		d.rows = d.rows[:0]
		for i, ds := range d.active {
			if len(ds.out) >= ds.want {
				continue
			}
			b.Tokens[n], b.Positions[n] = ds.out[len(ds.out)-1], b.Positions[i]
			b.Seqs[n] = kernels.SeqRows{Start: n, End: n + 1, ContextLen: b.Seqs[i].ContextLen, Blocks: b.Seqs[i].Blocks}
			d.rows = append(d.rows, int32(i))
			d.active[n] = ds
			n++
		}
		clear(b.Seqs[n:])
		b.Tokens, b.Positions, b.Seqs, d.active = b.Tokens[:n], b.Positions[:n], b.Seqs[:n], d.active[:n]
		fromTarget = false
	}
	return nil
}

func (d *assistDrafter) forward(b *kernels.Batch, fromTarget bool, rows []int32) (logits []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("assistant forward", r)
		}
	}()
	d.forwards++
	d.rowsRun += int64(len(b.Tokens))
	return d.a.Forward(b, fromTarget, rows)
}
