package engine

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Speculation with the target's MTP head (mtp.go) on a tiny synthetic
// Qwen3.5 whose every layer is full attention (no recurrent state to roll
// back) and which carries a nextn block written by modeltest, made to echo
// the trunk (modeltest.Qwen35Spec.MTPEcho) so that its guesses are right
// where the greedy output repeats a token (11 of 92 tokens with seed 63):
// drafts are both accepted and rejected.

var mtpAttnSpec = modeltest.Qwen35Spec{Layers: 3, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, Interval: 1, KHeads: 2, VHeads: 4, StateSize: 16, ContextLen: 1024, Seed: 63, MTP: true, MTPEcho: true}

const mtpK = 3

// mtpHybridSpec is the hybrid case: DeltaNet layers with full attention
// every second, whose recurrent state the engine rolls back after a
// verification (state.go) while the head's KV is truncated.
var mtpHybridSpec = func() modeltest.Qwen35Spec {
	s := mtpAttnSpec
	s.Layers, s.Interval = 4, 2
	return s
}()

// loadMTPModel loads spec (F32) with rows logit rows and readies its head
// with headBlocks KV blocks. The engine's model is hooked, or for a hybrid
// the model with its state slots and rollback (spec_hybrid_test.go).
func loadMTPModel(t testing.TB, spec modeltest.Qwen35Spec, blocks, batch, rows, headBlocks int) (*hooked, Model, *models.Qwen35, *models.Qwen35MTP) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35-mtp.gguf")
	if err := modeltest.WriteQwen35GGUF(path, spec, kernels.F32); err != nil {
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
	h, err := m.NewMTP(g, headBlocks)
	if err != nil {
		t.Fatal(err)
	}
	hk := &hooked{Model: m}
	if m.StateSlots() == 0 {
		return hk, hk, m, h
	}
	return hk, &rollHybrid{hookedHybrid: &hookedHybrid{hooked: hk, r: m}, q: m, drafts: map[int32]int{}}, m, h
}

// countingHead is the head, recording the most logit rows (sequences
// drafting) one of its forwards carried.
type countingHead struct {
	MTPHead
	most int
}

func (c *countingHead) Forward(b *kernels.Batch, hidden []int32, fromHead bool) ([]float32, error) {
	c.most = max(c.most, len(b.LogitRows))
	return c.MTPHead.Forward(b, hidden, fromHead)
}

func mtpEngine(t testing.TB, m Model, h MTPHead, seqs int) *Engine {
	sc := SpecConfig{K: mtpK, Fixed: true, LogitRows: seqs * (1 + mtpK)}
	if h != nil {
		sc.Method, sc.MTP = "mtp", h
	}
	return newEngineOn(t, m, Config{Blocks: 96, BlockSize: 16, MaxBatchTokens: 64, MaxSeqs: seqs, MaxQueue: 64, Speculate: sc})
}

// mtpReference is the head's greedy chain of k drafts after toks, computed
// from scratch: the trunk over toks[:n−1] in one forward, the head over
// every position pairing token p with the trunk's h(p−1) (a zero h at 0,
// and through position cached, which a prefix-cache hit's sequence never
// had the trunk compute), then chained on its own state. Beside each
// draft, the top-2 margin of its logits.
func mtpReference(t *testing.T, m *models.Qwen35, h *models.Qwen35MTP, toks []int32, cached, k int) (drafts []int32, margins []float32) {
	t.Helper()
	n := len(toks)
	batch := func(from int, seq []int32, logits bool) *kernels.Batch {
		b := &kernels.Batch{}
		var table []int32
		for i := range (len(seq)+15)/16 + 1 {
			table = append(table, int32(i))
		}
		for p := from; p < len(seq); p++ {
			if logits {
				b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)))
			}
			b.Tokens = append(b.Tokens, seq[p])
			b.Positions = append(b.Positions, int32(p))
			b.Slots = append(b.Slots, int32(p))
		}
		b.Seqs = []kernels.SeqRows{{Start: 0, End: len(b.Tokens), ContextLen: len(seq), Prompt: len(seq), Blocks: table}}
		return b
	}
	if _, err := m.Forward(batch(0, toks[:n-1], false)); err != nil {
		t.Fatal(err)
	}
	hidden := make([]int32, n)
	for i := range hidden {
		hidden[i] = int32(i) - 1
		if i <= cached {
			hidden[i] = -1
		}
	}
	b := batch(0, toks, false)
	b.LogitRows = []int32{int32(n - 1)}
	seq := slices.Clone(toks)
	logits, err := h.Forward(b, hidden, false)
	for i := 0; ; i++ {
		if err != nil {
			t.Fatal(err)
		}
		d := argmax(logits)
		drafts, margins = append(drafts, d), append(margins, top2Margin(logits))
		if i == k-1 {
			return drafts, margins
		}
		seq = append(seq, d)
		logits, err = h.Forward(batch(len(seq)-1, seq, true), []int32{0}, true)
	}
}

