package scheduler

// Speculative decoding: a decoding sequence may carry draft tokens, guesses
// at its next tokens, verified in the same step (one row each, every row
// sampled). Drafts are the last thing a step takes and the first thing it
// gives back: they get only the budget and logit rows left once decodes,
// prompt chunks and admissions are in, never preempt anyone, leave
// admission's watermark alone, and their KV leaves the pool as soon as
// verification rejects it (Accept).

// scheduleDrafts asks the owner for drafts for the step's decodes, once
// everything else is in the plan, within the token budget and the logit
// rows left, and only where the pool has room without preempting.
func (s *Scheduler) scheduleDrafts() {
	if s.cfg.Propose == nil || !s.pool.CanRollBack() {
		return
	}
	rows := s.cfg.MaxLogitRows
	for _, it := range s.plan.Items {
		if it.Sample {
			rows--
		}
	}
	for i := range s.plan.Items {
		room := min(s.budget, rows)
		if room <= 0 {
			return
		}
		it := &s.plan.Items[i]
		if !it.Decode {
			continue
		}
		d := s.cfg.Propose(it.Seq, room)
		if len(d) == 0 {
			continue
		}
		d = d[:min(len(d), room)]
		q := it.Seq
		if !s.pool.Allocate(&q.table, nil, q.computed+1+len(d), s.reserve) {
			continue
		}
		it.Draft, it.N = d, 1+len(d)
		s.plan.Tokens += len(d)
		s.budget -= len(d)
		rows -= len(d)
	}
}

// Accept records, after Advance, that verification kept the first n of
// running q's drafts this step (the owner has appended them to q.Tokens,
// with the token sampled after them): their KV joins the computed tokens,
// and the blocks past them go back to the pool at once. Call it for every
// sequence whose item carried drafts and is still running, n = 0 when none
// was kept.
func (s *Scheduler) Accept(q *Seq, n int) {
	if q.state != StateRunning {
		return
	}
	q.computed = min(q.computed+max(n, 0), len(q.Tokens))
	s.pool.Commit(&q.table, q.Tokens, q.computed)
	s.pool.Truncate(&q.table, q.computed)
}
