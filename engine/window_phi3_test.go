package engine

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestWindowPhi3 serves a tiny windowed Phi-3 (window 6 on both layers, so
// no layer keeps its K/V in the global store) as the loader does: WindowKV
// on, the pool and window group sized from the model's defaults. Four
// concurrent greedy requests, past the window, give the same tokens as
// each alone on a model keeping every position, and when they are done
// neither group holds a block.
func TestWindowPhi3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "phi3.gguf")
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 5, Phi3: true, RopeDims: 12, Window: 6}
	if err := modeltest.WriteGGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	load := func(o models.Options) *models.Llama {
		src, err := models.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		be := cpu.New(1)
		m, err := models.Load(src, be, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close(); src.Close() })
		return m
	}
	base := models.Options{MaxBatchTokens: 16, MaxSeqs: 4, BlockSize: 4}
	shared := load(models.Options{MaxBatchTokens: 16, MaxSeqs: 4, BlockSize: 4, KVBlocks: 128})
	base.WindowKV = true
	split := load(base)
	mo := split.Options()
	window, wb := split.KVWindow()
	if window != 6 || wb == 0 || !mo.WindowKV {
		t.Fatalf("no window store: KVWindow %d, %d; options %+v", window, wb, mo)
	}
	e, err := New(split, Config{Blocks: mo.KVBlocks, BlockSize: mo.BlockSize, MaxBatchTokens: mo.MaxBatchTokens, MaxSeqs: mo.MaxSeqs,
		Window: window, WindowBlocks: wb})
	if err != nil {
		t.Fatal(err)
	}
	solo := newEngineOn(t, shared, Config{Blocks: 128, BlockSize: 4, MaxBatchTokens: 16, MaxSeqs: 4})
	const gen = 10
	prompts := make([][]int32, 4)
	want := make([][]int32, len(prompts))
	for i := range prompts {
		prompts[i] = prompt(14+5*i, int32(i), 300)
		s, err := solo.Submit(bg, Request{Prompt: prompts[i], MaxTokens: gen, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		want[i], _ = collect(t, s, 0)
	}
	got := make([][]int32, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		s, err := e.Submit(bg, Request{Prompt: prompts[i], MaxTokens: gen, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = collect(t, s, 0) }()
	}
	wg.Wait()
	for i := range prompts {
		if len(got[i]) != gen || !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d (%d-token prompt): %v with the window store, %v keeping everything", i, len(prompts[i]), got[i], want[i])
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
	if u := e.pool.Usage(); u.Used != 0 || wu.Used != 0 || wu.Total != wb {
		t.Errorf("after the requests: global %+v, window %+v (of %d)", u, wu, wb)
	}
	// 4 × 34 positions average in 4-token blocks through 20 window blocks:
	// released blocks must have been handed out again.
	if s := e.pool.WindowStats(); s.Evictions == 0 {
		t.Errorf("no window block was reused (%+v)", s)
	}
	t.Logf("global group %d blocks (bookkeeping only), window group %d, %+v", mo.KVBlocks, wb, e.pool.WindowStats())
}
