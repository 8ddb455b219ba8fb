package scheduler

import "slices"

// Fairness between tenants (Seq.Tenant, an API key's id). Each tenant's
// waiting sequences form a queue of their own, in precedence order as
// before (Priority, then arrival, with aging); admission takes the head of
// the tenant that has had the least service, so one tenant's backlog
// cannot hold another's request back behind it.
//
// Service is counted in the tokens admission hands out: a sequence admitted
// costs the tokens it has to compute (its known tokens less its prefix-cache
// hit; at least 1). This is deficit round robin in its virtual-time form
// (start-time fair queuing): each tenant carries a clock, vt, of the tokens
// it was admitted; the waiting tenant with the lowest clock goes next and
// its clock advances by the cost. A tenant that starts waiting joins at the
// clock of the last admission (now), never below it, so time spent idle
// banks no credit; one that was served ahead of the others (its clock past
// now) keeps that debt when it leaves and comes back, until now passes it.
//
//	tenant A: 40 waiting, prompts of 100       tenant B: 1 waiting, 10 tokens
//	vt        A 0 → 100 → …                    B joins at now = A's last start
//	order     A1, B1, A2, A3, …                (B's clock is the lowest at once)
//
// With one tenant (every Tenant "") the order is exactly precedence order.
// Ties go to the head of higher precedence (FCFS across tenants then).

// tenantQueue is one tenant's waiting sequences and service clock.
type tenantQueue struct {
	name    string
	waiting []*Seq // ascending precedence: the next to admit is last
	vt      int64  // tokens of service, on the scheduler's virtual clock
}

// fairQueue is the waiting queue: every tenant's, and the clocks.
type fairQueue struct {
	tenants map[string]*tenantQueue // tenants waiting, and idle ones still in debt (vt > now)
	active  []*tenantQueue          // tenants with sequences waiting, in the order they started to
	now     int64                   // the clock of the last admission: where a tenant joins
	n       int                     // waiting sequences, every tenant's
}

// push queues q with its tenant.
func (f *fairQueue) push(q *Seq) {
	if f.tenants == nil {
		f.tenants = make(map[string]*tenantQueue)
	}
	tq := f.tenants[q.Tenant]
	if tq == nil {
		tq = &tenantQueue{name: q.Tenant, vt: f.now}
		f.tenants[q.Tenant] = tq
	}
	if len(tq.waiting) == 0 {
		tq.vt = max(tq.vt, f.now)
		f.active = append(f.active, tq)
	}
	i, _ := slices.BinarySearchFunc(tq.waiting, q, cmpWaiting)
	tq.waiting = slices.Insert(tq.waiting, i, q)
	f.n++
}

// next is the tenant whose head admission takes next; nil when none waits.
func (f *fairQueue) next() *tenantQueue {
	var best *tenantQueue
	for _, tq := range f.active {
		if best == nil || tq.vt < best.vt || tq.vt == best.vt && before(tq.head(), best.head()) {
			best = tq
		}
	}
	return best
}

func (tq *tenantQueue) head() *Seq { return tq.waiting[len(tq.waiting)-1] }

// pop takes tq's head, admitted at a cost of the tokens it computes, and
// advances the clocks.
func (f *fairQueue) pop(tq *tenantQueue, cost int) {
	f.now = max(f.now, tq.vt)
	tq.vt += int64(max(cost, 1))
	f.popHead(tq)
}

// popHead takes tq's head without charging it (it leaves unadmitted).
func (f *fairQueue) popHead(tq *tenantQueue) {
	tq.waiting[len(tq.waiting)-1] = nil
	tq.waiting = tq.waiting[:len(tq.waiting)-1]
	f.n--
	f.settle(tq)
}

// remove takes waiting q out of its tenant's queue (aborted or finished).
func (f *fairQueue) remove(q *Seq) {
	tq := f.tenants[q.Tenant]
	if tq == nil {
		return
	}
	if i := slices.Index(tq.waiting, q); i >= 0 {
		tq.waiting = slices.Delete(tq.waiting, i, i+1)
		f.n--
		f.settle(tq)
	}
}

// settle drops tq from the active tenants once it has nothing waiting, and
// forgets it (with every idle tenant whose debt now has passed) unless it
// is still ahead of the clock.
func (f *fairQueue) settle(tq *tenantQueue) {
	if len(tq.waiting) > 0 {
		return
	}
	f.active = slices.DeleteFunc(f.active, func(x *tenantQueue) bool { return x == tq })
	// Idle entries are kept only for their debt; sweeping them here, each
	// time a queue empties, keeps the map to the tenants recently served.
	for name, x := range f.tenants {
		if len(x.waiting) == 0 && x.vt <= f.now {
			delete(f.tenants, name)
		}
	}
}

// NumWaitingFor counts tenant's waiting sequences.
func (s *Scheduler) NumWaitingFor(tenant string) int {
	if tq := s.queue.tenants[tenant]; tq != nil {
		return len(tq.waiting)
	}
	return 0
}
