package scheduler

import (
	"fmt"
	"slices"
	"testing"
)

// admissions steps h until it is drained and returns the tenants of the
// sequences in the order they were first scheduled.
func admissions(h *harness) string {
	h.t.Helper()
	var order []byte
	seen := map[*Seq]bool{}
	for i := 0; h.s.NumRunning()+h.s.NumWaiting() > 0; i++ {
		if i == 10000 {
			h.t.Fatal("not drained")
		}
		for _, it := range h.mustStep().Items {
			if !seen[it.Seq] {
				seen[it.Seq] = true
				order = append(order, it.Seq.Tenant[0])
			}
		}
	}
	return string(order)
}

// One tenant's backlog does not hold another's request behind it: B's one
// request, queued after A's twenty, is the second admitted. Before the
// queue was per tenant it came last.
func TestTenantFloodDoesNotBlockAnother(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 64, 4, false)
	for i := range 20 {
		h.addFor("a", tokens(8, int32(100+10*i)), 2, 0)
	}
	h.addFor("b", tokens(8, 1), 2, 0)
	if got := admissions(h); got != "ab"+string(slices.Repeat([]byte("a"), 19)) {
		t.Fatalf("admission order %s", got)
	}
}

// Turns are shared by tokens: B's prompts are a quarter of A's, so B is
// admitted four times for each of A's while both wait.
func TestTenantsShareTokens(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 64, 4, false)
	for i := range 4 {
		h.addFor("a", tokens(40, int32(100+50*i)), 1, 0)
	}
	for i := range 12 {
		h.addFor("b", tokens(10, int32(400+20*i)), 1, 0)
	}
	// A1 (tie broken by arrival) costs 40; B then catches up 10 at a time,
	// the tie at 40 going to A's earlier arrival again.
	if got, want := admissions(h), "abbbbabbbbabbbba"; got != want {
		t.Fatalf("admission order %s, want %s", got, want)
	}
}

// Waiting banks no credit: a tenant that was idle while another was served
// joins at the current clock (the last admission's start) and alternates
// with it, rather than taking as many turns as it missed.
func TestTenantIdleBanksNoCredit(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 64, 4, false)
	for i := range 6 {
		h.addFor("a", tokens(10, int32(100+20*i)), 1, 0)
	}
	for range 3 { // A1..A3 are admitted: A's clock 30, now 20
		h.mustStep()
	}
	for i := range 3 {
		h.addFor("b", tokens(10, int32(400+20*i)), 1, 0)
	}
	// B joins at 20: B1 (20→30), a tie at 30 goes to A's older head, …
	// Banked credit would have given "bbbaaa".
	if got, want := admissions(h), "bababa"; got != want {
		t.Fatalf("admission order %s, want %s", got, want)
	}
}

// Debt is kept: a tenant served ahead of the clock that stops waiting and
// comes back still owes it, so it cannot reset its share by pausing.
func TestTenantKeepsDebt(t *testing.T) {
	h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 64, 4, false)
	for i := range 3 {
		h.addFor("a", tokens(10, int32(100+20*i)), 1, 0)
	}
	for range 3 { // A1..A3 are admitted: A's clock 30, now 20, nothing of A waits
		h.mustStep()
	}
	for i := range 3 {
		h.addFor("b", tokens(10, int32(400+20*i)), 1, 0)
	}
	for i := range 3 {
		h.addFor("a", tokens(10, int32(200+20*i)), 1, 0)
	}
	// A comes back at its 30, B joins at 20: B1, then ties at 30 and 40 go
	// to B's older heads. Forgiven, A would rejoin at 20: "bababa".
	if got, want := admissions(h), "bbabaa"; got != want {
		t.Fatalf("admission order %s, want %s", got, want)
	}
}

// Priority orders a tenant's own requests: a high-priority arrival of A
// preempts A's own running low-priority sequence, never B's.
func TestPriorityPreemptsOnlyItsTenant(t *testing.T) {
	for _, tc := range []struct {
		victim  string
		preempt bool
	}{{"a", true}, {"b", false}} {
		t.Run(fmt.Sprintf("running %s", tc.victim), func(t *testing.T) {
			h := newHarness(t, Config{MaxBatchTokens: 64, MaxSeqs: 1}, 16, 4, true)
			low := h.addFor(tc.victim, tokens(6, 1), 10, 0)
			h.mustStep()
			high := h.addFor("a", tokens(3, 90), 2, 5)
			p := h.mustStep()
			if got := slices.Equal(p.Preempted, []*Seq{low}) && high.State() == StateRunning; got != tc.preempt {
				t.Fatalf("preempted %v, high %v; want preemption %v", p.Preempted, high.State(), tc.preempt)
			}
			h.drain(100)
		})
	}
}
