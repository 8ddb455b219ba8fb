package engine

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Speculative decoding on a hybrid model: a verify step runs the drafts
// through the Gated DeltaNet layers too, and the sequence's recurrent
// state must come out as if only the accepted ones had been read
// (rollBackState, kernels.StateRollBack). The tiny synthetic Qwen3.5 of
// hybrid_test.go reads its whole past through that state, so a state left
// after a rejected draft changes the next tokens.

// rollHybrid is hookedHybrid with the model's state rollback, counting
// rollbacks and those that kept some of a step's drafts but not all
// (partial), which put back a state from the middle of the step.
type rollHybrid struct {
	*hookedHybrid
	q                  *models.Qwen35
	drafts             map[int32]int // slot → the drafts its sequence carried in the latest step
	rollBacks, partial int
}

func (h *rollHybrid) Forward(b *kernels.Batch) ([]float32, error) {
	clear(h.drafts)
	for _, s := range b.Seqs {
		h.drafts[s.State] = s.Drafts
	}
	return h.hookedHybrid.Forward(b)
}

func (h *rollHybrid) CanRollBackState() bool { return h.q.CanRollBackState() }
func (h *rollHybrid) RollBackState(slot int32, kept int) error {
	h.rollBacks++
	if kept > 0 && kept < h.drafts[slot] {
		h.partial++
	}
	return h.q.RollBackState(slot, kept)
}

// specHybridSpec is hybridSpec with a vocabulary of 12: its greedy and
// sampled outputs fall into loops and repeat n-grams early, so that the
// n-gram proposer's drafts are often right, and often wrong.
var specHybridSpec = func() modeltest.Qwen35Spec {
	s := hybridSpec
	s.Seed = 22
	return s
}()

// loadRollHybrid loads specHybridSpec with logit rows for rows rows, as
// loadHybrid loads hybridSpec.
func loadRollHybrid(t testing.TB, blocks, batch, rows int) *rollHybrid {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := modeltest.WriteQwen35GGUF(path, specHybridSpec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	g, err := models.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	m, err := models.LoadQwen35(g, be, models.Options{KVBlocks: blocks, BlockSize: 16, MaxBatchTokens: batch, MaxSeqs: rows})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(); g.Close() })
	return &rollHybrid{hookedHybrid: &hookedHybrid{hooked: &hooked{Model: m}, r: m}, q: m, drafts: map[int32]int{}}
}

// hybridEditPrompts are edit-style prompts: a passage, then its start again, so
// that the n-gram proposer drafts from the passage from the first decode.
func hybridEditPrompts(count, vocab int) [][]int32 {
	r := rand.New(rand.NewPCG(26, 1))
	var ps [][]int32
	for i := range count {
		p := make([]int32, 12+3*i)
		for j := range p {
			p[j] = int32(r.IntN(vocab))
		}
		ps = append(ps, append(p, p[:4+i%3]...))
	}
	return ps
}

const hybridSpecK = 4

// hybridSpecEngine is an engine speculating on m with fixed drafts of up
// to hybridSpecK tokens (every decode with a match carries them, so
// rejections are many), or a plain one when method is "".
func hybridSpecEngine(t testing.TB, m Model, method string, blocks, batch, seqs int) *Engine {
	return newEngineOn(t, m, Config{Blocks: blocks, BlockSize: 16, MaxBatchTokens: batch, MaxSeqs: seqs, MaxQueue: 64,
		Speculate: SpecConfig{Method: method, K: hybridSpecK, MinNGram: 1, NGram: 3, Fixed: true, LogitRows: seqs * (1 + hybridSpecK)}})
}

