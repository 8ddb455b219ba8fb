package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// queueShares shares Config.MaxQueue fairly between tenants
// (Request.Tenant) at Submit: while the queue has room anyone may take it;
// once it is full, a tenant holding less than its share (MaxQueue divided
// among the tenants with sequences waiting, itself included) is still
// accepted, into headroom of another MaxQueue, and only a tenant at or over
// its share is refused (ErrTenantQueueFull). So one key filling the queue
// never turns another key's request away, and the queue stays bounded by
// 2×MaxQueue. Which waiting sequence runs first is the scheduler's fair
// queuing (scheduler/fair.go).
//
// The counts are of sequences accepted and not yet admitted: Submit adds,
// the loop takes away at a sequence's first admission (scheduler OnAdmit)
// or its end if it never was. The mutex is held for a few map operations;
// the loop takes it once per admission, never while waiting on anything.
type queueShares struct {
	max int // Config.MaxQueue

	mu   sync.Mutex
	held map[string]int // per tenant with sequences waiting: how many
}

func newQueueShares(max int) *queueShares {
	return &queueShares{max: max, held: make(map[string]int)}
}

// enter accepts n sequences of tenant, counting them in queued (every
// tenant's sequences accepted and not yet started), or says why not.
func (q *queueShares) enter(tenant string, n int, queued *atomic.Int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	total, held := int(queued.Load()), q.held[tenant]
	tenants := len(q.held)
	if held == 0 {
		tenants++
	}
	share, full := max(q.max/tenants, 1), total+n > q.max
	switch {
	case total+n > 2*q.max, full && tenants == 1: // alone, a tenant has the plain bound
		return fmt.Errorf("%w: %d waiting", ErrQueueFull, total)
	case full && held+n > share:
		return fmt.Errorf("%w: %d of %d waiting are this tenant's, its share is %d", ErrTenantQueueFull, held, total, share)
	}
	q.held[tenant] = held + n
	queued.Add(int64(n))
	return nil
}

// leave counts one of tenant's sequences out: admitted, or ended unadmitted.
func (q *queueShares) leave(tenant string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.held[tenant] - 1; n > 0 {
		q.held[tenant] = n
	} else {
		delete(q.held, tenant)
	}
}

// QueuedFor is how many of tenant's sequences are accepted and not yet
// admitted: what counts against its share of the queue.
func (e *Engine) QueuedFor(tenant string) int {
	e.shares.mu.Lock()
	defer e.shares.mu.Unlock()
	return e.shares.held[tenant]
}
