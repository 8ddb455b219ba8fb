package engine

import (
	"cmp"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/scheduler"
)

// step runs one iteration: schedule → build batch → forward → sample → deliver.
func (e *Engine) step() {
	start := time.Now()
	plan := e.sched.Schedule()
	e.draft.dropPreempted(plan)
	e.mtp.dropPreempted(plan)
	for _, q := range plan.Unfit { // the length limit makes this unreachable; never spin on it
		e.finish(owner(q), Result{Finish: FinishError, Err: fmt.Errorf("engine: sequence of %d tokens cannot fit the KV pool", len(q.Tokens))})
	}
	if len(plan.Items) == 0 {
		return
	}
	b := e.buildBatch(plan, start)
	// mtp.go: the head's catch-ups no pass wrote, before this forward replaces the rows they read.
	e.mtp.flush()
	masks := e.startMasks(plan)                  // beside the forward pass, joined before anyone reads them
	logits, err := e.forwardStep(b, plan, masks) // host logits or device tokens (devsample.go)
	if err == nil {
		var perr error
		err = cmp.Or(e.guard("prompt logprobs", func() { perr = e.promptLogprobs(plan, b) }), perr)
	}
	if err == nil {
		err = e.guard("delivery", func() {
			e.sched.Advance(plan)
			e.forkGroups(plan) // group.go
			e.signalProgress(plan)
			e.deliver(plan, logits, masks)
		})
	} else {
		err = fmt.Errorf("engine: forward: %w", err)
	}
	if err != nil {
		e.mtp.stepFailed()
		e.stepFailed(plan, err)
	} else {
		e.mtp.after(e, plan, b) // mtp.go: the head's KV rows this step's rows make
	}
	masks.release()
	for _, it := range plan.Items { // after delivery: see Sequence.Steps
		owner(it.Seq).steps.Add(1)
	}
	d := time.Since(start)
	if err == nil {
		e.observeStep(plan, d) // spec.go
	}
	e.st.LastStep, e.st.LastBatchRows, e.st.LastBatchSeqs = d, len(b.Tokens), len(b.Seqs)
	e.st.BusyTime += d
	if o := e.cfg.Observer; o != nil {
		o.OnStep(d, len(b.Tokens))
	}
}

func owner(q *scheduler.Seq) *Sequence { return q.Owner.(*Sequence) }

// buildBatch lays the plan out as rows, reusing the previous step's slices:
//
//	rows     | seq A: positions 40…47 (prefill chunk) | seq B: 12 (decode) | …
//	slot     = table[pos/BlockSize]*BlockSize + pos%BlockSize
//	logits   for the last row of each sequence whose chunk reaches its end
func (e *Engine) buildBatch(plan *scheduler.Plan, now time.Time) *kernels.Batch {
	b := &e.batch
	b.Tokens, b.Positions, b.Slots, b.WindowSlots = b.Tokens[:0], b.Positions[:0], b.Slots[:0], b.WindowSlots[:0]
	clear(b.Seqs) // drop the previous step's block tables
	b.Seqs, b.LogitRows = b.Seqs[:0], b.LogitRows[:0]
	bs := int32(e.cfg.BlockSize)
	for _, it := range plan.Items {
		s := owner(it.Seq)
		s.steps.Add(1) // before admitted closes: the stall clock starting there sees the step
		if !s.started {
			s.started, s.startedAt = true, now
			e.queued.Add(-1)
			close(s.admitted) // once: started is never reset; closing never blocks the loop
		}
		// Anything but a decode of the token sampled last step is prefill.
		if decode := it.N == 1 && it.Start >= len(s.req.Prompt)+len(s.req.Resume); !decode {
			e.st.PromptTokens += int64(it.N)
		}
		table := it.Seq.Blocks()
		first := len(b.Tokens)
		known := int32(len(it.Seq.Tokens)) // positions past it are the item's drafts (spec.go)
		for pos := int32(it.Start); pos < int32(it.Start+it.N); pos++ {
			if pos < known {
				b.Tokens = append(b.Tokens, it.Seq.Tokens[pos])
			} else {
				b.Tokens = append(b.Tokens, it.Draft[pos-known])
			}
			b.Positions = append(b.Positions, pos)
			b.Slots = append(b.Slots, table[pos/bs]*bs+pos%bs)
		}
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: first, End: len(b.Tokens), ContextLen: it.Start + it.N, Blocks: table,
			Prompt: len(s.req.Prompt), State: it.Seq.StateSlot()})
		e.stateRows(&b.Seqs[len(b.Seqs)-1], it) // state.go
		windowRows(b, it.Seq, it.Start, it.N, bs)
		if it.Sample {
			for r := len(b.Tokens) - 1 - len(it.Draft); r < len(b.Tokens); r++ { // a verify row per draft
				b.LogitRows = append(b.LogitRows, int32(r))
			}
		}
	}
	return b
}

