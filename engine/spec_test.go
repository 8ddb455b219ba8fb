package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// deBruijn4 holds every pair of tokens 0…3, so the n-gram proposer always
// finds the last two tokens of a sequence that starts with it.
var deBruijn4 = []int32{0, 0, 1, 0, 2, 0, 3, 1, 1, 2, 1, 3, 2, 2, 3, 3, 0}

func TestNgramDraft(t *testing.T) {
	h := []int32{5, 6, 7, 8, 9, 1, 2, 6, 7, 8, 4, 4, 6, 7}
	if got, ext := ngramDraft(h, 2, 3, 3, nil); !slices.Equal(got, []int32{8, 4, 4}) || ext != 2 { // "6 7" last seen before 8 4 4
		t.Fatalf("draft %v, match %d: want the tokens after the latest earlier 6 7, a match of 2", got, ext)
	}
	h = append(h, 8)
	if got, ext := ngramDraft(h, 2, 3, 2, nil); !slices.Equal(got, []int32{4, 4}) || ext != 3 { // 6 7 8 → 4 4 (latest)
		t.Fatalf("draft %v, match %d: want [4 4], 3", got, ext)
	}
	if got, _ := ngramDraft([]int32{1, 2, 3, 4}, 2, 3, 4, nil); len(got) != 0 {
		t.Fatalf("draft %v from a history without a repeat", got)
	}
	if got, _ := ngramDraft([]int32{1, 2, 1, 2}, 2, 3, 5, nil); !slices.Equal(got, []int32{1, 2, 1, 2, 1}) {
		t.Fatalf("draft %v, want the loop continued, [1 2 1 2 1]", got)
	}
	if got, _ := ngramDraft([]int32{3, 9, 9, 9}, 2, 3, 3, nil); !slices.Equal(got, []int32{9, 9, 9}) {
		t.Fatalf("draft %v, want [9 9 9]", got)
	}
	// A 3-gram whose occurrence agrees further back: its match length is
	// counted on, up to specLongMatch.
	h = []int32{1, 2, 3, 4, 5, 6, 9, 8, 1, 2, 3, 4, 5, 6}
	if got, ext := ngramDraft(h, 1, 3, 2, nil); !slices.Equal(got, []int32{9, 8}) || ext != specLongMatch {
		t.Fatalf("draft %v, match %d: want [9 8], %d", got, ext, specLongMatch)
	}
	// One token, where no longer suffix recurs.
	if got, ext := ngramDraft([]int32{4, 7, 1, 5, 7}, 1, 3, 2, nil); !slices.Equal(got, []int32{1, 5}) || ext != 1 {
		t.Fatalf("draft %v, match %d: want [1 5], 1", got, ext)
	}
}

// The copy cursor resumes a copy that the answer broke with tokens of its
// own: an inserted token (50), then the source's next token re-tokenized
// (51 for 5), after which no two-token suffix of the answer occurs in the
// source, and the cursor drafts from the source token after the answer's
// last one (6 → 7 8 9).
func TestCopyCursor(t *testing.T) {
	h := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3} // the source, then a copy begun
	var p specState
	step := func(out []int32, kept int) []int32 {
		h = append(h, out[:kept+1]...)
		p.follow(h, kept, out[kept])
		return out
	}
	if d, ext := p.ngramPropose(h, 2, 3, 4, nil); !slices.Equal(d, []int32{4, 5, 6, 7}) || ext != 2 {
		t.Fatalf("draft %v, match %d: want the n-gram's [4 5 6 7], 2", d, ext)
	}
	step([]int32{4, 50}, 1) // 4 kept, then an inserted 50: the copy breaks before 5
	if d, ext := p.ngramPropose(h, 2, 3, 4, nil); !slices.Equal(d, []int32{5, 6, 7, 8}) || ext != specCursorExt {
		t.Fatalf("after an insertion: draft %v, match %d: want the cursor's [5 6 7 8]", d, ext)
	}
	step([]int32{51}, 0) // 5 replaced by 51
	if d, _ := ngramDraft(h, 2, 3, 3, nil); len(d) != 0 {
		t.Fatalf("the n-gram proposer drafted %v", d)
	}
	step([]int32{6}, 0) // the cursor's [5 6 7 8] was wrong again; then 6
	if d, ext := p.ngramPropose(h, 2, 3, 3, nil); !slices.Equal(d, []int32{7, 8, 9}) || ext != specCursorExt {
		t.Fatalf("after a replacement: draft %v, match %d: want [7 8 9] from the source's 6 near the cursor", d, ext)
	}
	// A copy that does not resume: the cursor lapses specCursorSpan
	// tokens after it last moved.
	for i := range specCursorSpan + 1 {
		d, _ := p.ngramPropose(h, 2, 3, 3, nil)
		if len(d) > 0 {
			step([]int32{int32(100 + i)}, 0)
		} else {
			h = append(h, int32(100+i))
		}
	}
	if d, _ := p.ngramPropose(h, 2, 3, 3, nil); len(d) != 0 {
		t.Fatalf("draft %v from a cursor %d tokens stale", d, specCursorSpan+1)
	}
}

