package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/scheduler"
)

// skewModel is a hash model as a draft that is wrong on purpose wherever
// the position is a multiple of every: its argmax there is the next token
// over. The hash model reads the KV of every position, so its other
// guesses are right only if its KV is the sequence's.
type skewModel struct {
	*hashModel
	every int
}

func (m *skewModel) Forward(b *kernels.Batch) ([]float32, error) {
	l, err := m.hashModel.Forward(b)
	if err != nil {
		return nil, err
	}
	for i, r := range b.LogitRows {
		if int(b.Positions[r])%m.every == 0 {
			row := l[i*m.vocab : (i+1)*m.vocab]
			row[(argmax(row)+1)%int32(m.vocab)] = 100
		}
	}
	return l, nil
}

// checkDraftKV checks the draft pool's invariants and that every slot the
// drafter counts as computed holds the hash model's KV of the tokens it
// says are there: the sequence's own, then the drafts it fed back.
func checkDraftKV(d *drafter, m *hashModel) error {
	if err := d.pool.CheckInvariants(); err != nil {
		return err
	}
	var tables []*kvcache.Table
	for s, ds := range d.seqs {
		if s.finished {
			return fmt.Errorf("sequence %d finished but holds %d draft blocks", s.id, ds.table.Len())
		}
		if st := s.sq.State(); st != scheduler.StateRunning && ds.table.Len() > 0 {
			return fmt.Errorf("sequence %d is %v but holds %d draft blocks", s.id, st, ds.table.Len())
		}
		tables = append(tables, &ds.table)
		prev := uint64(kvRoot)
		blocks := ds.table.Blocks()
		if len(blocks) < d.pool.BlocksFor(ds.computed) {
			return fmt.Errorf("sequence %d: %d blocks for %d computed positions", s.id, len(blocks), ds.computed)
		}
		for pos := range ds.computed {
			tok := int32(0)
			if pos < ds.at {
				tok = s.sq.Tokens[pos]
			} else {
				tok = ds.out[pos-ds.at]
			}
			prev = kvOf(prev, tok, pos)
			if got := m.kv[int(blocks[pos/m.bs])*m.bs+pos%m.bs]; got != prev {
				return fmt.Errorf("sequence %d: draft KV at %d of %d is stale", s.id, pos, ds.computed)
			}
		}
	}
	return d.pool.CheckRefs(tables)
}

// A draft that is the target itself (another instance of the same hash
// model) is right every time under greedy: every draft token of every
// step is accepted, which holds only while its KV follows each sequence.
// Output equals the cache-free reference, alone and in a full batch.
func TestDraftSelfGreedy(t *testing.T) {
	for _, seqs := range []int{1, 6} {
		t.Run(fmt.Sprint(seqs), func(t *testing.T) {
			m, dm := newHashModel(5, 1024, 64, 8), newHashModel(5, 1024, 64, 8)
			e := newTestEngine(t, m, Config{MaxBatchTokens: 64, MaxSeqs: seqs,
				Speculate: SpecConfig{Method: "draft", K: 4, Fixed: true, Draft: dm, DraftBlocks: 64, LogitRows: seqs * 5}})
			var checkErr error
			m.onForward = func(*kernels.Batch) error {
				if err := checkDraftKV(e.draft, dm); err != nil && checkErr == nil {
					checkErr = err
				}
				return nil
			}
			var wg sync.WaitGroup
			for i := range seqs {
				p := prompt(5+3*i, int32(i), 5)
				s := submit(t, e, Request{Prompt: p, MaxTokens: 30})
				wg.Go(func() {
					got, res := collect(t, s, 0)
					if want := m.reference(p, 30); !slices.Equal(got, want) || res.Finish != FinishLength {
						t.Errorf("sequence %d: %v (%v), want %v", i, got, res.Finish, want)
					}
				})
			}
			wg.Wait()
			if checkErr != nil {
				t.Fatal(checkErr)
			}
			st := waitIdle(t, e)
			if st.SpecDraftTokens == 0 || st.SpecAcceptedTokens != st.SpecDraftTokens {
				t.Fatalf("%d draft tokens, %d accepted: the target's own guesses were not all taken", st.SpecDraftTokens, st.SpecAcceptedTokens)
			}
			if u := e.draft.pool.Usage(); u.Used != 0 || len(e.draft.seqs) != 0 {
				t.Fatalf("draft pool after all sequences: %+v, %d sequences held", u, len(e.draft.seqs))
			}
			t.Logf("%d draft tokens all accepted in %d verifications; %d draft forwards", st.SpecDraftTokens, st.SpecDrafts, e.draft.forwards)
		})
	}
}