func TestMTPSpecGreedy(t *testing.T)       { testMTPSpecGreedy(t, mtpAttnSpec) }
func TestMTPSpecGreedyHybrid(t *testing.T) { testMTPSpecGreedy(t, mtpHybridSpec) }

// testMTPSpecGreedy: greedy output with MTP speculation equals the output
// without it, token for token, each prompt alone and then all together in
// one batch (where they hit the prefix cache), and every draft the engine
// verified is the head's chain computed from scratch over the sequence's
// tokens (up to a draft whose reference top-2 margin is within rounding):
// the head's KV rows pair each token with the trunk's state at the
// position before (a zero state where a cache hit skipped the trunk),
// across prompt chunks, sequences batched together, verified and rejected
// drafts (and, on the hybrid, the recurrent state rolled back). Afterwards
// no block of either pool, nor state slot, is held.
func testMTPSpecGreedy(t *testing.T, spec modeltest.Qwen35Spec) {
	const n, seqs = 24, 4
	prompts := vocabPrompts(seqs, spec.Vocab)
	// Longer than a step (64 rows): its first chunk's step drafts nothing,
	// and the head's rows of that chunk are written before the next forward.
	prompts[3] = append(prompts[3], prompt(60, 9, spec.Vocab)...)
	_, plainM, _, _ := loadMTPModel(t, spec, 96, 64, seqs*(1+mtpK), 8)
	plain := mtpEngine(t, plainM, nil, seqs)
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i], _ = collect(t, submit(t, plain, Request{Prompt: p, MaxTokens: n}), 0)
	}

	hm, em, _, head := loadMTPModel(t, spec, 96, 64, seqs*(1+mtpK), 96)
	_, _, refM, refHead := loadMTPModel(t, spec, 16, 256, 8, 16)
	counting := &countingHead{MTPHead: head}
	e := mtpEngine(t, em, counting, seqs)
	// The prompts' lengths differ: a batch's sequence is known by its Prompt.
	byLen := map[int]int{}
	for i, p := range prompts {
		byLen[len(p)] = i
	}
	type verified struct {
		prompt, at int // the sequence, its decode row's position
		drafts     []int32
	}
	var steps []verified
	first := map[int]int{} // the first position the target computed of each sequence
	record := func(b *kernels.Batch) error {
		for _, s := range b.Seqs {
			i := byLen[s.Prompt]
			if _, ok := first[i]; !ok {
				first[i] = int(b.Positions[s.Start])
			}
			if s.End-s.Start > 1 && int(b.Positions[s.Start]) >= s.Prompt {
				steps = append(steps, verified{i, int(b.Positions[s.Start]), slices.Clone(b.Tokens[s.Start+1 : s.End])})
			}
		}
		return nil
	}
	checked, close, cachedSeqs := 0, 0, 0
	check := func(what string, out [][]int32) {
		t.Helper()
		for _, v := range steps {
			all := append(slices.Clone(prompts[v.prompt]), out[v.prompt]...)
			ref, margins := mtpReference(t, refM, refHead, all[:v.at+1], first[v.prompt], len(v.drafts))
			for j, d := range v.drafts {
				if d != ref[j] {
					if margins[j] > 1e-3 {
						t.Fatalf("%s: prompt %d, step at %d: drafts %v, the head from scratch %v (margin %.3g at %d)", what, v.prompt, v.at, v.drafts, ref, margins[j], j)
					}
					close++
					break
				}
				checked++
			}
		}
	}
	hm.hook = record
	for i, p := range prompts {
		steps, first = steps[:0], map[int]int{}
		got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
		if !slices.Equal(got, want[i]) {
			t.Fatalf("alone: prompt %d: with MTP speculation %v, without %v", i, got, want[i])
		}
		out := make([][]int32, len(prompts))
		out[i] = got
		check("alone", out)
	}
	aloneSt := *e.Stats()
	aloneChecked := checked
	if checked < 20 {
		t.Fatalf("only %d drafts checked against the head (%d within rounding)", checked, close)
	}
	hm.hook = nil
	counting.most = 0
	steps, first = steps[:0], map[int]int{}
	together := runAtOnce(t, e, func(h func(*kernels.Batch) error) {
		hm.hook = func(b *kernels.Batch) error { return cmp.Or(h(b), record(b)) }
	}, prompts, n)
	for i := range prompts {
		if !slices.Equal(together[i], want[i]) {
			t.Fatalf("together: prompt %d: with MTP speculation %v, without %v", i, together[i], want[i])
		}
		if first[i] > 0 {
			cachedSeqs++
		}
	}
	check("together", together)
	if cachedSeqs == 0 || checked-aloneChecked < 20 {
		t.Fatalf("together: %d sequences started from the prefix cache, %d drafts checked", cachedSeqs, checked-aloneChecked)
	}
	st := waitIdle(t, e)
	t.Logf("alone: drafts %d, draft tokens %d, accepted %d; in all: %d, %d, %d; %d drafts checked against the head from scratch (%d together, %d sequences of which started from the prefix cache), %d stopped at a rounding tie; head forwards %d of %d rows",
		aloneSt.SpecDrafts, aloneSt.SpecDraftTokens, aloneSt.SpecAcceptedTokens, st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens,
		checked, checked-aloneChecked, cachedSeqs, close, e.mtp.forwards, e.mtp.rows)
	if st.SpecDrafts == aloneSt.SpecDrafts || aloneSt.SpecAcceptedTokens == 0 || aloneSt.SpecAcceptedTokens == aloneSt.SpecDraftTokens {
		t.Fatalf("alone %d draft tokens, %d accepted; in all %d drafts: the runs did not both accept and reject, together", aloneSt.SpecDraftTokens, aloneSt.SpecAcceptedTokens, st.SpecDrafts)
	}
	if counting.most < seqs {
		t.Fatalf("together: at most %d sequences drafted in one head forward, want all %d", counting.most, seqs)
	}
	if st.KV.Used != 0 || st.KV.StatesUsed != 0 || len(e.mtp.seqs) != 0 || e.mtp.pool.Usage().Used != 0 {
		t.Fatalf("after all sequences: KV %+v, head sequences %d, head KV %+v", st.KV, len(e.mtp.seqs), e.mtp.pool.Usage())
	}
}

