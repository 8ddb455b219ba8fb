//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/kernels"
)

// qMax is the most query vectors one attention work item holds (QMAX in
// attention.cu): rows per item = qMax / (query heads per KV head).
const qMax = 16

// partFloats is one split's partial result (PART in attention.cu).
const partFloats = qMax*128 + 2*qMax

// minSplit is the fewest positions worth a split of their own.
const minSplit = 64

// Attention writes k and v into the layer's F16 cache at b.Slots, then runs
// paged causal attention for every sequence (attention.cu).
func (b *Backend) Attention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32) error {
	ot, err := f32Of(out, "Attention out")
	if err != nil {
		return err
	}
	qt, err := f32Of(q, "Attention q")
	if err != nil {
		return err
	}
	kt, err := f32Of(k, "Attention k")
	if err != nil {
		return err
	}
	vt, err := f32Of(v, "Attention v")
	if err != nil {
		return err
	}
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cuda backend: KV store %T was not made by this backend", kv)
	}
	cfg := store.cfg
	if layer < 0 || layer >= cfg.Layers {
		return fmt.Errorf("cuda backend: Attention: layer %d of %d", layer, cfg.Layers)
	}
	kvCols := cfg.KVHeads * cfg.HeadDim
	qCols := qt.cols()
	n := len(batch.Tokens)
	if kt.cols() != kvCols || vt.cols() != kvCols || qCols%cfg.HeadDim != 0 || ot.cols() != qCols ||
		int64(n*qCols) > qt.elems() || int64(n*kvCols) > kt.elems() || int64(n*kvCols) > vt.elems() || int64(n*qCols) > ot.elems() {
		return fmt.Errorf("cuda backend: Attention: q %v k %v out %v do not fit KV %+v with %d rows", qt.shape, kt.shape, ot.shape, cfg, n)
	}
	heads := qCols / cfg.HeadDim
	if heads%cfg.KVHeads != 0 {
		return fmt.Errorf("cuda backend: Attention: %d query heads over %d KV heads", heads, cfg.KVHeads)
	}
	group := heads / cfg.KVHeads
	if group > qMax {
		return fmt.Errorf("cuda backend: Attention: %d query heads per KV head; the kernel takes at most %d", group, qMax)
	}
	if len(batch.Positions) < n || len(batch.Slots) < n {
		return fmt.Errorf("cuda backend: Attention: %d rows with %d positions and %d slots", n, len(batch.Positions), len(batch.Slots))
	}
	if err := checkBatch(batch, cfg, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	off, items := b.attentionTables(batch, n, max(1, qMax/group))
	kc, vc := store.layer(layer)
	slotsOff, posOff, itemsOff := off, off+n, off+2*n
	seqOff, blocksOff := itemsOff+3*items, itemsOff+3*items+len(batch.Seqs)
	if !b.fuseRoPEKV(kt, vt, kc, vc, slotsOff, kvCols, batch.Positions[:n]) {
		if err := b.launch("kv_write", [3]int{n, 1, 1}, [3]int{128, 1, 1},
			ptrArg(kc), ptrArg(vc), ptrArg(kt.ptr), ptrArg(vt.ptr), tabArg(slotsOff), intArg(kvCols)); err != nil {
			return err
		}
	}
	if items == 0 {
		return nil
	}
	// With splits, the last block of each work item to finish merges them
	// (attention.cu): one launch either way.
	splits, splitLen := b.splits(items*cfg.KVHeads, batch)
	return b.launch("paged_attention", [3]int{items, cfg.KVHeads, splits}, [3]int{128, 1, 1},
		ptrArg(ot.ptr), ptrArg(qt.ptr), ptrArg(kc), ptrArg(vc), tabArg(itemsOff), tabArg(seqOff), tabArg(blocksOff),
		tabArg(posOff), intArg(heads), intArg(cfg.KVHeads), intArg(cfg.HeadDim), intArg(cfg.BlockSize), f32Arg(scale),
		ptrArg(store.part), intArg(splitLen), ptrArg(store.counters))
}

// fuseRoPEKV turns the step's last launch, when it is the RoPE of q and
// this k at the batch's positions, into rope_kv, which also writes k (as
// rotated) and v into the cache: the kv_write launch is not needed.
func (b *Backend) fuseRoPEKV(k, v *tensor, kc, vc devPtr, slotsOff, kvCols int, pos []int32) bool {
	s := &b.step
	l := s.last()
	if l == nil || l.fn != "rope" || l.args[2] != uint64(k.ptr) || l.grid[1] != len(pos) || l.tables != 1<<5 ||
		int(l.args[3])*int(l.args[6]) != kvCols {
		return false
	}
	if off := int(l.args[5]); off+len(pos) > len(s.tab) || !slices.Equal(s.tab[off:off+len(pos)], pos) {
		return false
	}
	pairs := (int(l.args[1]) + int(l.args[3])) * int(l.args[7])
	l.fn = "rope_kv"
	l.grid[0] = ceilDiv(max(pairs, kvCols), 128)
	l.args[9], l.args[10], l.args[11], l.args[12], l.args[13] = uint64(kc), uint64(vc), uint64(v.ptr), uint64(slotsOff), uint64(kvCols)
	l.tables |= 1 << 12
	l.nargs = 14
	return true
}