// TestDraftRandomTraffic is TestSpecRandomTrafficGreedy's load (cancels,
// aborts, stop tokens, preemption) with a draft model wrong at every third
// position: output equals the reference; at every step the draft pool's
// invariants hold and its KV is the sequences' (rejected drafts' KV rolled
// back); at the end the draft pool is empty, as the target's is.
func TestDraftRandomTraffic(t *testing.T) {
	m := newHashModel(4, 4096, 12, 8)
	dm := &skewModel{newHashModel(4, 4096, 24, 8), 3}
	e := newTestEngine(t, m, Config{MaxBatchTokens: 32, MaxSeqs: 8, MaxQueue: 64,
		Speculate: SpecConfig{Method: "draft", K: 5, Fixed: true, Draft: dm, DraftBlocks: 24}})
	runSpecTraffic(t, e, m, 11, func() error { return errors.Join(e.sched.CheckInvariants(), checkDraftKV(e.draft, dm.hashModel)) })
	st := waitIdle(t, e)
	if st.KV.Used != 0 {
		t.Fatalf("target pool after all sequences: %+v", st.KV)
	}
	if u := e.draft.pool.Usage(); u.Used != 0 || u.Free != u.Total || len(e.draft.seqs) != 0 {
		t.Fatalf("draft pool after all sequences: %+v, %d sequences held", u, len(e.draft.seqs))
	}
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens || st.Preemptions == 0 {
		t.Fatalf("drafts %d, accepted %d, preemptions %d: the run did not exercise accept, reject and preempt",
			st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
	}
	t.Logf("drafts %d tokens %d accepted %d preemptions %d; %d draft forwards, %d rows", st.SpecDrafts, st.SpecDraftTokens,
		st.SpecAcceptedTokens, st.Preemptions, e.draft.forwards, e.draft.rows)
}

// failingDraft fails its forward passes while fail is set.
type failingDraft struct {
	*hashModel
	fail bool
}

func (m *failingDraft) Forward(b *kernels.Batch) ([]float32, error) {
	if m.fail {
		return nil, errors.New("draft device lost")
	}
	return m.hashModel.Forward(b)
}

// A draft model that fails costs its steps their drafts, never the
// target's output; its KV is dropped and rebuilt once it works again.
func TestDraftFailureOnlyDrops(t *testing.T) {
	m := newHashModel(5, 1024, 64, 8)
	dm := &failingDraft{hashModel: newHashModel(5, 1024, 64, 8)}
	e := newTestEngine(t, m, Config{Speculate: SpecConfig{Method: "draft", K: 3, Fixed: true, Draft: dm, DraftBlocks: 64}})
	steps := 0
	m.onForward = func(*kernels.Batch) error {
		steps++
		dm.fail = steps >= 3 && steps < 6
		return nil
	}
	p := prompt(9, 1, 5)
	got, res := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 40}), 0)
	if want := m.reference(p, 40); !slices.Equal(got, want) || res.Finish != FinishLength {
		t.Fatalf("%v (%v), want %v", got, res.Finish, want)
	}
	st := waitIdle(t, e)
	if e.draft.failures == 0 || st.SpecAcceptedTokens != st.SpecDraftTokens || st.SpecDraftTokens == 0 {
		t.Fatalf("%d failed passes, %d drafts, %d accepted", e.draft.failures, st.SpecDraftTokens, st.SpecAcceptedTokens)
	}
}

