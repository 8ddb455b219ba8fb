package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
)

// windowHashModel is hashModel with a sliding-window layer: besides the
// global chain it writes each row's window KV (a hash of its token and
// position) into a store of its own at b.WindowSlots, and a row's logits
// add a hash of the window KV of its last `window` positions, read back
// through SeqRows.WindowBlocks. A released block (−1) read, a window block
// reused while still in reach, a slot off its table or a prefix hit whose
// window KV is gone changes the output or fails the step.
type windowHashModel struct {
	*hashModel
	window int
	wkv    []uint64
}

func wkvOf(tok int32, pos int) uint64 { return mix(uint64(uint32(tok))<<20 ^ uint64(pos) ^ 0xabcdef) }

// windowTerm adds the window's share to a row's logits.
func windowTerm(h uint64, out []float32) {
	for v := range out {
		out[v] += float32(mix(h^uint64(v)<<7)>>40) / (1 << 24) * 8
	}
}

func (m *windowHashModel) Forward(b *kernels.Batch) ([]float32, error) {
	if len(b.WindowSlots) != len(b.Tokens) {
		return nil, fmt.Errorf("windowHashModel: %d window slots for %d rows", len(b.WindowSlots), len(b.Tokens))
	}
	bs := m.bs
	for _, sr := range b.Seqs {
		for r := sr.Start; r < sr.End; r++ {
			pos := int(b.Positions[r])
			id := sr.WindowBlocks[pos/bs]
			if id < 0 || int(b.WindowSlots[r]) != int(id)*bs+pos%bs {
				return nil, fmt.Errorf("windowHashModel: row %d at %d: window slot %d, table block %d", r, pos, b.WindowSlots[r], id)
			}
			m.wkv[b.WindowSlots[r]] = wkvOf(b.Tokens[r], pos)
		}
	}
	logits, err := m.hashModel.Forward(b)
	if err != nil {
		return nil, err
	}
	for i, r := range b.LogitRows {
		var sr kernels.SeqRows
		for _, s := range b.Seqs {
			if int(r) >= s.Start && int(r) < s.End {
				sr = s
			}
		}
		p := int(b.Positions[r])
		var h uint64
		for pos := max(p-m.window+1, 0); pos <= p; pos++ {
			id := sr.WindowBlocks[pos/bs]
			if id < 0 {
				return nil, fmt.Errorf("windowHashModel: row at %d reads position %d from a released block", p, pos)
			}
			h = mix(h ^ m.wkv[int(id)*bs+pos%bs])
		}
		windowTerm(h, logits[i*m.vocab:(i+1)*m.vocab])
	}
	return logits, nil
}

// reference is greedy generation without a cache.
func (m *windowHashModel) reference(prompt []int32, n int) []int32 {
	toks := append([]int32(nil), prompt...)
	kv := make([]uint64, 0, len(prompt)+n)
	logits := make([]float32, m.vocab)
	var out []int32
	for len(out) < n {
		for pos := len(kv); pos < len(toks); pos++ {
			prev := uint64(kvRoot)
			if pos > 0 {
				prev = kv[pos-1]
			}
			kv = append(kv, kvOf(prev, toks[pos], pos))
		}
		var h, wh uint64
		for _, k := range kv {
			h = mix(h ^ k)
		}
		p := len(toks) - 1
		for pos := max(p-m.window+1, 0); pos <= p; pos++ {
			wh = mix(wh ^ wkvOf(toks[pos], pos))
		}
		m.logitsOf(h, logits)
		windowTerm(wh, logits)
		tok := argmax(logits)
		out = append(out, tok)
		toks = append(toks, tok)
	}
	return out
}

func newWindowEngine(t testing.TB, m *windowHashModel, cfg Config) *Engine {
	t.Helper()
	cfg.Blocks, cfg.BlockSize = len(m.kv)/m.bs, m.bs
	cfg.Window, cfg.WindowBlocks = m.window, len(m.wkv)/m.bs
	return newEngineOn(t, m, cfg)
}