// TestMTPConfigRefused: method mtp without a head, a head under another
// method, and a head of another block size are configuration errors.
func TestMTPConfigRefused(t *testing.T) {
	hm, _, _, head := loadMTPModel(t, mtpAttnSpec, 32, 32, 8, 8)
	for _, tc := range []struct {
		name string
		sc   SpecConfig
		bs   int
	}{
		{"no head", SpecConfig{Method: "mtp"}, 16},
		{"head under ngram", SpecConfig{Method: "ngram", MTP: head}, 16},
		{"block size", SpecConfig{Method: "mtp", MTP: head}, 32},
	} {
		_, err := New(hm, Config{Blocks: 32, BlockSize: tc.bs, Speculate: tc.sc})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// TestMTPConstrainedNoHeadRows: a constrained sequence never drafts
// (spec.go), so the head computes nothing for it, while it is served as
// without speculation; an unconstrained one beside it drafts.
func TestMTPConstrainedNoHeadRows(t *testing.T) {
	_, plainM, _, _ := loadMTPModel(t, mtpAttnSpec, 96, 64, 2*(1+mtpK), 8)
	_, em, _, head := loadMTPModel(t, mtpAttnSpec, 96, 64, 2*(1+mtpK), 96)
	plain, e := mtpEngine(t, plainM, nil, 2), mtpEngine(t, em, head, 2)
	p := prompt(12, 3, mtpAttnSpec.Vocab)
	run := func(e *Engine) []int32 {
		c := &stepConstraint{mod: 5, salt: 1, vocab: mtpAttnSpec.Vocab}
		out, r := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 12, Constraint: c}), 0)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return out
	}
	want, got := run(plain), run(e)
	if !slices.Equal(got, want) {
		t.Fatalf("constrained: with MTP speculation %v, without %v", got, want)
	}
	if st := waitIdle(t, e); st.SpecDrafts != 0 || e.mtp.rows != 0 {
		t.Fatalf("a constrained sequence alone: %d drafts, %d head rows", st.SpecDrafts, e.mtp.rows)
	}
	collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 12}), 0)
	if st := waitIdle(t, e); st.SpecDrafts == 0 || e.mtp.rows == 0 {
		t.Fatalf("an unconstrained sequence: %d drafts, %d head rows", st.SpecDrafts, e.mtp.rows)
	}
}