// A short n-gram match that copies less than specCursorBeats tokens (the
// answer's own formatting, followed last time by another field) does not
// move the cursor off the copy.
func TestCopyCursorKeepsItsSource(t *testing.T) {
	h := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3}
	var p specState
	p.ngramPropose(h, 2, 3, 4, nil)
	h = append(h, 4, 60, 61, 70) // the copy breaks before 5: 60 61 is a new line, 70 another field
	p.follow(h[:13], 1, 60)
	// The answer's formatting recurs: 60 61 then (last time) 70; this time 5 follows.
	h = append(h, 60, 61)
	d, ext := p.ngramPropose(h, 2, 3, 2, nil)
	if !slices.Equal(d, []int32{70, 60}) || ext != 2 {
		t.Fatalf("draft %v, match %d: want the n-gram's [70 60], 2", d, ext)
	}
	h = append(h, 5)
	p.follow(h, 0, 5) // wrong at its first token
	if p.cursor != 4 {
		t.Fatalf("cursor at %d, want 4 (the source's 5) still", p.cursor)
	}
	if d, _ := p.ngramPropose(h, 2, 3, 2, nil); !slices.Equal(d, []int32{6, 7}) {
		t.Fatalf("draft %v: want the copy resumed, [6 7]", d)
	}
}

// score counts the drafts the step checked, carried or not: the token
// sampled after the kept drafts checks the next proposed one, and each
// draft counts in the record of its match length.
func TestSpecScore(t *testing.T) {
	prop := []int32{10, 11, 12, 13}
	for _, c := range []struct {
		ext, kept int
		next      int32
		tried     [specRecords]float64 // by match: under specLongMatch, longer, the copy cursor's
		hit       [specRecords]float64
	}{
		{3, 1, 11, [specRecords]float64{2, 0}, [specRecords]float64{2, 0}},                   // one carried and right, the next proposed one right too
		{3, 1, 99, [specRecords]float64{2, 0}, [specRecords]float64{1, 0}},                   // ... and wrong
		{4, 1, 11, [specRecords]float64{1, 1}, [specRecords]float64{1, 1}},                   // the second draft's match has run 5 tokens
		{5, 0, 10, [specRecords]float64{0, 1}, [specRecords]float64{0, 1}},                   // a plain step (nothing carried) checks the first
		{1, 4, 77, [specRecords]float64{4, 0}, [specRecords]float64{4, 0}},                   // all 4 kept: nothing left to check
		{0, 2, 12, [specRecords]float64{3, 0}, [specRecords]float64{3, 0}},                   // a model's drafts: one record
		{specCursorExt, 1, 11, [specRecords]float64{0, 0, 2}, [specRecords]float64{0, 0, 2}}, // the copy cursor's: its own
	} {
		var p specState
		p.score(prop, c.ext, c.kept, c.next)
		if p.tried != c.tried || p.hit != c.hit {
			t.Errorf("ext %d, kept %d, next %d: tried %v hit %v, want %v %v", c.ext, c.kept, c.next, p.tried, p.hit, c.tried, c.hit)
		}
	}
}

// alphaState is a record whose drafts are right with chance a, whatever
// their match.
func alphaState(a float64) *specState {
	const n = 1e6
	h := a*(n+1) - 0.5
	return &specState{tried: [specRecords]float64{n, n, n}, hit: [specRecords]float64{h, h, h}}
}

// stepMs is a decode step's time on the CPU by its rows, shaped as
// BenchmarkSpecStepRows measured SmolLM2 at 2 threads on a loaded machine:
// 4- and 8-row steps run whole on the 4- and 8-row dot kernels, 3 and 7
// rows add slower 2- and 1-row passes.
var stepMs = map[int]float64{1: 10, 2: 12.9, 3: 21.5, 4: 16.5, 5: 22, 6: 27, 7: 32.3, 8: 25.1, 9: 26}

