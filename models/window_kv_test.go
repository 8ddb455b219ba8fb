package models

import (
	"math"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestWindowKVOtherArchs runs the window store (Options.WindowKV) on the
// sliding-window models beside Gemma 3: a windowed Phi-3, whose every layer
// is a window layer, so the global store is empty and the global group only
// bookkeeping, Gemma 2, whose window and global layers alternate, and Gemma
// 4, whose two kinds of layers have heads of different shapes (without
// WindowKV its stores are split too, both on the global group's blocks). 40
// tokens in 3-token chunks through a window group of 5 blocks of 4 tokens,
// recycled as the sequence passes them, give bit-identical logits to every
// layer keeping everything, the group never holds more than the window's
// blocks, and every block goes back when the sequence is freed.
func TestWindowKVOtherArchs(t *testing.T) {
	const w, bs, chunk, winBlocks, blocks = 5, 4, 3, 5, 16
	for _, tc := range []struct {
		name  string
		spec  modeltest.Spec
		dtype kernels.DType
	}{
		{"phi3-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 3, Phi3: true, RopeDims: 12, Window: w}, kernels.F32},
		{"phi3-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 4, Phi3: true, Window: w}, kernels.Q8_0},
		{"gemma2-f32", modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 33,
			Gemma: true, Gemma2: true, Window: w, AttnSoftcap: 2, FinalSoftcap: 20, RMSEps: 1e-6}, kernels.F32},
		// Gemma 4: the window store's heads (16 wide, 2 KV) differ from the
		// global store's (32 wide, 1 KV).
		{"gemma4-f32", modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 35, RMSEps: 1e-6,
			Gemma4: true, Window: w, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, LayerScale: true}, kernels.F32},
		// Gemma 4 E2B/E4B: layers 3 (window) and 4 (global) read layers 1
		// and 2's K/V, in either store.
		{"gemma4e-f32", modeltest.Spec{Layers: 5, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 36, RMSEps: 1e-6,
			Gemma4: true, Window: w, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 2, PerLayerEmbd: 32, SharedKVLayers: 2}, kernels.F32},
		// gpt-oss: window and global layers alternating, attention sinks.
		{"gptoss-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 37, GPTOSS: true,
			Window: w, Experts: 4, ExpertsUsed: 2, RopeTheta: 150000, YaRN: &modeltest.YaRN{Factor: 4, OriginalContext: 16}}, kernels.F32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{MaxBatchTokens: chunk, MaxSeqs: 1, BlockSize: bs, KVBlocks: blocks}
			shared := loadTiny(t, tc.spec, tc.dtype, opts)
			opts.WindowKV, opts.WindowKVBlocks = true, winBlocks
			split := loadTiny(t, tc.spec, tc.dtype, opts)
			c := split.Config()
			if split.win == nil {
				t.Fatalf("options %+v: no window store", split.Options())
			}
			if global := c.Layers - c.windowLayers(); (split.kv == nil) != (global == 0) {
				t.Fatalf("%d global layers but global store %v", global, split.kv)
			}
			if window, wb := split.KVWindow(); window != w || wb != winBlocks {
				t.Fatalf("KVWindow() = %d, %d; want %d, %d", window, wb, w, winBlocks)
			}
			pool, err := kvcache.NewPool(kvcache.Config{Blocks: blocks, BlockSize: bs, PrefixCaching: true, Window: kvcache.WindowConfig{Window: w, Blocks: winBlocks}})
			if err != nil {
				t.Fatal(err)
			}
			toks := make([]int32, 40)
			for i := range toks {
				toks[i] = int32((i*97 + 11) % 300)
			}
			solo, win := newSoloRunner(shared), &windowRunner{m: split, pool: pool, chunk: chunk}
			maxUsed := 0
			for i := 0; i < len(toks); i += chunk {
				part := toks[i:min(i+chunk, len(toks))]
				want, got := solo.feed(t, part), win.feed(t, part)
				if !slices.Equal(got, want) {
					t.Fatalf("position %d: logits differ with the window store; argmax %d vs %d", len(win.tokens), argmax(got), argmax(want))
				}
				u, _ := pool.WindowUsage()
				maxUsed = max(maxUsed, u.Used)
			}
			// After a step the table holds [computed−W+1, computed): ⌈(W−1)/bs⌉+1 blocks.
			if bound := pool.BlocksFor(w-1) + 1; maxUsed > bound {
				t.Errorf("the window group held %d blocks, bound %d", maxUsed, bound)
			}
			if s := pool.WindowStats(); s.Evictions == 0 {
				t.Errorf("no window block was reused (%+v): the test did not recycle released blocks", s)
			}
			pool.Free(&win.table)
			if err := pool.CheckRefs(nil); err != nil {
				t.Fatal(err)
			}
			if u, _ := pool.WindowUsage(); u.Used != 0 || u.Free+u.Cached != winBlocks {
				t.Errorf("after Free the window group holds %+v", u)
			}
			if u := pool.Usage(); u.Used != 0 {
				t.Errorf("after Free the global group holds %+v", u)
			}
		})
	}
}

