package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Speculation on a sliding-window model whose window layers keep their KV
// in kvcache's window group: greedy output with drafts equals output
// without, token for token, while the window slides under the drafts.

// specWindowModel is a windowHashModel on a 4-token vocabulary, where
// n-gram drafts are often right and often wrong, with a window of 6 over
// 4-token blocks: a step of a decode and 4 drafts always spans two window
// blocks, and the window's first block moves on every fourth token.
func specWindowModel(blocks, winBlocks, bs, window int) *windowHashModel {
	return &windowHashModel{hashModel: newHashModel(4, 4096, blocks, bs), window: window, wkv: make([]uint64, winBlocks*bs)}
}

// windowPrompts start with deBruijn4 (so the proposer always finds the last
// two tokens) and go on with tokens of their own, up to 30 in all.
func windowPrompts(count int) [][]int32 {
	var ps [][]int32
	for i := range count {
		p := append([]int32(nil), deBruijn4[:6+i*2]...)
		ps = append(ps, append(p, prompt(4+i*3, int32(i), 4)...))
	}
	return ps
}

// TestSpecWindowGreedy: 6 prompts, each alone and then all in one full
// batch, on a window engine with n-gram drafts forced on (K 4): every
// output equals the cache-free greedy reference, the scheduler's and both
// groups' invariants hold at every step, drafts were both kept and
// rejected, the batch carried every sequence with its drafts in one
// forward, and at the end neither group holds a block. Before window pools
// could roll back, the engine drafted nothing here.
func TestSpecWindowGreedy(t *testing.T) {
	const seqs, n = 6, 40
	m := specWindowModel(96, 48, 4, 6)
	e := newWindowEngine(t, m, Config{MaxBatchTokens: 48, MaxSeqs: seqs,
		Speculate: SpecConfig{Method: "ngram", K: 4, MinNGram: 2, Fixed: true, LogitRows: seqs * 5}})
	var invErr error
	widest := 0 // most sequences carrying drafts in one forward
	check := func(b *kernels.Batch) {
		if err := e.sched.CheckInvariants(); err != nil && invErr == nil {
			invErr = err
		}
		d := 0
		for _, sr := range b.Seqs {
			if sr.Drafts > 0 {
				d++
			}
		}
		widest = max(widest, d)
	}
	m.onForward = func(b *kernels.Batch) error { check(b); return nil }
	prompts := windowPrompts(seqs)
	for i, p := range prompts {
		got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
		if want := m.reference(p, n); !slices.Equal(got, want) {
			t.Fatalf("prompt %d alone:\n got %v\nwant %v", i, got, want)
		}
	}
	alone := waitIdle(t, e)
	together := runAtOnce(t, e, func(h func(*kernels.Batch) error) {
		m.onForward = func(b *kernels.Batch) error { check(b); return h(b) }
	}, prompts, n)
	for i, p := range prompts {
		if want := m.reference(p, n); !slices.Equal(together[i], want) {
			t.Fatalf("prompt %d batched:\n got %v\nwant %v", i, together[i], want)
		}
	}
	st := waitIdle(t, e)
	if invErr != nil {
		t.Fatal(invErr)
	}
	if alone.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == alone.SpecAcceptedTokens ||
		st.SpecAcceptedTokens == st.SpecDraftTokens || widest < seqs {
		t.Fatalf("draft tokens %d, accepted %d (%d alone), at most %d sequences drafting in one forward: want drafts kept and rejected, alone and all %d batched",
			st.SpecDraftTokens, st.SpecAcceptedTokens, alone.SpecAcceptedTokens, widest, seqs)
	}
	if st.KV.Used != 0 || st.KVWindow.Used != 0 || st.KVWindow.Free+st.KVWindow.Cached != st.KVWindow.Total {
		t.Fatalf("after all sequences: global %+v, window %+v", st.KV, st.KVWindow)
	}
	t.Logf("drafts %d, draft tokens %d, accepted %d", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens)
}