// A sequence's draft length follows the step times by row count: with the
// times of stepMs, at α 0.5 it drafts 1 and at α 0.76 3 (2- and 4-row
// steps, the most tokens per second), where pricing every row alike (the
// straight line's c ≈ 0.18 here, draft i while α^i > c) drafted 2 and 6,
// the 3- and 7-row steps that cost most per token; at α 0.95 it drafts 8. A size whose one step fell in a burst of
// load is tried again once that step's weight has decayed.
func TestSpecDraftLenByStepRows(t *testing.T) {
	var r rowCost
	for range 5 {
		for rows := 1; rows <= 9; rows++ {
			r.add(rows, 1, time.Duration(stepMs[rows]*float64(time.Millisecond)))
		}
	}
	for _, c := range []struct {
		alpha float64
		want  int
	}{
		{0.1, 0},
		{0.3, 0}, // one draft: 1.3 tokens in 1.29 steps, under specMinGain
		{0.5, 1}, {0.76, 3}, {0.8, 3}, {0.95, 8},
	} {
		if n := r.draftLen(alphaState(c.alpha), 0, 8, 1); n != c.want {
			t.Errorf("α %.2f, K 8: %d drafts, want %d", c.alpha, n, c.want)
		}
	}
	if c := r.cost(); c < 0.2 || c > 0.35 {
		t.Errorf("row cost %.3f, want near 0.29 (12.9/10 - 1)", c)
	}
	r.add(9, 1, 500*time.Millisecond) // one 9-row step in a burst of load
	if n := r.draftLen(alphaState(0.95), 0, 8, 1); n == 8 {
		t.Errorf("α 0.95 just after a 500 ms 9-row step: still 8 drafts")
	}
	for range 200 { // plain and 4-row steps only: the slow one decays away
		r.add(1, 1, 10*time.Millisecond)
		r.add(4, 1, 16500*time.Microsecond)
	}
	if n := r.draftLen(alphaState(0.95), 0, 8, 1); n < 7 {
		t.Errorf("α 0.95, 400 steps after the slow one: %d drafts, want the long drafts tried again", n)
	}
}