// TestWindowKVSizing: with no global layer (a windowed Phi-3) the global
// group's default is enough full-context sequences, not a division by the
// zero bytes a block costs; a window store's default is capped at the
// window layers' share of the KV bytes but never below one sequence's need.
func TestWindowKVSizing(t *testing.T) {
	phi := Config{Arch: "phi3", Layers: 32, KVHeads: 32, HeadDim: 96, ContextLen: 4096, Window: 2047, WindowLayers: make([]bool, 32)}
	setWindowPattern(phi.WindowLayers, 0)
	o := Options{WindowKV: true}.withDefaults(phi)
	perSeq := 4096/16 + 1
	if o.KVBlocks != 64*perSeq {
		t.Errorf("no global layers: KVBlocks %d, want %d (64 sequences of %d blocks)", o.KVBlocks, 64*perSeq, perSeq)
	}
	// 1 GiB over 6 MiB window blocks is 170, below the 8,352 of the
	// unbounded default and above one sequence's ⌈(2046+512)/16⌉+1 = 161.
	if blk := o.windowBlockBytes(phi); blk != 2*32*32*96*2*16 || o.WindowKVBlocks != int(defaultKVBytes/blk) {
		t.Errorf("window store %d blocks of %d bytes, want %d", o.WindowKVBlocks, blk, defaultKVBytes/blk)
	}
	o = Options{WindowKV: true, KVBytes: 1 << 20}.withDefaults(phi)
	if o.WindowKVBlocks != (2046+512+15)/16+1 {
		t.Errorf("1 MiB of KV: %d window blocks, want one sequence's %d", o.WindowKVBlocks, (2046+512+15)/16+1)
	}
	// Gemma 3 270M's layout keeps its uncapped default (MaxSeqs × 34 + 32).
	g3 := Config{Arch: "gemma3", Layers: 18, KVHeads: 1, HeadDim: 256, ContextLen: 32768, Window: 512, WindowLayers: make([]bool, 18)}
	setWindowPattern(g3.WindowLayers, 6)
	if o := (Options{WindowKV: true}).withDefaults(g3); o.WindowKVBlocks != 64*34+32 {
		t.Errorf("gemma3: %d window blocks, want %d", o.WindowKVBlocks, 64*34+32)
	}
	// Speculating, 16 sequences ask for 144 logit rows: the window store is
	// 16 sequences' windows, the drafts' rows being in the batch's share.
	if o := (Options{WindowKV: true, MaxSeqs: 144, Sequences: 16}).withDefaults(g3); o.WindowKVBlocks != 16*34+32 {
		t.Errorf("gemma3, 16 sequences of 144 rows: %d window blocks, want %d", o.WindowKVBlocks, 16*34+32)
	}
}

// TestMistralHFWindow: a MistralForCausalLM checkpoint whose config.json sets
// sliding_window (Mistral 7B v0.1) reads it on every layer, as transformers
// masks it. With one layer attention sees only relative positions, so the
// logits at position p equal those of a fresh sequence of the W tokens ending
// at p; sliding_window null (later Mistrals) reads everything.
func TestMistralHFWindow(t *testing.T) {
	const w = 5
	spec := modeltest.Spec{Layers: 1, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 41}
	load := func(window any) *Llama {
		dir := t.TempDir()
		if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
			t.Fatal(err)
		}
		editJSON(t, dir, func(c map[string]any) map[string]any {
			c["architectures"], c["model_type"], c["sliding_window"] = []string{"MistralForCausalLM"}, "mistral", window
			return c
		})
		src, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		be := cpu.New(1)
		t.Cleanup(func() { be.Close() })
		m, err := Load(src, be, Options{MaxBatchTokens: 16, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if c := load(nil).Config(); c.Window != 0 || c.WindowLayers != nil {
		t.Fatalf("sliding_window null: window %d, layers %v", c.Window, c.WindowLayers)
	}
	m, fresh := load(w), load(w)
	if c := m.Config(); c.Window != w || !slices.Equal(c.WindowLayers, []bool{true}) || c.RopeThetaLocal != c.RopeTheta {
		t.Fatalf("sliding_window %d: config %+v", w, c)
	}
	checkWindowLogits(t, w, m, fresh, load(nil), load(nil))
}

// checkWindowLogits checks that m's one layer, a window of w, reads only the
// last w positions: with one layer attention sees only relative positions,
// so the logits at position p must equal those of a fresh sequence (on
// fresh, a second copy: a soloRunner keeps position p in slot p) of the w
// tokens ending at p. full and fullFresh, the same model without the
// window, must fail that check, or it proves nothing.
func checkWindowLogits(t *testing.T, w int, m, fresh, full, fullFresh *Llama) {
	t.Helper()
	toks := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5}
	whole := newSoloRunner(m)
	for p, tok := range toks {
		got := whole.feed(t, []int32{tok})
		if p < w {
			continue
		}
		want := newSoloRunner(fresh).feed(t, toks[p-w+1:p+1])
		worst, scale := 0.0, 0.0
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
			scale = math.Max(scale, math.Abs(float64(want[i])))
		}
		// F16 keys rounded at other absolute positions: ~1e-4 of the scale.
		if worst > 1e-3*scale {
			t.Errorf("position %d: logits differ from the last %d tokens' alone by %.3g (scale %.2g)", p, w, worst, scale)
		}
	}
	// Without the window the same check must fail, or it proves nothing.
	got := newSoloRunner(full).feed(t, toks)
	want := newSoloRunner(fullFresh).feed(t, toks[len(toks)-w:])
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst < 1e-2 {
		t.Errorf("without a window the last %d tokens alone give the same logits (|Δ| %.3g): the check is blind", w, worst)
	}
}