// TestWindowGroupMatchesReference runs many sequences with shared prefixes,
// long prompts in chunks, decodes, preemptions (the global group is small)
// and aborts on a pool with a window group, and checks every completed
// output against the cache-free reference; at the end both groups hold
// nothing.
func TestWindowGroupMatchesReference(t *testing.T) {
	const bs, window, vocab = 4, 22, 50
	m := &windowHashModel{hashModel: newHashModel(vocab, 1024, 90, bs), window: window, wkv: make([]uint64, 48*bs)}
	e := newWindowEngine(t, m, Config{MaxBatchTokens: 16, MaxSeqs: 8})
	base := prompt(70, 3, vocab)
	type run struct {
		s      *Sequence
		prompt []int32
		n      int
	}
	var runs []run
	for i := range 24 {
		p := prompt(10+i*7%60, int32(i), vocab)
		if i%3 != 0 {
			p = append(append([]int32(nil), base[:40+i%4*10]...), p...)
		}
		n := 12 + i%5*6
		ctx, cancel := context.WithCancel(context.Background())
		s, err := e.Submit(ctx, Request{Prompt: p, MaxTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 6 {
			go func() { <-s.Admitted(); cancel() }()
		} else {
			defer cancel()
		}
		runs = append(runs, run{s, p, n})
	}
	completed := 0
	for i, r := range runs {
		got, res := collect(t, r.s, 0)
		if res.Finish == FinishAbort {
			continue
		}
		if res.Finish != FinishLength {
			t.Fatalf("sequence %d: %+v", i, res)
		}
		completed++
		if want := m.reference(r.prompt, r.n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sequence %d (%d prompt tokens):\n got %v\nwant %v", i, len(r.prompt), got, want)
		}
	}
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	// The loop has ended: its pool is ours to read.
	if err := e.pool.CheckRefs(nil); err != nil {
		t.Fatal(err)
	}
	wu, _ := e.pool.WindowUsage()
	st := e.Stats()
	if u := e.pool.Usage(); u.Used != 0 || wu.Used != 0 {
		t.Fatalf("after the end: global %+v, window %+v", u, wu)
	}
	if st.KVWindow.Total != len(m.wkv)/bs || st.KVWindow.Used != 0 {
		t.Errorf("published window group %+v, want %d blocks, none used", st.KVWindow, len(m.wkv)/bs)
	}
	if completed < 18 || st.PrefixHitTokens == 0 || e.pool.WindowStats().HitBlocks == 0 || st.Preemptions == 0 {
		t.Errorf("%d completed, %d prefix hit tokens (%d window blocks shared), %d preemptions: the test exercised too little",
			completed, st.PrefixHitTokens, e.pool.WindowStats().HitBlocks, st.Preemptions)
	}
}

// Gemma 3 270M's KV layout, for the bytes behind the block counts: 18
// layers, 15 of them window layers, one KV head of 256, F16 K and V, blocks
// of 16 tokens.
const (
	gemmaLayers, gemmaWindowLayers, gemmaWindow = 18, 15, 512
	gemmaLayerBlockBytes                        = 2 * 256 * 2 * 16
)

// TestWindowKV32k runs one sequence to 32,768 positions on Gemma 3 270M's
// window and block size (prompt in 512-token chunks, then 768 decoded
// tokens) and reads the KV blocks it holds from the pool's own accounting
// at every step; BENCHMARKS.md quotes the figures it logs.
func TestWindowKV32k(t *testing.T) {
	if testing.Short() {
		t.Skip("32k positions")
	}
	const bs, ctx, gen = 16, 32768, 768
	m := &windowHashModel{hashModel: newHashModel(64, ctx, ctx/bs+1, bs), window: gemmaWindow, wkv: make([]uint64, 80*bs)}
	var e *Engine
	var mu sync.Mutex
	var peak, last struct{ global, window int }
	m.onForward = func(b *kernels.Batch) error { // on the loop: its pool may be read
		u, _ := e.pool.WindowUsage()
		mu.Lock()
		defer mu.Unlock()
		last.global, last.window = e.pool.Usage().Used, u.Used
		peak.global, peak.window = max(peak.global, last.global), max(peak.window, last.window)
		return nil
	}
	e = newWindowEngine(t, m, Config{MaxBatchTokens: 512, MaxSeqs: 1})
	p := prompt(ctx-gen, 5, 64)
	s, err := e.Submit(bg, Request{Prompt: p, MaxTokens: gen})
	if err != nil {
		t.Fatal(err)
	}
	got, res := collect(t, s, 0)
	if res.Finish != FinishLength || len(got) != gen {
		t.Fatalf("%d tokens, %+v", len(got), res)
	}
	if want := m.reference(p, gen); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("output differs from the cache-free reference")
	}
	mu.Lock()
	defer mu.Unlock()
	// The last step computes position 32,766 (its token is the 32,768th):
	// the global group holds every block, the window group those of
	// [32766−511, 32766].
	lastPos := ctx - 2
	if want := lastPos/bs - (lastPos-gemmaWindow+1)/bs + 1; last.global != ctx/bs || last.window != want {
		t.Errorf("at position %d: %d global and %d window blocks, want %d and %d", lastPos, last.global, last.window, ctx/bs, want)
	}
	if bound := (gemmaWindow-1+512+bs-1)/bs + 1; peak.window > bound {
		t.Errorf("window group peaked at %d blocks, bound %d", peak.window, bound)
	}
	full := int64(last.global) * gemmaLayers * gemmaLayerBlockBytes
	split := int64(last.global)*(gemmaLayers-gemmaWindowLayers)*gemmaLayerBlockBytes + int64(last.window)*gemmaWindowLayers*gemmaLayerBlockBytes
	peakBytes := int64(peak.global)*(gemmaLayers-gemmaWindowLayers)*gemmaLayerBlockBytes + int64(peak.window)*gemmaWindowLayers*gemmaLayerBlockBytes
	t.Logf("Gemma 3 270M layout at %d positions (the last computed %d): full attention %d blocks × 18 layers = %d bytes (%.1f MiB); "+
		"window group: %d global blocks × 3 layers + %d window blocks × 15 layers = %d bytes (%.1f MiB, %.2f× less); "+
		"peak during 512-token prefill chunks %d + %d blocks = %d bytes (%.1f MiB)",
		ctx, lastPos, last.global, full, float64(full)/(1<<20), last.global, last.window, split, float64(split)/(1<<20),
		float64(full)/float64(split), peak.global, peak.window, peakBytes, float64(peakBytes)/(1<<20))
}

// TestWindowGemma3LongPrompt runs Gemma 3 270M through the engine on 700
// tokens of a golden prompt (past the 512-token window) with every layer
// keeping every position, then with the window layers in their own store
// on the window group, twice: cold, and again from the prefix cache (a hit
// past the window, which needs the window group's tail blocks). Greedy
// output must not change.
func TestWindowGemma3LongPrompt(t *testing.T) {
	path := filepath.Join("..", "models", "gemma-3-270m-q4_k_m.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("Gemma 3 270M absent (make gemma-model): %v", err)
	}
	if testing.Short() || raceEnabled {
		t.Skip("Gemma 3 runs are too slow for -short and -race")
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "gemma3-270m-q4_k_m.json"))
	if err != nil {
		t.Skipf("golden prompts absent: %v", err)
	}
	var golden struct {
		Cases []struct {
			PromptIDs []int32 `json:"prompt_ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var long []int32
	for _, c := range golden.Cases {
		if len(c.PromptIDs) > len(long) {
			long = c.PromptIDs
		}
	}
	if len(long) < 700 {
		t.Fatalf("longest golden prompt: %d tokens", len(long))
	}
	p := long[:700]
	const gen = 12
	run := func(e *Engine) ([]int32, Result) {
		t.Helper()
		s, err := e.Submit(bg, Request{Prompt: p, MaxTokens: gen})
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, s, 0)
	}
	load := func(o models.Options) (*hooked, models.Options, models.Config) {
		src, err := models.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		be := cpu.New(2)
		m, err := models.Load(src, be, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close(); src.Close() })
		return &hooked{Model: m}, m.Options(), m.Config()
	}
	opts := models.Options{KVBlocks: 120, MaxBatchTokens: 256, MaxSeqs: 2}
	shared, _, _ := load(opts)
	want, _ := run(newEngineOn(t, shared, Config{Blocks: 120, MaxBatchTokens: 256, MaxSeqs: 2}))
	opts.WindowKV = true
	split, so, c := load(opts)
	if !so.WindowKV || so.WindowKVBlocks == 0 {
		t.Fatalf("options after defaults %+v: no window store", so)
	}
	e := newEngineOn(t, split, Config{Blocks: 120, MaxBatchTokens: 256, MaxSeqs: 2, Window: c.Window, WindowBlocks: so.WindowKVBlocks})
	cold, _ := run(e)
	sameGreedy(t, "window group, cold", cold, want, shared.margins)
	warm, res := run(e)
	sameGreedy(t, "window group, from the prefix cache", warm, want, shared.margins)
	if res.CachedTokens <= c.Window {
		t.Errorf("the second run hit %d cached tokens; want a hit past the %d-token window", res.CachedTokens, c.Window)
	}
	t.Logf("%d-token prompt: %d cached on the second run; window store %d blocks", len(p), res.CachedTokens, so.WindowKVBlocks)
}
