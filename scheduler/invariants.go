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

// CheckInvariants verifies the queues and the pool: both queues sorted by
// precedence, states consistent, waiting sequences holding no blocks,
// running ones holding blocks for exactly their computed tokens (or the
// current plan's), the sequence cap kept, and the pool's own invariants with
// the running tables as its only references. Meant for tests, between steps.
func (s *Scheduler) CheckInvariants() error {
	if !slices.IsSortedFunc(s.waiting, cmpWaiting) || !slices.IsSortedFunc(s.running, cmpRunning) {
		return fmt.Errorf("%w: queues out of precedence order", ErrInvariant)
	}
	if len(s.running) > s.cfg.MaxSeqs {
		return fmt.Errorf("%w: %d running > MaxSeqs %d", ErrInvariant, len(s.running), s.cfg.MaxSeqs)
	}
	for _, q := range s.waiting {
		if q.state != StateWaiting || q.table.Len() != 0 || q.computed != 0 {
			return fmt.Errorf("%w: waiting seq %d: state %v, %d blocks, %d computed", ErrInvariant, q.id, q.state, q.table.Len(), q.computed)
		}
	}
	tables := make([]*kvcache.Table, 0, len(s.running))
	for _, q := range s.running {
		if q.state != StateRunning || q.computed > len(q.Tokens) {
			return fmt.Errorf("%w: running seq %d: state %v, %d/%d computed", ErrInvariant, q.id, q.state, q.computed, len(q.Tokens))
		}
		if need := s.pool.BlocksFor(q.computed); q.table.Len() < need {
			return fmt.Errorf("%w: seq %d holds %d blocks for %d computed tokens", ErrInvariant, q.id, q.table.Len(), q.computed)
		}
		tables = append(tables, &q.table)
	}
	return s.pool.CheckRefs(tables)
}