// TestMTPSpecPreemptionAndFullHeadPool: with a target pool too small for
// the batch (sequences preempted, recomputed from position 0: their head
// state starts over) and a head pool too small for all of them (a sequence
// without head room drafts nothing until it has some), greedy output is
// still the plain output, drafts were still made, and afterwards, with a
// sequence cancelled midway too, neither pool holds a block.
func TestMTPSpecPreemptionAndFullHeadPool(t *testing.T) {
	const n, seqs = 40, 6
	prompts := vocabPrompts(seqs, mtpAttnSpec.Vocab)
	_, plainM, _, _ := loadMTPModel(t, mtpAttnSpec, 96, 64, seqs*(1+mtpK), 8)
	plain := mtpEngine(t, plainM, nil, seqs)
	want := make([][]int32, seqs)
	for i, p := range prompts {
		want[i], _ = collect(t, submit(t, plain, Request{Prompt: p, MaxTokens: n}), 0)
	}
	hm, em, _, head := loadMTPModel(t, mtpAttnSpec, 12, 64, seqs*(1+mtpK), 8)
	e := newEngineOn(t, em, Config{Blocks: 12, BlockSize: 16, MaxBatchTokens: 64, MaxSeqs: seqs, MaxQueue: 64,
		Speculate: SpecConfig{Method: "mtp", MTP: head, K: mtpK, Fixed: true, LogitRows: seqs * (1 + mtpK)}})
	got := runAtOnce(t, e, func(h func(*kernels.Batch) error) { hm.hook = h }, prompts, n)
	for i := range prompts {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("prompt %d: with MTP speculation %v, without %v", i, got[i], want[i])
		}
	}
	// A sequence cancelled while it drafts gives its head blocks back too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := e.Submit(ctx, Request{Prompt: prompts[0], MaxTokens: 150})
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for range s.Tokens() {
		if k++; k == 8 {
			cancel()
		}
	}
	if r := s.Result(); r.Finish != FinishAbort {
		t.Fatalf("cancelled sequence: %+v", r)
	}
	st := waitIdle(t, e)
	t.Logf("preemptions %d; drafts %d, draft tokens %d, accepted %d; head forwards %d of %d rows", st.Preemptions, st.SpecDrafts,
		st.SpecDraftTokens, st.SpecAcceptedTokens, e.mtp.forwards, e.mtp.rows)
	if st.Preemptions == 0 || st.SpecDrafts == 0 {
		t.Fatalf("%d preemptions, %d drafts: the run did not preempt and speculate", st.Preemptions, st.SpecDrafts)
	}
	if st.KV.Used != 0 || len(e.mtp.seqs) != 0 || e.mtp.pool.Usage().Used != 0 {
		t.Fatalf("after all sequences: KV %+v, head sequences %d, head KV %+v", st.KV, len(e.mtp.seqs), e.mtp.pool.Usage())
	}
}
