package scheduler

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
)

// harness plays the engine: it runs plans against a shadow KV store that
// records, per slot, a fingerprint of the token prefix whose KV was written
// there, and checks that every sequence's context reads back its own prefix.
// Paging, sharing or preemption bugs show up as a wrong fingerprint.
type harness struct {
	t      testing.TB
	s      *Scheduler
	store  []uint64
	maxLen map[*Seq]int // a sequence finishes when it knows this many tokens
	done   []*Seq
	admits map[*Seq]int // Config.OnAdmit calls per sequence: one, once admitted
}

func newHarness(t testing.TB, cfg Config, blocks, bs int, cache bool) *harness {
	t.Helper()
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: blocks, BlockSize: bs, PrefixCaching: cache})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: make([]uint64, blocks*bs), maxLen: map[*Seq]int{}, admits: map[*Seq]int{}}
	cfg.OnAdmit = func(q *Seq) { h.admits[q]++ }
	s, err := New(cfg, pool)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

// add queues a sequence that generates until it knows prompt+gen tokens.
func (h *harness) add(prompt []int32, gen, priority int) *Seq {
	h.t.Helper()
	return h.addFor("", prompt, gen, priority)
}

// addFor is add for a tenant.
func (h *harness) addFor(tenant string, prompt []int32, gen, priority int) *Seq {
	h.t.Helper()
	q := &Seq{Tokens: append([]int32(nil), prompt...), Priority: priority, Tenant: tenant}
	if err := h.s.Add(q); err != nil {
		h.t.Fatal(err)
	}
	h.maxLen[q] = len(prompt) + gen
	return q
}

func fingerprint(tokens []int32) uint64 {
	h := uint64(7)
	for _, t := range tokens {
		h = (h ^ uint64(uint32(t))) * 0x100000001b3
	}
	return h
}

func (h *harness) slot(q *Seq, pos int) int {
	bs := h.s.pool.BlockSize()
	return int(q.Blocks()[pos/bs])*bs + pos%bs
}

// step runs one scheduled step and returns its plan. Sampled tokens are a
// function of the context's fingerprint, so outputs depend on correct KV.
func (h *harness) step() (*Plan, error) {
	p := h.s.Schedule()
	if err := h.s.CheckInvariants(); err != nil {
		return p, err
	}
	total, prefill, decodes := 0, 0, 0
	for _, it := range p.Items {
		q := it.Seq
		if q.State() != StateRunning || it.Start != q.NumComputed() || it.N < 1 || it.Start+it.N > len(q.Tokens) {
			return p, fmt.Errorf("bad item %+v (state %v, computed %d, len %d)", it, q.State(), q.NumComputed(), len(q.Tokens))
		}
		if !q.Admitted() || h.admits[q] != 1 {
			return p, fmt.Errorf("seq %d scheduled: admitted %v, OnAdmit called %d times", q.id, q.Admitted(), h.admits[q])
		}
		if it.Decode {
			decodes++
			if it.N != 1 || !it.Sample {
				return p, fmt.Errorf("decode item %+v is not one sampled token", it)
			}
		} else {
			prefill += it.N
		}
		for pos := 0; pos < it.Start; pos++ { // attention reads the cached context
			if h.store[h.slot(q, pos)] != fingerprint(q.Tokens[:pos+1]) {
				return p, fmt.Errorf("seq %d position %d: cache holds another prefix's KV", q.id, pos)
			}
		}
		for pos := it.Start; pos < it.Start+it.N; pos++ {
			h.store[h.slot(q, pos)] = fingerprint(q.Tokens[:pos+1])
		}
		total += it.N
	}
	if total != p.Tokens || total > h.s.cfg.MaxBatchTokens {
		return p, fmt.Errorf("plan tokens %d (field %d), budget %d", total, p.Tokens, h.s.cfg.MaxBatchTokens)
	}
	if limit := h.s.prefillCap(); decodes > 0 && prefill > limit {
		return p, fmt.Errorf("plan: %d decodes with %d prefill tokens, cap %d", decodes, prefill, limit)
	}
	h.s.Advance(p)
	for _, it := range p.Items {
		if !it.Sample {
			continue
		}
		q := it.Seq
		q.Tokens = append(q.Tokens, int32(fingerprint(q.Tokens)%50))
		if len(q.Tokens) >= h.maxLen[q] {
			h.finish(q)
		}
	}
	for _, q := range p.Unfit {
		h.done = append(h.done, q)
	}
	return p, h.s.CheckInvariants()
}

func (h *harness) finish(q *Seq) {
	h.s.Finish(q)
	h.done = append(h.done, q)
	delete(h.maxLen, q)
}

func (h *harness) mustStep() *Plan {
	h.t.Helper()
	p, err := h.step()
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// drain steps until nothing is left, failing if that takes more than limit steps.
func (h *harness) drain(limit int) {
	h.t.Helper()
	for i := 0; h.s.NumRunning()+h.s.NumWaiting() > 0; i++ {
		if i == limit {
			h.t.Fatalf("not drained after %d steps: %d running, %d waiting", limit, h.s.NumRunning(), h.s.NumWaiting())
		}
		h.mustStep()
	}
	if u := h.s.pool.Usage(); u.Used != 0 || u.Free+u.Cached != u.Total {
		h.t.Fatalf("drained pool: %+v", u)
	}
}

func tokens(n int, base int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

// numDecodes counts the plan's decode items.
func numDecodes(p *Plan) int {
	n := 0
	for _, it := range p.Items {
		if it.Decode {
			n++
		}
	}
	return n
}
