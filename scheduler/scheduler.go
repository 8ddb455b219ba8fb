package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/kvcache"
)

// Defaults for zero Config fields.
const (
	DefaultMaxBatchTokens = 512
	DefaultMaxSeqs        = 64
	DefaultAgingSteps     = 256

	// DefaultMaxPrefillTokensWithDecodes is the most prompt tokens a step
	// that decodes takes, whatever the number of decodes. A step that carries
	// any prompt token pays a fixed cost first: prompt rows go through the
	// CPU's tiled (AMX) kernels, which unpack every weight of the model once
	// per step however few prompt rows there are. Measured with
	// BenchmarkSmolLM2MixedStep's method (engine; SmolLM2-135M Q4_1, 2
	// threads, 4 sequences decoding, a new prompt of p tokens prefilled in
	// one step beside them; the shared reference machine at load average
	// ~14, so read the ratios):
	//
	//	p        0     1      16     64         128        256
	//	step     38ms  170ms  183ms  251-272ms  435-704ms  1.9-2.4s
	//
	// One prompt token costs the step as much as 16 (~130 ms, ~90 prompt
	// tokens' worth of work), so what stalls the running streams is the
	// number of steps that carry prompt tokens more than the tokens: cut a
	// 69-token prompt into chunks of 16 (the former cap of 4 per decode, at
	// least 16) and 4 streams waited five ~180 ms steps instead of one ~260
	// ms step, and 4 clients got less throughput than one (issue 26). 128
	// takes a typical chat prompt, or two, in one step; past it the step
	// grows faster than its tokens (256 cost 3-4× 128), so longer prompts go
	// in chunks of 128.
	DefaultMaxPrefillTokensWithDecodes = 128
)

// maxPriority bounds |Priority| so the precedence key cannot overflow.
const maxPriority = 1 << 20

var (
	// ErrConfig reports an invalid configuration.
	ErrConfig = errors.New("scheduler: invalid config")
	// ErrSeq reports a sequence Add cannot take (already added, or no tokens).
	ErrSeq = errors.New("scheduler: invalid sequence")
)

// Config bounds each step.
type Config struct {
	MaxBatchTokens int // tokens per step, prefill chunks and decodes together
	// MaxPrefillTokensWithDecodes caps the prompt tokens (prefill chunks,
	// admissions, recomputes) of a step that also decodes, so that a new
	// request's prefill delays the running streams by a bounded amount
	// instead of a whole MaxBatchTokens step. A step with nothing to decode
	// gets the full MaxBatchTokens for prefill, so an idle server starts a
	// long prompt at full speed. Values above MaxBatchTokens mean no cap.
	MaxPrefillTokensWithDecodes int
	MaxSeqs                     int     // running sequences at once
	Watermark                   float64 // fraction of blocks admission leaves free, for running sequences to grow into
	AgingSteps                  int     // steps of waiting worth one priority level (≤ 1<<20)
	// OnAdmit, when set, is called with each sequence the first time it
	// leaves the waiting queue for the running one (admitted or forked;
	// Seq.Admitted turns true), on the owner's goroutine, inside Schedule or
	// Fork: the owner's count of sequences not yet started stays exact.
	OnAdmit func(q *Seq)
	// Propose, when set, is asked for up to max draft tokens to verify
	// after a decoding sequence's newest token (speculative decoding,
	// spec.go); nil or empty: a plain decode.
	Propose func(q *Seq, max int) []int32
	// MaxLogitRows bounds the sampled rows of a step, drafts' included
	// (the model's logits buffer); 0 = MaxSeqs, which one row per
	// sequence never exceeds.
	MaxLogitRows int
}

// Stats are cumulative counters.
type Stats struct {
	Steps          int64
	Admissions     int64 // including readmissions after preemption
	Preemptions    int64
	HitTokens      int64 // tokens served from the prefix cache at admission
	ComputedTokens int64 // tokens whose KV a step computed (Advance)
}

// Scheduler composes steps. Not safe for concurrent use: one owner.
type Scheduler struct {
	cfg     Config
	pool    *kvcache.Pool
	reserve int // blocks admission keeps free

	queue   fairQueue // waiting sequences, one queue per tenant (fair.go)
	running []*Seq    // descending precedence: the first victim is last

	step    int64
	nextID  uint64
	budget  int // tokens left in the step being composed
	prefill int // of those, prompt tokens left (see MaxPrefillTokensWithDecodes)
	plan    Plan
	pre     kvcache.Prefix
	stats   Stats
}

