package models

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
)

// windowRunner is soloRunner over a kvcache pool with a window group: the
// window layers' blocks are released and handed out again as the sequence
// passes them, so a window layer that read a released block would read
// another position's KV.
type windowRunner struct {
	m      *Llama
	pool   *kvcache.Pool
	table  kvcache.Table
	tokens []int32
	chunk  int
	prompt int // the first feed, as soloRunner's
}

func (r *windowRunner) feed(t testing.TB, toks []int32) []float32 {
	t.Helper()
	bs := int32(r.m.opts.BlockSize)
	if len(r.tokens) == 0 {
		r.prompt = len(toks)
	}
	var logits []float32
	for len(toks) > 0 {
		n := min(len(toks), r.chunk)
		start := len(r.tokens)
		r.tokens = append(r.tokens, toks[:n]...)
		if !r.pool.Allocate(&r.table, nil, len(r.tokens), 0) {
			t.Fatalf("position %d: the pool is out of blocks", start)
		}
		gt, wt := r.table.Blocks(), r.table.WindowBlocks()
		b := &kernels.Batch{}
		for i, tok := range toks[:n] {
			pos := int32(start + i)
			b.Tokens = append(b.Tokens, tok)
			b.Positions = append(b.Positions, pos)
			b.Slots = append(b.Slots, gt[pos/bs]*bs+pos%bs)
			b.WindowSlots = append(b.WindowSlots, wt[pos/bs]*bs+pos%bs)
		}
		b.Seqs = []kernels.SeqRows{{Start: 0, End: n, ContextLen: len(r.tokens), Blocks: gt, WindowBlocks: wt, Prompt: r.prompt}}
		b.LogitRows = []int32{int32(n - 1)}
		out, err := r.m.Forward(b)
		if err != nil {
			t.Fatalf("forward at position %d: %v", start, err)
		}
		r.pool.Commit(&r.table, r.tokens, len(r.tokens))
		logits = append(logits[:0], out...)
		toks = toks[n:]
	}
	return logits
}

// TestGemma3WindowKVMatchesShared runs 1,200 tokens of Gemma 3 270M's longest
// golden prompt (past the 512-token window twice over) and a greedy continuation
// with the window layers' KV in a store of 50 blocks, recycled as the
// sequence passes them, and with every layer keeping everything: the
// logits must be bit-identical, since both read the same F16 K/V in the
// same order.
func TestGemma3WindowKVMatchesShared(t *testing.T) {
	g := loadGolden(t, gemma3GoldenPath)
	var prompt []int32
	for _, c := range g.Cases {
		if len(c.PromptIDs) > len(prompt) {
			prompt = c.PromptIDs
		}
	}
	if len(prompt) < 1200 {
		t.Fatalf("longest golden prompt has %d tokens; the test needs one far past the window", len(prompt))
	}
	prompt = prompt[:1200] // past the 800 tokens the window store holds: its blocks are reused
	const winBlocks, chunk = 50, 256
	shared := loadGemma3(t, 2, Options{MaxBatchTokens: chunk, MaxSeqs: 1, KVBlocks: 200})
	split := loadGemma3(t, 2, Options{MaxBatchTokens: chunk, MaxSeqs: 1, KVBlocks: 200, WindowKV: true, WindowKVBlocks: winBlocks})
	if o := split.Options(); !o.WindowKV || split.win == nil {
		t.Fatalf("options %+v: no window store", o)
	}
	c := split.Config()
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 200, BlockSize: 16, PrefixCaching: true, Window: kvcache.WindowConfig{Window: c.Window, Blocks: winBlocks}})
	if err != nil {
		t.Fatal(err)
	}
	solo, win := newSoloRunner(shared), &windowRunner{m: split, pool: pool, chunk: chunk}
	want, got := solo.feed(t, prompt), win.feed(t, prompt)
	for step := 0; ; step++ {
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (position %d): logits differ; argmax %d vs %d", step, len(win.tokens), argmax(got), argmax(want))
		}
		if step == 8 {
			break
		}
		tok := argmax(want)
		want, got = solo.feed(t, []int32{tok}), win.feed(t, []int32{tok})
	}
	u, _ := pool.WindowUsage()
	if bound := pool.BlocksFor(c.Window-1) + 1; u.Used > bound {
		t.Errorf("after %d tokens the window group holds %d blocks, bound %d", len(win.tokens), u.Used, bound)
	}
	if s := pool.WindowStats(); s.Evictions == 0 {
		t.Errorf("no window block was reused (%+v): the test did not recycle released blocks", s)
	}
	pool.Free(&win.table)
	if err := pool.CheckRefs(nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tokens: window group %d blocks in use of %d, global %d", len(win.tokens), u.Used, winBlocks, pool.Usage().Total)
}