// TestHybridSpecGreedy: on the tiny hybrid, greedy output with n-gram
// speculation equals the output without it, token for token, for each
// prompt alone and for all of them in a full batch (arriving together,
// every sequence speculating in the same steps); drafts were accepted and
// rejected, the states rolled back, and afterwards no block or state slot
// is held. Without the rollback the state after a rejected draft stays in
// the slot and the outputs part.
func TestHybridSpecGreedy(t *testing.T) {
	const n, seqs = 48, 8
	prompts := hybridEditPrompts(seqs, specHybridSpec.Vocab)
	plainM := loadRollHybrid(t, 64, 64, seqs*(1+hybridSpecK))
	plain := hybridSpecEngine(t, plainM, "", 64, 64, seqs)
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i], _ = collect(t, submit(t, plain, Request{Prompt: p, MaxTokens: n}), 0)
	}
	if st := plain.Stats(); st.SpecDrafts != 0 || plainM.rollBacks != 0 {
		t.Fatalf("the plain engine speculated: %d drafts, %d rollbacks", st.SpecDrafts, plainM.rollBacks)
	}

	m := loadRollHybrid(t, 64, 64, seqs*(1+hybridSpecK))
	e := hybridSpecEngine(t, m, "ngram", 64, 64, seqs)
	check := func(what string, got [][]int32) {
		t.Helper()
		for i := range prompts {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("%s: prompt %d: with speculation %v, without %v", what, i, got[i], want[i])
			}
		}
	}
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		alone[i], _ = collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
	}
	check("alone", alone)
	aloneSt := *e.Stats()
	var most int // the most sequences one step verified drafts for
	m.hook = func(b *kernels.Batch) error {
		k := 0
		for _, s := range b.Seqs {
			if s.Drafts > 0 {
				k++
			}
		}
		most = max(most, k)
		return nil
	}
	check("together", runAtOnce(t, e, func(h func(*kernels.Batch) error) {
		prev := m.hook
		m.hook = func(b *kernels.Batch) error { return cmp.Or(h(b), prev(b)) }
	}, prompts, n))
	st := waitIdle(t, e)
	t.Logf("alone: drafts %d, draft tokens %d, accepted %d; in all: %d, %d, %d; rollbacks %d (%d partial); at most %d sequences speculating in a step",
		aloneSt.SpecDrafts, aloneSt.SpecDraftTokens, aloneSt.SpecAcceptedTokens, st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, m.rollBacks, m.partial, most)
	for _, s := range []Stats{aloneSt, *st} {
		if s.SpecAcceptedTokens == 0 || s.SpecAcceptedTokens == s.SpecDraftTokens {
			t.Fatalf("%d draft tokens, %d accepted: the run did not both accept and reject", s.SpecDraftTokens, s.SpecAcceptedTokens)
		}
	}
	if most < 4 || m.rollBacks == 0 {
		t.Fatalf("at most %d sequences speculated in a step, %d rollbacks", most, m.rollBacks)
	}
	if st.KV.Used != 0 || st.KV.StatesUsed != 0 {
		t.Fatalf("after all sequences: %+v", st.KV)
	}
}

// TestHybridSpecSeeded: a seeded sampled generation on the hybrid is the
// same with speculation as without, alone and in a batch: one PRNG draw
// per token, and the state the draws see is the accepted tokens'.
func TestHybridSpecSeeded(t *testing.T) {
	const n, seqs = 48, 6
	prompts := hybridEditPrompts(seqs, specHybridSpec.Vocab)
	req := func(i int) Request {
		return Request{Prompt: prompts[i], MaxTokens: n, Sampling: SamplingParams{Temperature: 0.3, TopK: 3, Seed: seed(uint64(40 + i))}}
	}
	run := func(e *Engine, together bool) [][]int32 {
		out := make([][]int32, seqs)
		if !together {
			for i := range seqs {
				out[i], _ = collect(t, submit(t, e, req(i)), 0)
			}
			return out
		}
		ss := make([]*Sequence, seqs)
		for i := range seqs {
			ss[i] = submit(t, e, req(i))
		}
		for i, s := range ss {
			out[i], _ = collect(t, s, 0)
		}
		return out
	}
	plain := hybridSpecEngine(t, loadRollHybrid(t, 64, 64, seqs*(1+hybridSpecK)), "", 64, 64, seqs)
	want := run(plain, false)
	m := loadRollHybrid(t, 64, 64, seqs*(1+hybridSpecK))
	e := hybridSpecEngine(t, m, "ngram", 64, 64, seqs)
	for _, together := range []bool{false, true} {
		got := run(e, together)
		for i := range seqs {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("together %v: request %d: with speculation %v, without %v", together, i, got[i], want[i])
			}
		}
	}
	st := waitIdle(t, e)
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens || m.rollBacks == 0 {
		t.Fatalf("%d draft tokens, %d accepted, %d rollbacks: the run did not both accept and reject", st.SpecDraftTokens, st.SpecAcceptedTokens, m.rollBacks)
	}
	t.Logf("draft tokens %d, accepted %d, rollbacks %d (%d partial)", st.SpecDraftTokens, st.SpecAcceptedTokens, m.rollBacks, m.partial)
}