// New makes a scheduler over pool, filling zero Config fields with defaults.
func New(cfg Config, pool *kvcache.Pool) (*Scheduler, error) {
	if cfg.MaxBatchTokens == 0 {
		cfg.MaxBatchTokens = DefaultMaxBatchTokens
	}
	if cfg.MaxSeqs == 0 {
		cfg.MaxSeqs = DefaultMaxSeqs
	}
	if cfg.AgingSteps == 0 {
		cfg.AgingSteps = DefaultAgingSteps
	}
	if cfg.MaxLogitRows == 0 {
		cfg.MaxLogitRows = cfg.MaxSeqs
	}
	if cfg.MaxPrefillTokensWithDecodes == 0 {
		cfg.MaxPrefillTokensWithDecodes = DefaultMaxPrefillTokensWithDecodes
	}
	// At least 1 (checked below): a prompt still being prefilled must advance
	// in every step, or a busy server would never finish starting it.
	if pool == nil || cfg.MaxBatchTokens < 1 || cfg.MaxPrefillTokensWithDecodes < 1 || cfg.MaxSeqs < 1 || cfg.MaxLogitRows < cfg.MaxSeqs ||
		cfg.AgingSteps < 1 || cfg.AgingSteps > maxPriority || !(cfg.Watermark >= 0 && cfg.Watermark < 1) {
		return nil, fmt.Errorf("%w: %+v", ErrConfig, cfg)
	}
	cfg.MaxPrefillTokensWithDecodes = min(cfg.MaxPrefillTokensWithDecodes, cfg.MaxBatchTokens)
	return &Scheduler{
		cfg:     cfg,
		pool:    pool,
		reserve: int(math.Ceil(cfg.Watermark * float64(pool.Usage().Total))),
	}, nil
}

// Config is the configuration in force: New's, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats returns the cumulative counters.
func (s *Scheduler) Stats() Stats { return s.stats }

// NumWaiting and NumRunning count the sequences in each queue.
func (s *Scheduler) NumWaiting() int { return s.queue.n }

// NumRunning counts admitted sequences.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// Add queues a new sequence. Its arrival is the current step.
func (s *Scheduler) Add(q *Seq) error {
	if q.state != StateNew || len(q.Tokens) == 0 {
		return fmt.Errorf("%w: state %v, %d tokens", ErrSeq, q.state, len(q.Tokens))
	}
	s.nextID++
	q.id = s.nextID
	q.key = int64(max(-maxPriority, min(q.Priority, maxPriority)))*int64(s.cfg.AgingSteps) - s.step
	q.state = StateWaiting
	q.table.SetSalt(q.Salt)
	s.enqueue(q)
	return nil
}

// Finish removes q wherever it is (finished, aborted or failed) and returns
// its blocks to the pool at once. Finishing a sequence twice is harmless.
func (s *Scheduler) Finish(q *Seq) {
	switch q.state {
	case StateWaiting:
		s.queue.remove(q)
	case StateRunning:
		s.running = remove(s.running, q)
		s.pool.Free(&q.table)
	}
	q.state = StateDone
}

// Schedule composes the next step. The plan is valid until the next call;
// the owner runs it, then calls Advance.
func (s *Scheduler) Schedule() *Plan {
	s.step++
	s.stats.Steps++
	s.plan.reset()
	s.budget = s.cfg.MaxBatchTokens
	s.prefill = s.budget // no decode in the plan yet: only the step's budget bounds it
	s.scheduleRunning(true)
	if len(s.plan.Items) > 0 { // the plan holds only decodes so far
		// The running streams wait for the whole step: bound it.
		s.prefill = s.prefillCap()
	}
	s.scheduleRunning(false)
	// After a preemption the pool is short: admitting now would only thrash.
	if len(s.plan.Preempted) == 0 {
		s.admit()
	}
	s.scheduleDrafts() // spec.go
	return &s.plan
}

// scheduleRunning gives each running sequence of one kind (decoding, or
// still prefilling) its tokens for the step, preempting to make room.
func (s *Scheduler) scheduleRunning(decodes bool) {
	// Victims are taken from the tail, so index i stays valid; when q itself
	// is the victim it was the tail and the loop ends.
	for i := 0; i < len(s.running) && s.room(!decodes) > 0; i++ {
		q := s.running[i]
		left := len(q.Tokens) - q.computed
		if left < 1 || (left == 1) != decodes || q.scheduled == s.step {
			continue
		}
		n := min(left, s.room(!decodes))
		if s.grow(q, n) {
			s.schedule(q, n, decodes)
		}
	}
}

// prefillCap is how many prompt tokens a step carrying decodes may take.
// Not scaled down for a small batch: the fixed cost of a step with prompt
// rows (DefaultMaxPrefillTokensWithDecodes) would then be paid more often.
func (s *Scheduler) prefillCap() int { return s.cfg.MaxPrefillTokensWithDecodes }

// room is how many more tokens of a kind the step being composed can take.
func (s *Scheduler) room(prefill bool) int {
	if prefill {
		return min(s.budget, s.prefill)
	}
	return s.budget
}

// grow makes room for n more tokens of running sequence q, preempting
// sequences of lower precedence, or q itself when it is the lowest.
func (s *Scheduler) grow(q *Seq, n int) bool {
	for !s.pool.Allocate(&q.table, nil, q.computed+n, 0) {
		victim := s.running[len(s.running)-1]
		if victim != q {
			s.preempt(victim)
			continue
		}
		if len(s.running) == 1 { // alone and still too big: it can never run
			s.Finish(q)
			s.plan.Unfit = append(s.plan.Unfit, q)
		} else {
			s.preempt(q)
		}
		return false
	}
	return true
}