// specTraffic is TestRandomTraffic's load with speculation forced on, on a
// 4-token vocabulary where drafts are often right: concurrent requests,
// cancels and aborts at random points, a pool small enough to preempt.
// Every step (inside Forward) the scheduler's and pool's invariants hold;
// every complete output equals the cache-free greedy reference (the hash
// model reads the KV of every position, so KV left from a rejected draft,
// or a prefix-cache entry made from one, changes the answer); at the end
// no block is used and drafts were both accepted and rejected.
func TestSpecRandomTrafficGreedy(t *testing.T) {
	m := newHashModel(4, 4096, 12, 8)
	e := newTestEngine(t, m, Config{MaxBatchTokens: 32, MaxSeqs: 8, MaxQueue: 64,
		Speculate: SpecConfig{Method: "ngram", K: 5, MinNGram: 2, Fixed: true}})
	runSpecTraffic(t, e, m, 9, e.sched.CheckInvariants)
	st := waitIdle(t, e)
	if st.KV.Used != 0 || st.KV.Free+st.KV.Cached != st.KV.Total {
		t.Fatalf("after all sequences: %+v", st.KV)
	}
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens || st.Preemptions == 0 {
		t.Fatalf("drafts %d, accepted %d, preemptions %d: the run did not exercise accept, reject and preempt",
			st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
	}
	if !st.Speculating || st.SpecMethod != "ngram" {
		t.Errorf("stats say speculating %v, proposer %q: want ngram, the metrics' proposer label", st.Speculating, st.SpecMethod)
	}
	t.Logf("drafts %d tokens %d accepted %d preemptions %d", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
}

// runSpecTraffic runs specTraffic's load on e: 6 clients of 25 requests each
// (specRequest, seeded from seed and the client), the first step held until
// every client's first, long request is in, and check run inside every
// Forward; it fails t on a request's error or check's first.
func runSpecTraffic(t *testing.T, e *Engine, m *hashModel, seed uint64, check func() error) {
	t.Helper()
	const clients, perClient = 6, 25
	var invErr error
	var longs sync.WaitGroup // the first step waits for every client's long request
	longs.Add(clients)
	first := true
	m.onForward = func(*kernels.Batch) error {
		if first {
			first = false
			longs.Wait()
		}
		if err := check(); err != nil && invErr == nil {
			invErr = err
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), seed))
			for i := range perClient {
				var submitted func()
				if i == 0 {
					submitted = longs.Done
				}
				if err := specRequest(e, m.reference, r, submitted); err != nil {
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
}

// specRequest runs one request of TestSpecRandomTrafficGreedy; a long one
// (each client's first, with submitted to call once it is in) needs most
// of the pool, which makes the clients preempt each other.
func specRequest(e *Engine, reference func(p []int32, n int, stops ...int32) []int32, r *rand.Rand, submitted func()) error {
	long := submitted != nil
	p := append([]int32(nil), deBruijn4[:r.IntN(len(deBruijn4))+1]...)
	for range r.IntN(30) {
		p = append(p, int32(r.IntN(4)))
	}
	n := 1 + r.IntN(40)
	if long {
		for len(p) < 40 {
			p = append(p, int32(r.IntN(4)))
		}
		p, n = p[:40], 40
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var stops []int32 // a stop token, often reached among accepted drafts
	if !long && r.IntN(3) == 0 {
		stops = []int32{int32(r.IntN(4))}
	}
	s, err := e.Submit(ctx, Request{Prompt: p, MaxTokens: n, Priority: r.IntN(3), StopTokens: stops})
	if long {
		submitted()
	}
	if err != nil {
		return err
	}
	stopAt, action := -1, r.IntN(4)
	if action < 2 {
		stopAt = r.IntN(n + 1)
	}
	var got []int32
	for {
		if len(got) == stopAt {
			if action == 0 {
				cancel()
			} else {
				s.Abort(CauseStall)
			}
		}
		tok, ok := <-s.Tokens()
		if !ok {
			break
		}
		got = append(got, tok.ID)
	}
	res, want := s.Result(), reference(p, n, stops...)
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

// waitIdle waits for the loop to publish a snapshot with nothing running.
func waitIdle(t *testing.T, e *Engine) *Stats {
	t.Helper()
	for range 1000 {
		if st := e.Stats(); st.Running == 0 && st.Waiting == 0 {
			return st
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("engine never idle")
	return nil
}

// TestSpecSamplingDistribution: with speculation on, a token produced by a
// verify row after an accepted draft follows the model's distribution. On
// a 4-token vocabulary at temperature 4, 3000 seeded runs of 3 tokens after a prompt whose
// every pair recurs (so each decode carries drafts), the third token,
// within the most frequent (first, second) pair, is compared with the
// model's softmax for that context by a chi-square test (3 degrees of
// freedom, p = 0.001). The same seeds give the same tokens with
// speculation off: one draw per token, in order.
func TestSpecSamplingDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("3000 generations")
	}
	m := newHashModel(4, 256, 64, 8)
	spec := newTestEngine(t, m, Config{MaxSeqs: 16, Speculate: SpecConfig{Method: "ngram", K: 3, MinNGram: 2, Fixed: true}})
	m2 := newHashModel(4, 256, 64, 8)
	plain := newTestEngine(t, m2, Config{MaxSeqs: 16})
	const runs = 3000
	outs := make([][]int32, runs)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < runs; i += 8 {
				seed := uint64(i)
				s, err := spec.Submit(bg, Request{Prompt: deBruijn4, MaxTokens: 3,
					Sampling: SamplingParams{Temperature: specTemp, Seed: &seed}})
				if err != nil {
					t.Error(err)
					return
				}
				for tok := range s.Tokens() {
					outs[i] = append(outs[i], tok.ID)
				}
			}
		})
	}
	wg.Wait()
	counts := map[[2]int32][4]float64{}
	for _, o := range outs {
		if len(o) != 3 {
			t.Fatalf("output %v", o)
		}
		c := counts[[2]int32{o[0], o[1]}]
		c[o[2]]++
		counts[[2]int32{o[0], o[1]}] = c
	}
	var best [2]int32
	for k, c := range counts {
		if c[0]+c[1]+c[2]+c[3] > sum4(counts[best]) {
			best = k
		}
	}
	obs := counts[best]
	n := sum4(obs)
	p := softmaxRow(m, specTemp, append(slices.Clone(deBruijn4), best[0], best[1]))
	chi := 0.0
	for v := range 4 {
		exp := n * p[v]
		chi += (obs[v] - exp) * (obs[v] - exp) / exp
	}
	st := spec.Stats()
	t.Logf("context %v: %v of %.0f, expected p %.3f; chi2 %.2f; drafts %d accepted %d", best, obs, n, p, chi, st.SpecDraftTokens, st.SpecAcceptedTokens)
	if chi > 16.27 {
		t.Fatalf("chi-square %.2f > 16.27 (3 dof, p=0.001): verify rows do not sample the model's distribution", chi)
	}
	if st.SpecAcceptedTokens == 0 {
		t.Fatal("no draft accepted: the third tokens did not come from verify rows")
	}
	for i := range 40 { // seeds reproduce without speculation
		seed := uint64(i)
		got, _ := collect(t, submit(t, plain, Request{Prompt: deBruijn4, MaxTokens: 3,
			Sampling: SamplingParams{Temperature: specTemp, Seed: &seed}}), 0)
		if !slices.Equal(got, outs[i]) {
			t.Fatalf("seed %d: %v without speculation, %v with", i, got, outs[i])
		}
	}
}

// specTemp flattens the hash model's logits (0…8) so every token is likely.
const specTemp = 4

func sum4(c [4]float64) float64 { return c[0] + c[1] + c[2] + c[3] }

// softmaxRow is the hash model's next-token distribution after toks at temp.
func softmaxRow(m *hashModel, temp float64, toks []int32) []float64 {
	var h, prev uint64 = 0, kvRoot
	for pos, tok := range toks {
		prev = kvOf(prev, tok, pos)
		h = mix(h ^ prev)
	}
	l := make([]float32, m.vocab)
	m.logitsOf(h, l)
	p := make([]float64, m.vocab)
	z := 0.0
	for i, x := range l {
		p[i] = math.Exp(float64(x) / temp)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// With speculation on, a seeded generation is the one without speculation,
// token for token, and cut after k tokens and resumed it continues exactly
// as the uninterrupted one: one PRNG draw per token, whatever the drafts.
func TestSpecSeededResume(t *testing.T) {
	m := newHashModel(4, 1024, 64, 16)
	e := newTestEngine(t, m, Config{Speculate: SpecConfig{Method: "ngram", K: 4, MinNGram: 2, Fixed: true}})
	m2 := newHashModel(4, 1024, 64, 16)
	plain := newTestEngine(t, m2, Config{})
	for _, sp := range []SamplingParams{
		{Seed: seed(42)},
		{Temperature: specTemp, Seed: seed(42)},
		{Temperature: 2, TopK: 3, MinP: 0.05, FrequencyPenalty: 0.3, Seed: seed(7)},
	} {
		const n = 40
		full, _ := collect(t, submit(t, e, Request{Prompt: deBruijn4, MaxTokens: n, Sampling: sp}), 0)
		want, _ := collect(t, submit(t, plain, Request{Prompt: deBruijn4, MaxTokens: n, Sampling: sp}), 0)
		if !slices.Equal(full, want) {
			t.Fatalf("%+v: with speculation %v, without %v", sp, full, want)
		}
		for _, k := range []int{1, 9, n - 1} {
			rest, _ := collect(t, submit(t, e, Request{Prompt: deBruijn4, MaxTokens: n, Sampling: sp, Resume: full[:k]}), k)
			if !slices.Equal(rest, full[k:]) {
				t.Fatalf("%+v: resumed after %d: %v, uninterrupted %v", sp, k, rest, full[k:])
			}
		}
	}
	if st := e.Stats(); st.SpecAcceptedTokens == 0 {
		t.Fatal("no draft accepted")
	}
}

// A new sequence starts from the engine's recent acceptance: after drafts
// that mostly missed (free text), its first proposal drafts nothing where
// the flat ½ of a sequence with no record would draft one; after drafts
// that held, it drafts long at once; and its own verifications soon
// outweigh the seed.
func TestSpecPriorSeedsNewSequence(t *testing.T) {
	var r rowCost
	for range 5 {
		for rows := 1; rows <= 9; rows++ {
			r.add(rows, 1, time.Duration(stepMs[rows]*float64(time.Millisecond)))
		}
	}
	var fresh specState
	if n := r.draftLen(&fresh, 0, 8, 1); n != 1 {
		t.Fatalf("no record, no prior: %d drafts, want the flat ½'s 1", n)
	}
	var missing, holding specPrior
	for range 20 {
		missing.add([specRecords]float64{4, 0}, [specRecords]float64{1, 0}) // 1 of 4 right
		holding.add([specRecords]float64{8, 0}, [specRecords]float64{7.6, 0})
	}
	var s specState
	missing.seed(&s)
	if n := r.draftLen(&s, 0, 8, 1); n != 0 {
		t.Errorf("seeded by a 0.25 engine rate: %d drafts, want 0", n)
	}
	s = specState{}
	holding.seed(&s)
	if n := r.draftLen(&s, 0, 8, 1); n < 3 {
		t.Errorf("seeded by a 0.95 engine rate: %d drafts, want 3 or more", n)
	}
	s = specState{}
	missing.seed(&s)
	for range 6 { // its own drafts all hold
		s.record(0, 4, 4)
	}
	if n := r.draftLen(&s, 0, 8, 1); n < 3 {
		t.Errorf("seeded by a 0.25 engine rate, then 6 verifications all right: %d drafts, want 3 or more", n)
	}
}