// TestHybridSpecRandomTraffic: speculation on the hybrid under random
// traffic: 6 clients of 20 requests with priorities, stop tokens, cancels
// and aborts at random points, a pool small enough to preempt (each
// client's first request is long, and the first step waits for them all;
// a preempted sequence recomputes from a fresh state slot) and prefix
// caching on (prompts share prefixes, so cached states seed some). Inside
// every Forward the scheduler's and pool's invariants hold, the state
// slots among them (free + held by tables + cached, each once); every
// complete output equals the plain engine's greedy output, and a cut one
// is a prefix of it; at the end no block or slot is held and drafts were
// accepted and rejected.
func TestHybridSpecRandomTraffic(t *testing.T) {
	const clients, perClient, seqs = 6, 20, 6
	type job struct {
		prompt []int32
		n      int
		stops  []int32
		prio   int
		action int // 0 cancel, 1 abort, else run to the end
		at     int
	}
	base := hybridEditPrompts(4, specHybridSpec.Vocab)
	jobs := make([][]job, clients)
	for c := range clients {
		r := rand.New(rand.NewPCG(uint64(c), 26))
		for range perClient {
			p := slices.Clone(base[r.IntN(len(base))])
			p = p[:1+r.IntN(len(p))]
			for range r.IntN(20) {
				p = append(p, p[r.IntN(len(p))]) // a token of its own: repeats for the proposer
			}
			j := job{prompt: p, n: 1 + r.IntN(40), prio: r.IntN(3), action: r.IntN(4)}
			if len(jobs[c]) == 0 { // long: the clients' first requests need more than the pool together
				for len(j.prompt) < 40 {
					j.prompt = append(j.prompt, j.prompt[r.IntN(len(j.prompt))])
				}
				j.n, j.action = 40, 2
			}
			if r.IntN(3) == 0 {
				j.stops = []int32{p[r.IntN(len(p))]}
			}
			j.at = r.IntN(j.n + 1)
			jobs[c] = append(jobs[c], j)
		}
	}
	// The references: each prompt's greedy output to its longest length.
	plain := hybridSpecEngine(t, loadRollHybrid(t, 256, 64, seqs*(1+hybridSpecK)), "", 256, 64, seqs)
	ref := map[string][]int32{}
	for _, js := range jobs {
		for _, j := range js {
			k := fmt.Sprint(j.prompt)
			if len(ref[k]) < j.n {
				ref[k], _ = collect(t, submit(t, plain, Request{Prompt: j.prompt, MaxTokens: j.n}), 0)
			}
		}
	}

	m := loadRollHybrid(t, 20, 64, seqs*(1+hybridSpecK))
	e := hybridSpecEngine(t, m, "ngram", 20, 64, seqs)
	var invErr error
	var longs sync.WaitGroup // the first step waits for every client's long request
	longs.Add(clients)
	first := true
	m.hook = func(*kernels.Batch) error {
		if first {
			first = false
			longs.Wait()
		}
		if err := e.sched.CheckInvariants(); err != nil && invErr == nil {
			invErr = err
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i, j := range jobs[c] {
				var submitted func()
				if i == 0 {
					submitted = longs.Done
				}
				if err := hybridSpecJob(e, j.prompt, j.n, j.stops, j.prio, j.action, j.at, ref[fmt.Sprint(j.prompt)], submitted); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if invErr != nil {
		t.Fatal(invErr)
	}
	st := waitIdle(t, e)
	if st.KV.Used != 0 || st.KV.StatesUsed != 0 || st.KV.Free+st.KV.Cached != st.KV.Total {
		t.Fatalf("after all sequences: %+v", st.KV)
	}
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens || m.rollBacks == 0 || st.Preemptions == 0 {
		t.Fatalf("draft tokens %d, accepted %d, rollbacks %d, preemptions %d: the run did not exercise accept, reject and preempt",
			st.SpecDraftTokens, st.SpecAcceptedTokens, m.rollBacks, st.Preemptions)
	}
	t.Logf("drafts %d, draft tokens %d, accepted %d, rollbacks %d (%d partial), preemptions %d, prefix hit tokens %d",
		st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, m.rollBacks, m.partial, st.Preemptions, st.PrefixHitTokens)
}

// hybridSpecJob runs one request of TestHybridSpecRandomTraffic and checks
// its output against want, the prompt's greedy output (at least n long);
// submitted, if not nil, is called once the request is in.
func hybridSpecJob(e *Engine, p []int32, n int, stops []int32, prio, action, at int, want []int32, submitted func()) error {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	s, err := e.Submit(ctx, Request{Prompt: p, MaxTokens: n, Priority: prio, StopTokens: stops})
	if submitted != nil {
		submitted()
	}
	if err != nil {
		return err
	}
	want = want[:n]
	if i := slices.IndexFunc(want, func(t int32) bool { return slices.Contains(stops, t) }); i >= 0 {
		want = want[:i+1] // the stop token ends it, not delivered
	}
	var got []int32
	for {
		if len(got) == at {
			switch action {
			case 0:
				cancel()
			case 1:
				s.Abort(CauseStall)
			}
		}
		tok, ok := <-s.Tokens()
		if !ok {
			break
		}
		got = append(got, tok.ID)
	}
	res := s.Result()
	switch {
	case res.Finish == FinishStop && (!slices.Contains(stops, want[len(want)-1]) || !slices.Equal(got, want[:len(want)-1])):
		return fmt.Errorf("prompt %v, stop %v: got %v then stop, want %v", p, stops, got, want)
	case res.Finish == FinishLength && !slices.Equal(got, want):
		return fmt.Errorf("prompt %v: got %v, want %v", p, got, want)
	case res.Finish == FinishAbort && (len(got) > len(want) || !slices.Equal(got, want[:len(got)])):
		return fmt.Errorf("aborted prompt %v: got %v, not a prefix of %v", p, got, want)
	case res.Finish != FinishLength && res.Finish != FinishAbort && res.Finish != FinishStop:
		return fmt.Errorf("unexpected result %+v", res)
	}
	return nil
}

// TestHybridSpecNeedsRollBack: a hybrid model whose backend cannot put its
// state back (the wrapper without RollBackState, as the CUDA backend's
// store is) is asked for no drafts: the output is the plain one and the
// pool keeps refusing to truncate.
func TestHybridSpecNeedsRollBack(t *testing.T) {
	const n = 24
	prompts := hybridEditPrompts(2, specHybridSpec.Vocab)
	m := loadRollHybrid(t, 64, 64, 2*(1+hybridSpecK))
	plain := hybridSpecEngine(t, m, "", 64, 64, 2)
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i], _ = collect(t, submit(t, plain, Request{Prompt: p, MaxTokens: n}), 0)
	}
	if err := plain.Close(bg); err != nil {
		t.Fatal(err)
	}
	e := hybridSpecEngine(t, m.hookedHybrid, "ngram", 64, 64, 2)
	for i, p := range prompts {
		if got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0); !slices.Equal(got, want[i]) {
			t.Fatalf("prompt %d: %v, plain %v", i, got, want[i])
		}
	}
	if st := waitIdle(t, e); st.SpecDrafts != 0 || e.pool.CanRollBack() {
		t.Fatalf("%d drafts on a model that cannot roll its state back (pool rolls back: %v)", st.SpecDrafts, e.pool.CanRollBack())
	}
}