func (s *Scheduler) preempt(q *Seq) {
	if q.scheduled == s.step {
		i := slices.IndexFunc(s.plan.Items, func(it Item) bool { return it.Seq == q })
		it := s.plan.Items[i]
		s.budget += it.N
		s.plan.Tokens -= it.N
		if !it.Decode {
			s.prefill += it.N
		}
		s.plan.Items = slices.Delete(s.plan.Items, i, i+1)
		q.scheduled = 0
	}
	s.running = remove(s.running, q)
	s.pool.Free(&q.table)
	q.computed = 0
	q.state = StateWaiting
	q.preemptions++
	s.stats.Preemptions++
	s.enqueue(q)
	s.plan.Preempted = append(s.plan.Preempted, q)
}

// admit moves waiting sequences to running while the step and the pool
// allow: the head of the tenant with the least service (fair.go), in
// precedence order within a tenant. When that head does not fit (sequence
// cap or blocks), it may preempt its tenant's running sequences of lower
// Priority; otherwise admission stops there, so nothing overtakes it.
func (s *Scheduler) admit() {
	for s.room(true) > 0 && s.queue.n > 0 {
		tq := s.queue.next()
		q := tq.head()
		if len(s.running) >= s.cfg.MaxSeqs {
			if s.preemptFor(q) {
				continue
			}
			return
		}
		// Keep at least one token to compute: its logits give the next token.
		hit := s.pool.LookupSalted(&s.pre, q.Salt, q.Tokens, len(q.Tokens)-1)
		n := min(len(q.Tokens)-hit, s.room(true))
		reserve := s.reserve
		if len(s.running) == 0 {
			reserve = 0 // the watermark protects running sequences; there are none
		}
		if !s.pool.Allocate(&q.table, &s.pre, hit+n, reserve) {
			switch {
			case len(s.running) == 0: // cannot fit even in an empty pool
				s.queue.popHead(tq)
				q.state = StateDone
				s.plan.Unfit = append(s.plan.Unfit, q)
			case !s.preemptFor(q):
				return
			}
			continue // look up again: freed blocks may have changed the hit
		}
		s.queue.pop(tq, len(q.Tokens)-hit)
		q.state = StateRunning
		q.computed = hit
		if !q.admitted {
			q.admitted = true
			q.cachedTokens = hit
			s.onAdmit(q)
		}
		s.stats.Admissions++
		s.stats.HitTokens += int64(hit)
		i, _ := slices.BinarySearchFunc(s.running, q, cmpRunning)
		s.running = slices.Insert(s.running, i, q)
		s.schedule(q, n, false)
	}
}

// preemptFor preempts, to make room for waiting q, the running sequence of
// lowest precedence among those of q's tenant of lower Priority than q and
// lower precedence (so it cannot come straight back ahead of q). Equal
// priorities never preempt each other here: FCFS holds within a priority.
// Priority orders a tenant's own requests; it never takes another tenant's
// place.
func (s *Scheduler) preemptFor(q *Seq) bool {
	for i := len(s.running) - 1; i >= 0 && before(q, s.running[i]); i-- {
		if v := s.running[i]; v.Priority < q.Priority && v.Tenant == q.Tenant {
			s.preempt(v)
			return true
		}
	}
	return false
}

func (s *Scheduler) schedule(q *Seq, n int, decode bool) {
	q.scheduled = s.step
	s.plan.Items = append(s.plan.Items, Item{Seq: q, Start: q.computed, N: n, Sample: q.computed+n == len(q.Tokens), Decode: decode})
	s.plan.Tokens += n
	s.budget -= n
	if !decode {
		s.prefill -= n
	}
}

// Advance records that the plan's step ran: each item's tokens now have KV,
// and blocks they completed enter the prefix cache. Call it before
// appending sampled tokens or finishing sequences.
func (s *Scheduler) Advance(p *Plan) {
	for _, it := range p.Items {
		q := it.Seq
		q.computed = it.Start + it.N - len(it.Draft) // drafts wait for Accept
		s.pool.Commit(&q.table, q.Tokens, q.computed)
		s.stats.ComputedTokens += int64(it.N)
	}
}

func (s *Scheduler) enqueue(q *Seq) { s.queue.push(q) }

func (s *Scheduler) onAdmit(q *Seq) {
	if s.cfg.OnAdmit != nil {
		s.cfg.OnAdmit(q)
	}
}

// cmpRunning orders by descending precedence, cmpWaiting by ascending.
func cmpRunning(a, b *Seq) int {
	switch {
	case a == b:
		return 0
	case before(a, b):
		return -1
	}
	return 1
}

func cmpWaiting(a, b *Seq) int { return -cmpRunning(a, b) }

func remove(qs []*Seq, q *Seq) []*Seq {
	if i := slices.Index(qs, q); i >= 0 {
		return slices.Delete(qs, i, i+1) // clears the vacated tail slot
	}
	return qs
}