// TestSpecWindowRandomTraffic is TestSpecRandomTrafficGreedy on a window
// engine: 6 clients with cancels, aborts and stop tokens, both groups small
// enough to preempt (12 global blocks, 10 window blocks of 8 tokens for a
// window of 10), the scheduler's invariants, window tables included, checked
// inside every forward, every output equal to the reference, and at the
// end no block held in either group.
func TestSpecWindowRandomTraffic(t *testing.T) {
	m := specWindowModel(12, 10, 8, 10)
	e := newWindowEngine(t, m, Config{MaxBatchTokens: 32, MaxSeqs: 8, MaxQueue: 64,
		Speculate: SpecConfig{Method: "ngram", K: 5, MinNGram: 2, Fixed: true}})
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
		if err := e.sched.CheckInvariants(); err != nil && invErr == nil {
			invErr = err
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 21))
			for i := range perClient {
				var submitted func()
				if i == 0 {
					submitted = longs.Done
				}
				if err := specRequest(e, windowReference(m), r, submitted); err != nil {
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
	if st.KV.Used != 0 || st.KVWindow.Used != 0 || st.KVWindow.Free+st.KVWindow.Cached != st.KVWindow.Total {
		t.Fatalf("after all sequences: global %+v, window %+v", st.KV, st.KVWindow)
	}
	if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens || st.Preemptions == 0 {
		t.Fatalf("drafts %d, accepted %d, preemptions %d: the run did not exercise accept, reject and preempt",
			st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
	}
	t.Logf("drafts %d tokens %d accepted %d preemptions %d", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
}

// windowReference is m's greedy reference cut at the first of stops, as
// hashModel.reference cuts its own: specRequest's reference for the window
// model.
func windowReference(m *windowHashModel) func(p []int32, n int, stops ...int32) []int32 {
	return func(p []int32, n int, stops ...int32) []int32 {
		want := m.reference(p, n)
		for i, tok := range want {
			if slices.Contains(stops, tok) {
				return want[:i+1]
			}
		}
		return want
	}
}

// tinyPhi3WindowSpec is a random two-layer Phi-3 with a window of 6 on both
// layers (a random tied Gemma only repeats its last token, which leaves a
// proposer nothing to get wrong).
var tinyPhi3WindowSpec = modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 5, Phi3: true, RopeDims: 12, Window: 6}

// loadWindowModel loads path as the loader would for speculation with k
// drafts: window layers in their own store (WindowKV), seqs sequences of
// 1+k logit rows, the window store sized by the model's default. It returns
// the model and an engine Config for it.
func loadWindowModel(t testing.TB, path string, threads, blocks, bs, batch, seqs, k int) (*hooked, Config) {
	t.Helper()
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(threads)
	m, err := models.Load(src, be, models.Options{KVBlocks: blocks, BlockSize: bs, MaxBatchTokens: batch,
		MaxSeqs: seqs * (1 + k), Sequences: seqs, WindowKV: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(); src.Close() })
	window, wb := m.KVWindow()
	if window == 0 || wb == 0 || !m.Options().WindowKV {
		t.Fatalf("no window store: KVWindow %d, %d", window, wb)
	}
	return &hooked{Model: m}, Config{Blocks: blocks, BlockSize: bs, MaxBatchTokens: batch, MaxSeqs: seqs, Window: window, WindowBlocks: wb}
}

// TestSpecWindowTinyPhi3 and TestSpecWindowTinyGemma4 run
// testSpecWindowTiny on a windowed Phi-3 (window 6 on both layers) and on
// the assistant tests' Gemma 4 (window 5 on every other layer). The random
// Gemma 4 settles into repeating itself, so its drafts are all kept: it
// checks the Gemma 4 window path under draft rows, the Phi-3 rejections.
func TestSpecWindowTinyPhi3(t *testing.T)   { testSpecWindowTiny(t, tinyPhi3WindowSpec, true) }
func TestSpecWindowTinyGemma4(t *testing.T) { testSpecWindowTiny(t, assistTarget, false) }

// testSpecWindowTiny: a real forward pass (spec, written as Q8_0) with its
// window layers' KV in the window group (blocks of 4 tokens), greedy
// with n-gram drafts forced on (K 4) equals greedy without on the same
// model, on edit-shaped prompts, each alone and all in one full batch,
// the scheduler's invariants checked at every step; drafts were kept and
// rejected (rejected only where wantRejected: the model's own loops feed
// the proposer), and no block of either group is held at the end.
func testSpecWindowTiny(t *testing.T, spec modeltest.Spec, wantRejected bool) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := modeltest.WriteGGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	const seqs, k, n = 6, 4, 64
	prompts := editPrompts(seqs, spec.Vocab, 36)
	base, plainCfg := loadWindowModel(t, path, 1, 256, 4, 64, seqs, 0)
	solo, margins := soloRuns(t, base, newEngineOn(t, base, plainCfg), prompts, n)
	m, cfg := loadWindowModel(t, path, 1, 256, 4, 64, seqs, k)
	cfg.Speculate = SpecConfig{Method: "ngram", K: k, Fixed: true, LogitRows: seqs * (1 + k)}
	e := newEngineOn(t, m, cfg)
	var invErr error
	inv := func() {
		if err := e.sched.CheckInvariants(); err != nil && invErr == nil {
			invErr = err
		}
	}
	m.hook = func(*kernels.Batch) error { inv(); return nil }
	for i, p := range prompts[:3] {
		got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
		sameGreedy(t, fmt.Sprintf("alone %d", i), got, solo[i], margins[i])
	}
	together := runAtOnce(t, e, func(h func(*kernels.Batch) error) {
		m.hook = func(b *kernels.Batch) error { inv(); return h(b) }
	}, prompts, n)
	for i := range prompts {
		sameGreedy(t, fmt.Sprintf("batched %d", i), together[i], solo[i], margins[i])
	}
	st := waitIdle(t, e)
	if invErr != nil {
		t.Fatal(invErr)
	}
	t.Logf("drafts %d, draft tokens %d, accepted %d", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens)
	if st.SpecAcceptedTokens == 0 || wantRejected && st.SpecAcceptedTokens == st.SpecDraftTokens {
		t.Fatalf("draft tokens %d, accepted %d: want drafts kept (and rejected: %v)", st.SpecDraftTokens, st.SpecAcceptedTokens, wantRejected)
	}
	if st.KV.Used != 0 || st.KVWindow.Used != 0 || st.KVWindow.Total == 0 {
		t.Fatalf("after all sequences: global %+v, window %+v", st.KV, st.KVWindow)
	}
}

// gemmaEditText is an edit-style prompt longer than Gemma 3's 512-token
// window: a listing, then the request to repeat it with one change, and the
// answer's first line. The answer repeats the listing, so n-gram drafts are
// mostly right, and its positions are past the window, so the window group
// slides under the drafts.
func gemmaEditText() string {
	var b strings.Builder
	b.WriteString("package shapes\n\n")
	for i := range 14 {
		fmt.Fprintf(&b, "// area%d returns the area of shape %d, scaled by %d.\nfunc area%d(w, h int) int {\n\treturn w * h * %d\n}\n\n", i, i, i+2, i, i+2)
	}
	b.WriteString("Rewrite the package above with every int changed to int64, nothing else changed.\n\npackage shapes\n\n// area0 returns the area of shape 0, scaled by 2.\nfunc area0(w, h int64) int64 {\n")
	return b.String()
}

// TestSpecWindowGemma3: Gemma 3 270M with its window layers in the window
// group, greedy on an edit-style prompt of more than its 512-token window,
// gives the same tokens with n-gram drafts (K 4, forced) as without, and
// the drafts are mostly kept. Skipped where the model is absent (make
// gemma-model).
func TestSpecWindowGemma3(t *testing.T) {
	path := filepath.Join("..", "models", "gemma-3-270m-q4_k_m.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("Gemma 3 270M absent (make gemma-model): %v", err)
	}
	if testing.Short() || raceEnabled {
		t.Skip("Gemma 3 runs are too slow for -short and -race")
	}
	tk := smolTokenizer(t, path)
	p := tk.Encode(gemmaEditText(), true)
	const k, n = 4, 48
	base, plainCfg := loadWindowModel(t, path, 2, 128, 16, 256, 1, 0)
	if plainCfg.Window != 512 || len(p) <= plainCfg.Window {
		t.Fatalf("window %d, prompt %d tokens: want a prompt past a 512-token window", plainCfg.Window, len(p))
	}
	solo, margins := soloRuns(t, base, newEngineOn(t, base, plainCfg), [][]int32{p}, n)
	m, cfg := loadWindowModel(t, path, 2, 128, 16, 256, 1, k)
	cfg.Speculate = SpecConfig{Method: "ngram", K: k, Fixed: true, LogitRows: 1 + k}
	e := newEngineOn(t, m, cfg)
	got, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
	sameGreedy(t, "Gemma 3 with n-gram drafts", got, solo[0], margins[0])
	st := waitIdle(t, e)
	t.Logf("%q", tk.Decode(got, false))
	t.Logf("%d-token prompt, %d generated: drafts %d, draft tokens %d, accepted %d; window group %+v", len(p), len(got),
		st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, st.KVWindow)
	if st.SpecAcceptedTokens == 0 {
		t.Fatal("no draft accepted: the verify path was not exercised")
	}
	if st.KV.Used != 0 || st.KVWindow.Used != 0 || st.KVWindow.Total == 0 {
		t.Fatalf("after the request: global %+v, window %+v", st.KV, st.KVWindow)
	}
}

// BenchmarkSpecWindowGemma3: single-stream decode tokens/s of Gemma 3 270M
// with its window layers in the window group, with and without n-gram
// speculation (self-tuned, K DefaultSpecK), on gemmaEditText (past the
// 512-token window). As BenchmarkSpeculative: each iteration generates once
// each way, alternately, and only first token to last is timed.
func BenchmarkSpecWindowGemma3(b *testing.B) {
	path := filepath.Join("..", "models", "gemma-3-270m-q4_k_m.gguf")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("Gemma 3 270M absent (make gemma-model): %v", err)
	}
	p := smolTokenizer(b, path).Encode(gemmaEditText(), true)
	const gen, k = 128, DefaultSpecK
	mk := func(spec bool) *Engine {
		kk := 0
		if spec {
			kk = k
		}
		m, cfg := loadWindowModel(b, path, 2, 128, 16, 512, 1, kk)
		if spec {
			cfg.Speculate = SpecConfig{Method: "ngram", K: k, LogitRows: 1 + k}
		}
		return newEngineOn(b, m, cfg)
	}
	engines := [2]*Engine{mk(false), mk(true)}
	var dur [2]time.Duration
	var toks [2]int
	for b.Loop() {
		for i, e := range engines {
			s := submit(b, e, Request{Prompt: p, MaxTokens: gen})
			<-s.Tokens()
			start := time.Now()
			for range s.Tokens() {
				toks[i]++
			}
			dur[i] += time.Since(start)
		}
	}
	plain, spec := float64(toks[0])/dur[0].Seconds(), float64(toks[1])/dur[1].Seconds()
	b.ReportMetric(plain, "plain-tok/s")
	b.ReportMetric(spec, "spec-tok/s")
	b.ReportMetric(spec/plain, "speedup")
	st := engines[1].Stats()
	if st.SpecDraftTokens > 0 {
		b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), "accept-rate")
	}
	b.ReportMetric(float64(st.SpecDraftTokens)/float64(max(toks[1], 1)), "draft-rows/tok")
}