// splits decides how many ranges each work item's context is cut into: one
// when the items alone give every SM two blocks, else enough to do so, each
// range at least minSplit positions (a multiple of the kernel's 32-position
// tile) and all partials within the store's scratch.
func (b *Backend) splits(blocks int, batch *kernels.Batch) (splits, splitLen int) {
	const whole = 1 << 30
	ctx := 0
	for _, sq := range batch.Seqs {
		if sq.End > sq.Start {
			ctx = max(ctx, sq.ContextLen)
		}
	}
	target := 2 * max(b.sms, 1)
	if blocks >= target || ctx < 2*minSplit {
		return 1, whole
	}
	splits = min(ceilDiv(target, blocks), ctx/minSplit, partBytes/(4*partFloats*blocks))
	if splits <= 1 {
		return 1, whole
	}
	splitLen = ceilDiv(ceilDiv(ctx, splits), 32) * 32
	return ceilDiv(ctx, splitLen), splitLen
}

// checkBatch applies the CPU backend's checks: slots, blocks and positions in
// range, each sequence's rows inside the batch with enough blocks.
func checkBatch(batch *kernels.Batch, cfg kernels.KVConfig, n int) error {
	slots := cfg.Blocks * cfg.BlockSize
	for _, s := range batch.Slots[:n] {
		if s < 0 || int(s) >= slots {
			return fmt.Errorf("cuda backend: Attention: slot %d out of range [0,%d)", s, slots)
		}
	}
	for si, sq := range batch.Seqs {
		if sq.Start < 0 || sq.End > n || sq.Start > sq.End {
			return fmt.Errorf("cuda backend: Attention: sequence %d rows [%d,%d) outside the batch", si, sq.Start, sq.End)
		}
		if need := (sq.ContextLen + cfg.BlockSize - 1) / cfg.BlockSize; need > len(sq.Blocks) {
			return fmt.Errorf("cuda backend: Attention: sequence %d has %d blocks for %d tokens", si, len(sq.Blocks), sq.ContextLen)
		}
		for _, blk := range sq.Blocks {
			if blk < 0 || int(blk) >= cfg.Blocks {
				return fmt.Errorf("cuda backend: Attention: block %d out of range [0,%d)", blk, cfg.Blocks)
			}
		}
		for r := sq.Start; r < sq.End; r++ {
			if p := batch.Positions[r]; p < 0 || int(p) >= sq.ContextLen {
				return fmt.Errorf("cuda backend: Attention: row %d at position %d outside its context of %d", r, p, sq.ContextLen)
			}
			if r > sq.Start && batch.Positions[r] <= batch.Positions[r-1] {
				return fmt.Errorf("cuda backend: Attention: sequence %d rows are not in position order", si)
			}
		}
	}
	return nil
}

// attentionTables pushes one table block for the step and returns its offset
// and the number of work items:
//
//	[ slots n | positions n | items 3·items | block-table offsets seqs | block tables ]
//
// Every layer's call of one forward pass gets the same tables: an identical
// last copy is reused (its contents are compared, so a Batch reused and
// refilled before the step is flushed is still seen afresh).
func (b *Backend) attentionTables(batch *kernels.Batch, n, rowsPerItem int) (off, items int) {
	s := &b.step
	tab := append(s.scratch[:0], batch.Slots[:n]...)
	tab = append(tab, batch.Positions[:n]...)
	for si, sq := range batch.Seqs {
		for r := sq.Start; r < sq.End; r += rowsPerItem {
			tab = append(tab, int32(si), int32(r), int32(min(rowsPerItem, sq.End-r)))
			items++
		}
	}
	nb := 0
	for _, sq := range batch.Seqs {
		tab = append(tab, int32(nb))
		nb += len(sq.Blocks)
	}
	for _, sq := range batch.Seqs {
		tab = append(tab, sq.Blocks...)
	}
	s.scratch = tab
	if s.lastAttn != nil && s.lastRows == n && s.lastItems == items && slices.Equal(s.lastAttn, tab) {
		return s.lastAttnOff, items
	}
	s.lastAttnOff = s.push(tab)
	s.lastAttn = s.tab[s.lastAttnOff : s.lastAttnOff+len(tab) : s.lastAttnOff+len(tab)]
	s.lastRows, s.lastItems = n, items
	return s.lastAttnOff, items
}
