package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// With Options.WindowKV, a model's window layers (Gemma 3's and Gemma 2's
// interleaved ones; every layer of a windowed Phi-3) keep their K/V in a KV
// store of their own, indexed by the block ids of kvcache's window group
// (docs/sliding-window.md): blocks a window layer can no longer read go back
// to that group, so its memory is bounded by the window while the global
// layers' store holds every position. The engine passes the window group's
// slots and tables in Batch.WindowSlots and SeqRows.WindowBlocks.

// windowKV is the split: the window store and each layer's index in the
// store it uses.
type windowKV struct {
	// own: the window store is indexed by the window group's blocks
	// (Options.WindowKV); else by the global group's, as the batch says.
	own   bool
	store kernels.KVStore
	layer []int // [Layers] index in the window store (window layers) or the global store
	batch kernels.Batch
}

// windowLayers counts c's window layers.
func (c Config) windowLayers() int {
	n := 0
	for i := range c.Layers {
		if c.IsWindowLayer(i) {
			n++
		}
	}
	return n
}

// splitsWindow reports whether o puts c's window layers in a store of their own.
func (o Options) splitsWindow(c Config) bool {
	return o.WindowKV && c.windowLayers() > 0
}

// windowDefaults sizes the window store: with its default, never the
// reason a sequence waits. Each running sequence's window table holds at
// most the blocks of [computed−W+1, computed+chunk), ⌈(W−1)/bs⌉+1 plus its
// chunk's; the chunks of one step add up to MaxBatchTokens. That default is
// capped at the window layers' share of the KV bytes (their fraction of the
// layers), but never below one sequence's need: for Gemma 3 270M the cap is
// far above the default, while Phi-3-mini's 2,047-token window on all 32
// layers at 6 MiB a block would otherwise ask for 52 GB.
func (o Options) windowDefaults(c Config) Options {
	if !o.splitsWindow(c) {
		o.WindowKV, o.WindowKVBlocks = false, 0
		return o
	}
	if o.WindowKVBlocks <= 0 {
		bs := o.BlockSize
		o.WindowKVBlocks = o.sequences()*((c.Window-1+bs-1)/bs+2) + (o.MaxBatchTokens+bs-1)/bs // drafts' rows are in the batch's share
		budget := o.KVBytes
		if budget <= 0 {
			budget = defaultKVBytes
		}
		share := budget / int64(c.Layers) * int64(c.windowLayers()) / o.windowBlockBytes(c)
		one := (c.Window-1+o.MaxBatchTokens+bs-1)/bs + 1 // engine.Config.checkWindow's minimum
		o.WindowKVBlocks = int(min(int64(o.WindowKVBlocks), max(share, int64(one))))
	}
	return o
}

// noGlobalBlocks is the global group's size when no layer keeps its K/V in
// the global store (a windowed Phi-3): its blocks then hold nothing but the
// prefix index's bookkeeping (~100 bytes a block), so there are enough for
// every sequence at full context, up to 1<<18 (26 MB of bookkeeping), and
// never fewer than one full-context sequence needs.
func (o Options) noGlobalBlocks() int {
	per := (o.ContextLen+o.BlockSize-1)/o.BlockSize + 1
	return max(min(o.MaxSeqs*per, 1<<18), per)
}

// kvBlockBytes is what one block of the global store costs: every layer
// that keeps its K/V there (0 when none does).
func (o Options) kvBlockBytes(c Config) int64 {
	var cols int
	for i := range c.Layers {
		if !o.WindowKV || !c.IsWindowLayer(i) {
			cols += c.layerKVCols(i)
		}
	}
	return int64(2*cols*kvElemBytes) * int64(o.BlockSize)
}

// windowStoreBytes is the window store's size (0 without one).
func (o Options) windowStoreBytes(c Config) int64 {
	return int64(o.WindowKVBlocks) * o.windowBlockBytes(c)
}

