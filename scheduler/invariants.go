package scheduler

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/kvcache"
)

// ErrInvariant reports broken scheduler bookkeeping; only CheckInvariants
// returns it, and it means a bug.
var ErrInvariant = errors.New("scheduler: invariant violated")

// CheckInvariants verifies the queues and the pool: every queue sorted by
// precedence, the tenants' queues and clocks consistent (checkFair), states
// consistent, waiting sequences holding no blocks, running ones holding
// blocks for exactly their computed tokens (or the current plan's), the
// sequence cap kept, and the pool's own invariants with the running tables
// as its only references. Meant for tests, between steps.
func (s *Scheduler) CheckInvariants() error {
	if !slices.IsSortedFunc(s.running, cmpRunning) {
		return fmt.Errorf("%w: running queue out of precedence order", ErrInvariant)
	}
	if err := s.queue.check(); err != nil {
		return err
	}
	if len(s.running) > s.cfg.MaxSeqs {
		return fmt.Errorf("%w: %d running > MaxSeqs %d", ErrInvariant, len(s.running), s.cfg.MaxSeqs)
	}
	tables := make([]*kvcache.Table, 0, len(s.running))
	for _, q := range s.running {
		if q.state != StateRunning || q.computed > len(q.Tokens) {
			return fmt.Errorf("%w: running seq %d: state %v, %d/%d computed", ErrInvariant, q.id, q.state, q.computed, len(q.Tokens))
		}
		if need := s.pool.BlocksFor(q.computed); q.table.Len() < need {
			return fmt.Errorf("%w: seq %d holds %d blocks for %d computed tokens", ErrInvariant, q.id, q.table.Len(), q.computed)
		}
		// Nor more than its known tokens, or this step's item, need: the
		// blocks of rejected drafts went back at once (Accept).
		if most := s.pool.BlocksFor(max(len(q.Tokens), s.planEnd(q))); q.table.Len() > most {
			return fmt.Errorf("%w: seq %d holds %d blocks, %d tokens need %d", ErrInvariant, q.id, q.table.Len(), len(q.Tokens), most)
		}
		tables = append(tables, &q.table)
	}
	return s.pool.CheckRefs(tables)
}

// check verifies the waiting queue: the active tenants are exactly the
// indexed ones with sequences waiting, each once; every tenant's queue is in
// precedence order and holds only its waiting sequences, which hold no
// blocks; the count is theirs; no active clock is behind now (a tenant joins
// at now, and now is the lowest clock served).
func (f *fairQueue) check() error {
	n, waiting := 0, 0
	for _, tq := range f.active {
		switch {
		case f.tenants[tq.name] != tq:
			return fmt.Errorf("%w: active tenant %q not indexed", ErrInvariant, tq.name)
		case len(tq.waiting) == 0:
			return fmt.Errorf("%w: active tenant %q has nothing waiting", ErrInvariant, tq.name)
		case tq.vt < f.now:
			return fmt.Errorf("%w: tenant %q's clock %d behind now %d", ErrInvariant, tq.name, tq.vt, f.now)
		case !slices.IsSortedFunc(tq.waiting, cmpWaiting):
			return fmt.Errorf("%w: tenant %q's queue out of precedence order", ErrInvariant, tq.name)
		}
		for _, q := range tq.waiting {
			if q.state != StateWaiting || q.Tenant != tq.name || q.table.Len() != 0 || q.computed != 0 {
				return fmt.Errorf("%w: waiting seq %d of %q in %q's queue: state %v, %d blocks, %d computed",
					ErrInvariant, q.id, q.Tenant, tq.name, q.state, q.table.Len(), q.computed)
			}
		}
		n += len(tq.waiting)
	}
	for _, tq := range f.tenants {
		if len(tq.waiting) > 0 {
			waiting++
		}
	}
	if n != f.n || waiting != len(f.active) {
		return fmt.Errorf("%w: %d waiting in %d active tenants; counted %d, %d tenants with sequences", ErrInvariant, n, len(f.active), f.n, waiting)
	}
	return nil
}

// planEnd is where q's item in the current plan ends, 0 when it has none.
func (s *Scheduler) planEnd(q *Seq) int {
	if q.scheduled != s.step {
		return 0
	}
	for _, it := range s.plan.Items {
		if it.Seq == q {
			return it.Start + it.N
		}
	}
	return 0
}