func TestDraftConfigRefused(t *testing.T) {
	m := newHashModel(5, 1024, 64, 8)
	for _, tc := range []struct {
		name string
		spec SpecConfig
	}{
		{"no draft", SpecConfig{Method: "draft", DraftBlocks: 8}},
		{"other vocab", SpecConfig{Method: "draft", Draft: newHashModel(6, 1024, 8, 8), DraftBlocks: 8}},
		{"no draft blocks", SpecConfig{Method: "draft", Draft: newHashModel(5, 1024, 8, 8)}},
		{"draft without method", SpecConfig{Method: "ngram", Draft: newHashModel(5, 1024, 8, 8), DraftBlocks: 8}},
		{"draft and speculation off", SpecConfig{Draft: newHashModel(5, 1024, 8, 8), DraftBlocks: 8}},
	} {
		_, err := New(m, Config{Blocks: 64, BlockSize: 8, Speculate: tc.spec})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// A sequence that is not speculating (spec.go's want 0) runs the draft for
// its shadow check only every draftProbeEvery steps: a draft forward is
// not the free lookup an n-gram is.
func TestDraftOffProbesRarely(t *testing.T) {
	d := &drafter{seqs: make(map[*Sequence]*draftSeq), collecting: true}
	s, e := &Sequence{}, &Engine{}
	e.cfg.Speculate.Fixed = true // the wants as given: worth is TestDraftWorth's
	for i := 1; i <= 2*draftProbeEvery; i++ {
		d.wants = d.wants[:0]
		d.propose(e, s, 0)
		if probed := len(d.wants) == 1; probed != (i%draftProbeEvery == 0) {
			t.Fatalf("call %d: probed %v", i, probed)
		}
		if len(d.wants) == 1 {
			d.seqs[s].idle = 0 // as draft does when it drafts
		}
	}
	d.wants = d.wants[:0]
	d.propose(e, s, 3)
	if len(d.wants) != 1 || d.wants[0].n != 3 {
		t.Fatalf("a speculating sequence's want: %+v", d.wants)
	}
}

// worth adds the draft forward's cost to the row cost: a draft as slow as
// the target is worth nothing at an acceptance of 0.9, one a tenth of it
// is worth drafts while 0.9^i > c + 0.1.
func TestDraftWorth(t *testing.T) {
	e, s := &Engine{}, &Sequence{}
	s.spec.record(0, 100, 90) // α ≈ 0.9
	c := e.specCost.cost()    // the prior
	d := &drafter{draftClock: draftClock{targetTime: 1e-3}}
	d.forwardTime = 1e-3
	if n := d.worth(e, s, 6); n != 0 {
		t.Fatalf("a draft as slow as the target: %d drafts worth it", n)
	}
	d.forwardTime = 1e-4
	want, a := 0, s.spec.alpha()
	for p := a; want < 6 && p > c+0.1; p *= a {
		want++
	}
	if n := d.worth(e, s, 6); n != want || n == 0 {
		t.Fatalf("a tenth of the target's time: %d drafts, want %d", n, want)
	}
	if n := (&drafter{}).worth(e, s, 6); n < want {
		t.Fatalf("before any timing: %d drafts, fewer than %d", n, want)
	}
}

// A prompt goes through the draft in chunks of at most the scheduler's
// prefill cap per step, as it goes through the target beside decoding
// streams, so a new sequence never stalls the others for a whole prompt.
func TestDraftPromptChunked(t *testing.T) {
	m, dm := newHashModel(5, 1024, 64, 8), newHashModel(5, 1024, 64, 8)
	const cap = 16
	e := newTestEngine(t, m, Config{MaxBatchTokens: 256, MaxPrefillTokensWithDecodes: cap, MaxSeqs: 2,
		Speculate: SpecConfig{Method: "draft", K: 3, Fixed: true, Draft: dm, DraftBlocks: 64, LogitRows: 8}})
	most := 0
	dm.onForward = func(b *kernels.Batch) error {
		for _, sr := range b.Seqs {
			most = max(most, sr.End-sr.Start)
		}
		return nil
	}
	p := prompt(100, 3, 5)
	got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 30}), 0)
	if want := m.reference(p, 30); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if st := waitIdle(t, e); most > cap || st.SpecAcceptedTokens == 0 {
		t.Fatalf("largest draft chunk %d rows (cap %d), %d drafts accepted", most, cap, st.SpecAcceptedTokens)
	}
}

// Sampled output with a draft model is the output without, seed for seed,
// for single requests and for a group's choices (forked after the shared
// prompt, each drafting from a draft KV of its own): a greedy draft is a
// point mass, so verification draws the same numbers in the same order.
func TestDraftSeededAndChoices(t *testing.T) {
	m, dm := newHashModel(4, 1024, 128, 8), &skewModel{newHashModel(4, 1024, 128, 8), 5}
	e := newTestEngine(t, m, Config{MaxSeqs: 4,
		Speculate: SpecConfig{Method: "draft", K: 4, Fixed: true, Draft: dm, DraftBlocks: 128, LogitRows: 20}})
	plain := newTestEngine(t, newHashModel(4, 1024, 128, 8), Config{MaxSeqs: 4})
	for _, sp := range []SamplingParams{
		{Seed: seed(42)},
		{Temperature: specTemp, Seed: seed(42)},
		{Temperature: 2, TopK: 3, MinP: 0.05, FrequencyPenalty: 0.3, Seed: seed(7)},
	} {
		req := Request{Prompt: deBruijn4, MaxTokens: 40, Sampling: sp}
		got, _ := collect(t, submit(t, e, req), 0)
		want, _ := collect(t, submit(t, plain, req), 0)
		if !slices.Equal(got, want) {
			t.Fatalf("%+v: with a draft model %v, without %v", sp, got, want)
		}
		gs, ps := submitGroup(t, e, bg, choices(3, req)), submitGroup(t, plain, bg, choices(3, req))
		for i := range gs {
			got, _ := collect(t, gs[i], 0)
			want, _ := collect(t, ps[i], 0)
			if !slices.Equal(got, want) {
				t.Fatalf("%+v choice %d: with a draft model %v, without %v", sp, i, got, want)
			}
		}
	}
	st := waitIdle(t, e)
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
		t.Fatalf("%d draft tokens, %d accepted: not both accepted and rejected", st.SpecDraftTokens, st.SpecAcceptedTokens)
	}
	if u := e.draft.pool.Usage(); u.Used != 0 || len(e.draft.seqs) != 0 {
		t.Fatalf("draft pool after all sequences: %+v, %d sequences held", u, len(e.draft.seqs))
	}
}