// windowBlockBytes is what one block of the window store costs.
func (o Options) windowBlockBytes(c Config) int64 {
	var cols int
	for i := range c.Layers {
		if c.IsWindowLayer(i) {
			cols += c.layerKVCols(i)
		}
	}
	return int64(2*cols*kvElemBytes) * int64(o.BlockSize)
}

// allocKV makes the KV stores: one for every layer, or the global layers'
// and the window layers' apart. They are apart with Options.WindowKV, and
// always when the window layers' heads differ from the global ones' or some
// layers share others' K/V (Gemma 4): the window store then has the global
// store's blocks and slots. A shared-K/V layer has no slot of its own.
func (m *Llama) allocKV() error {
	c, o := m.cfg, m.opts
	kvc := kernels.KVConfig{Layers: c.Layers, Blocks: o.KVBlocks, BlockSize: o.BlockSize, KVHeads: c.KVHeads, HeadDim: c.HeadDim}
	if !o.WindowKV && !c.windowHeadsDiffer() && c.KVSharedFrom == 0 {
		var err error
		m.kv, err = m.be.NewKVStore(kvc)
		return err
	}
	w := &windowKV{layer: make([]int, c.Layers), own: o.WindowKV}
	nw, ng := 0, 0
	for i := range c.Layers {
		switch {
		case c.KVSource(i) != i: // a shared-K/V layer (Gemma 4): its source's slot, set before it
			w.layer[i] = w.layer[c.KVSource(i)]
		case c.IsWindowLayer(i):
			w.layer[i], nw = nw, nw+1
		default:
			w.layer[i], ng = ng, ng+1
		}
	}
	var err error
	if ng > 0 {
		kvc.Layers = ng
		if m.kv, err = m.be.NewKVStore(kvc); err != nil {
			return err
		}
	}
	kvc.Layers, kvc.KVHeads, kvc.HeadDim = nw, c.windowKVHeads(), c.windowHeadDim()
	if o.WindowKV {
		kvc.Blocks = o.WindowKVBlocks
	}
	if w.store, err = m.be.NewKVStore(kvc); err != nil {
		return err
	}
	m.win = w
	return nil
}

// prepareWindow checks that b carries the window group's slots and tables
// and lays out the batch the window layers run on: b with those in place of
// the global group's.
func (m *Llama) prepareWindow(b *kernels.Batch) error {
	w := m.win
	if w == nil || !w.own {
		return nil
	}
	if len(b.WindowSlots) != len(b.Tokens) {
		return fmt.Errorf("the window layers' KV store needs a window slot for each row: %d for %d rows (the engine lacks its window group)", len(b.WindowSlots), len(b.Tokens))
	}
	seqs := w.batch.Seqs[:0]
	for _, sq := range b.Seqs {
		if sq.WindowBlocks == nil {
			return fmt.Errorf("a sequence without a window block table")
		}
		sq.Blocks = sq.WindowBlocks
		seqs = append(seqs, sq)
	}
	w.batch = kernels.Batch{Tokens: b.Tokens, Positions: b.Positions, Slots: b.WindowSlots, Seqs: seqs, LogitRows: b.LogitRows}
	return nil
}

// layerKV is the store, layer index and batch layer i's attention uses.
func (m *Llama) layerKV(i int, b *kernels.Batch) (kernels.KVStore, int, *kernels.Batch) {
	w := m.win
	if w == nil {
		return m.kv, i, b
	}
	if m.cfg.IsWindowLayer(i) {
		if !w.own {
			return w.store, w.layer[i], b
		}
		return w.store, w.layer[i], &w.batch
	}
	return m.kv, w.layer[i], b
}

// KVWindow is the window group the engine's pool must have for this model:
// the window and the window store's blocks, or zeros when every layer keeps
// its KV in the global store.
func (m *Llama) KVWindow() (window, blocks int) {
	if m.win == nil || !m.win.own {
		return 0, 0
	}
	return m.cfg.Window, m.opts.WindowKVBlocks
}