// deliver samples a token for each sequence whose chunk reached its end
// (several where it carried drafts: spec.go), sends it, and ends sequences
// that stop or reach their length.
func (e *Engine) deliver(plan *scheduler.Plan, logits *stepLogits, masks *maskJobs) {
	now := time.Now()
	row := 0
	for _, it := range plan.Items {
		if !it.Sample {
			continue
		}
		if len(it.Draft) > 0 {
			e.verify(it, logits, row, now)
			row += 1 + len(it.Draft)
			continue
		}
		s := owner(it.Seq)
		tok, lp, err := e.sampleRow(s, logits, masks, row)
		row++
		if err != nil {
			e.end(s, Result{Finish: FinishError, Err: err})
			continue
		}
		e.shadow(s, tok) // spec.go: would this step's draft have been right?
		e.emit(s, tok, lp, now)
	}
}

// sampleRow picks s's next token from logit row row: the device's choice,
// or sampled here after the constraint mask and s's logit controls.
func (e *Engine) sampleRow(s *Sequence, logits *stepLogits, masks *maskJobs, row int) (int32, *Logprob, error) {
	tok, lp := logits.token(row), logits.logprob(row)
	if tok >= 0 {
		return tok, lp, nil
	}
	l := logits.row(row, e.model.VocabSize())
	if err := masks.apply(s, l); err != nil {
		return 0, nil, err
	}
	undo := s.adjust(l, e.cfg.EOG)
	tok = s.sampler.sample(l, s.sq.Tokens)
	restore(l, undo)
	return tok, s.logprob(l, tok), nil
}

// emit appends tok to s and sends it, or ends s on a stop token, a
// constraint error or its length; it reports whether s goes on.
func (e *Engine) emit(s *Sequence, tok int32, lp *Logprob, now time.Time) bool {
	s.sq.Tokens = append(s.sq.Tokens, tok)
	e.st.GenTokens++
	if err := e.commitConstraint(s, tok); err != nil {
		e.end(s, Result{Finish: FinishError, Err: err})
		return false
	}
	if s.ends(tok, e.cfg.EOG) {
		e.end(s, Result{Finish: FinishStop}) // the stop token is counted, not delivered
		return false
	}
	// Never blocks: out holds maxLen - len(prompt+resume) tokens and the
	// sequence ends at maxLen.
	s.out <- Token{ID: tok, Index: s.emitted, Logprob: lp}
	s.emitted++
	if o := e.cfg.Observer; o != nil {
		if s.emitted == len(s.req.Resume)+1 {
			o.OnFirstToken(s, now)
		} else {
			o.OnToken(s, now)
		}
	}
	if len(s.sq.Tokens) >= s.maxLen {
		e.end(s, Result{Finish: FinishLength})
		return false
	}
	return true
}

// signalProgress tells the readers of sequences whose prompt advanced this
// step; a decode's progress is the token deliver sends.
func (e *Engine) signalProgress(plan *scheduler.Plan) {
	for _, it := range plan.Items {
		if it.Decode {
			continue
		}
		select {
		case owner(it.Seq).progress <- struct{}{}:
		default: // a signal is already waiting: one says as much as two
		}
	}
}

// failBatch ends the batch's sequences with err; other sequences and the
// engine carry on.
func (e *Engine) failBatch(plan *scheduler.Plan, err error) {
	for _, it := range plan.Items {
		e.end(owner(it.Seq), Result{Finish: FinishError, Err: err})
	}
}

// end takes s out of the scheduler (its blocks return to the pool) and finishes it.
func (e *Engine) end(s *Sequence, r Result) {
	e.sched.Finish(&s.sq)
	e.finish(s, r)
}
