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

// decodePart is paged_decode's partition: positions per block (DP in
// attention.cu), the most with split-K (decodePartLen).
const decodePart = 256

// decodeMinPart is the shortest split-K partition (DMIN in attention.cu).
const decodeMinPart = 64

// decodePartLen mirrors attention.cu's decode_part: the positions per
// partition of a context of ctx, cut into about splits ranges when splits
// > 0.
func decodePartLen(ctx, splits int) int {
	if splits <= 0 {
		return decodePart
	}
	return min(decodePart, max(decodeMinPart, ceilDiv(ceilDiv(ctx, splits), decodeMinPart)*decodeMinPart))
}

// decodeSplits is paged_decode's split-K for a step of items decode items:
// 0 (partitions of decodePart) when the items alone give every SM two
// blocks, else how many partitions each item's context is cut into so that
// they do. A batch-1 decode step of 8 KV heads would otherwise run 8 blocks
// per 256 positions of context on a 132-SM GPU.
func (b *Backend) decodeSplits(items, kvHeads int) int {
	target := 2 * max(b.sms, 1)
	if items == 0 || items*kvHeads >= target {
		return 0
	}
	return ceilDiv(target, items*kvHeads)
}

// decodeCounters is how many (item, KV head) pairs one paged_decode launch
// may count partitions for (the store's decCounters).
const decodeCounters = 1 << 14

// decodeShape mirrors attention_decode.cu's entry points: the query vectors
// one work item of paged_decode_<hd> holds in registers; ok is false for a
// head size it was not built for.
func decodeShape(hd int) (nq int, ok bool) {
	switch hd {
	case 64, 128:
		return 8, true
	case 80, 96, 256:
		return 4, true
	}
	return 0, false
}

// prefillQueries is how many query vectors one paged_prefill item holds
// (four warps of 16 in attention.cu).
const prefillQueries = 64

// prefillShape says whether attention.cu has paged_prefill_<hd>.
func prefillShape(hd int) bool { return hd == 64 || hd == 80 || hd == 96 || hd == 128 }

// decodeScratch sizes a store's paged_decode scratch: partial results per
// KV head (twice the pool's partitions, plus room for the rounding of short
// contexts and for GQA items sharing a row) and the floats of one.
func decodeScratch(cfg kernels.KVConfig) (parts, floats int) {
	nq, ok := decodeShape(cfg.HeadDim)
	if !ok {
		return 0, 0
	}
	return 2*cfg.Blocks*cfg.BlockSize/decodePart + 1024, nq*cfg.HeadDim + 2*nq
}

// minSplit is the fewest positions worth a split of their own.
const minSplit = 64

// Attention writes k and v into the layer's F16 cache at b.Slots, then runs
// paged causal attention for every sequence (attention.cu).
func (b *Backend) Attention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32) error {
	return b.attention(out, q, k, v, kv, layer, batch, scale, 0)
}

// attention is Attention, or with sinks (gpt-oss's per-head sink logits,
// F32 [heads]) on paged_decode_sink and paged_prefill_sink: then every
// sequence must go to one of those two (sinkPaged says when), as
// paged_attention has no sinks.
func (b *Backend) attention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, sinks devPtr) error {
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
	if len(batch.Positions) < n || len(batch.Slots) < n {
		return fmt.Errorf("cuda backend: Attention: %d rows with %d positions and %d slots", n, len(batch.Positions), len(batch.Slots))
	}
	if err := checkBatch(batch, cfg, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	nq, fast := decodeShape(cfg.HeadDim)
	plan := decodePlan{nq: nq, group: group, parts: store.decParts, items: decodeCounters / cfg.KVHeads}
	// paged_decode takes single rows, and every row where paged_attention
	// cannot take the head size; the multi-row (prefill) items stay there.
	plan.takes = func(sq kernels.SeqRows) bool { return fast && (sq.End-sq.Start == 1 || cfg.HeadDim > 128) }
	// paged_prefill (tensor cores) takes the other multi-row sequences of
	// the head sizes it is built for; paged_attention what is left
	plan.prefill = func(sq kernels.SeqRows) bool {
		return prefillShape(cfg.HeadDim) && !plan.takes(sq) && sq.End > sq.Start
	}
	decItems := 0
	for _, sq := range batch.Seqs {
		if plan.takes(sq) {
			decItems += ceilDiv((sq.End-sq.Start)*group, nq)
		}
	}
	plan.splits = b.decodeSplits(decItems, cfg.KVHeads)
	t := b.attentionTables(batch, n, max(1, qMax/group), &plan)
	// the sink kernels take the sinks as one more argument than paged_decode's 18, paged_prefill's 12
	decodeFn, prefillFn, sinkArgs := "paged_decode_%d", "paged_prefill_%d", 0
	if sinks != 0 {
		if t.items > 0 {
			return fmt.Errorf("cuda backend: SinkAttention: head size %d has no paged kernel with sinks", cfg.HeadDim)
		}
		decodeFn, prefillFn, sinkArgs = "paged_decode_sink_%d", "paged_prefill_sink_%d", 1
	}
	if t.items > 0 && group > qMax {
		return fmt.Errorf("cuda backend: Attention: %d query heads per KV head; paged_attention takes at most %d", group, qMax)
	}
	kc, vc := store.layer(layer)
	slotsOff, posOff, itemsOff := t.off, t.off+n, t.off+2*n
	seqOff, blocksOff := itemsOff+3*t.items, itemsOff+3*t.items+len(batch.Seqs)
	// K and V reach the cache in rope_kv, else inside paged_decode when it
	// runs alone and the rows allow (kvFusible), else in kv_write.
	fused := 0
	if !b.fuseRoPEKV(kt, vt, kc, vc, slotsOff, kvCols, batch.Positions[:n]) {
		if t.items == 0 && t.preItems == 0 && t.decItems > 0 && kvFusible(batch, cfg, n) {
			fused = 1
		} else if err := b.launch("kv_write", [3]int{n, 1, 1}, [3]int{128, 1, 1},
			ptrArg(kc), ptrArg(vc), ptrArg(kt.ptr), ptrArg(vt.ptr), tabArg(slotsOff), intArg(kvCols)); err != nil {
			return err
		}
	}
	// one launch per range of decode items that fits the store's scratch
	cuts := b.step.decCuts
	for i := 0; i+1 < len(cuts); i++ {
		// with split-K the grid covers splits partitions whatever the
		// context (blocks past an item's context return), so that decode
		// steps repeat their launches, and their CUDA graph, as it grows
		z := max(t.decZ[i], plan.splits)
		args := [...]arg{ptrArg(ot.ptr), ptrArg(qt.ptr), ptrArg(kc), ptrArg(vc), ptrArg(kt.ptr), ptrArg(vt.ptr), intArg(fused),
			tabArg(t.decOff + 4*cuts[i]), tabArg(t.decSeqOff), tabArg(blocksOff), tabArg(posOff), intArg(heads),
			intArg(cfg.KVHeads), intArg(cfg.BlockSize), f32Arg(scale), ptrArg(store.decPart), ptrArg(store.decCounters),
			intArg(plan.splits), ptrArg(sinks)}
		if err := b.launch(fmt.Sprintf(decodeFn, cfg.HeadDim), [3]int{cuts[i+1] - cuts[i], cfg.KVHeads, z}, [3]int{128, 1, 1}, args[:18+sinkArgs]...); err != nil {
			return err
		}
	}
	if t.preItems > 0 {
		args := [...]arg{ptrArg(ot.ptr), ptrArg(qt.ptr), ptrArg(kc), ptrArg(vc), tabArg(t.preOff), tabArg(t.decSeqOff), tabArg(blocksOff),
			tabArg(posOff), intArg(heads), intArg(cfg.KVHeads), intArg(cfg.BlockSize), f32Arg(scale), ptrArg(sinks)}
		if err := b.launch(fmt.Sprintf(prefillFn, cfg.HeadDim), [3]int{t.preItems, cfg.KVHeads, 1}, [3]int{128, 1, 1}, args[:12+sinkArgs]...); err != nil {
			return err
		}
	}
	if t.items == 0 {
		return nil
	}
	// With splits, the last block of each work item to finish merges them
	// (attention.cu): one launch either way.
	splits, splitLen := b.splits(t.items*cfg.KVHeads, batch)
	return b.launch("paged_attention", [3]int{t.items, cfg.KVHeads, splits}, [3]int{128, 1, 1},
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

// attnTables is where attentionTables put one step's tables in the arena.
type attnTables struct {
	off       int // slots n | positions n | items 3·items | block-table offsets | block tables
	items     int // paged_attention's work items
	decOff    int // paged_decode's items, 4 int32 each
	decSeqOff int // paged_decode's (and paged_prefill's) sequences, 3 int32 each
	preOff    int // paged_prefill's items, 4 int32 each
	preItems  int
	decItems  int   // paged_decode's work items
	decZ      []int // per launch (step.decCuts): the most partitions of one of its items
}

// decodePlan is how attentionTables cuts rows into paged_decode items.
type decodePlan struct {
	nq, group int                        // query vectors per item; query heads per KV head
	parts     int                        // partial results the store's scratch holds per KV head
	splits    int                        // split-K (decodeSplits): 0, or about that many partitions an item
	items     int                        // items per launch, as the store has counters
	takes     func(kernels.SeqRows) bool // the sequences paged_decode serves
	prefill   func(kernels.SeqRows) bool // the sequences paged_prefill serves
}

// attentionTables pushes one table block for the step:
//
//	[ slots n | positions n | items 3·items | block-table offsets seqs | block tables
//	  | decode items 4·decItems | decode seqs 3·seqs | prefill items 4·preItems ]
//
// A paged_attention item is (sequence, first row, rows); a paged_decode item
// is (sequence, first query vector, query vectors, first partial) and its
// sequence entry (block-table offset, first row, rows); a paged_prefill
// item is a decode item of up to 64 query vectors. Decode items are cut
// into launches (step.decCuts) whose partials (items of more than one
// partition) fit the store's scratch, numbered from 0 in each launch.
//
// Every layer's call of one forward pass gets the same tables: an identical
// last copy is reused (its contents are compared, so a Batch reused and
// refilled before the step is flushed is still seen afresh).
func (b *Backend) attentionTables(batch *kernels.Batch, n, rowsPerItem int, plan *decodePlan) attnTables {
	s := &b.step
	var t attnTables
	tab := append(s.scratch[:0], batch.Slots[:n]...)
	tab = append(tab, batch.Positions[:n]...)
	for si, sq := range batch.Seqs {
		if plan.takes(sq) || plan.prefill(sq) {
			continue
		}
		for r := sq.Start; r < sq.End; r += rowsPerItem {
			tab = append(tab, int32(si), int32(r), int32(min(rowsPerItem, sq.End-r)))
			t.items++
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
	decOff := len(tab)
	s.decCuts = append(s.decCuts[:0], 0)
	s.decZ = s.decZ[:0]
	parts, z := 0, 0
	for si, sq := range batch.Seqs {
		if !plan.takes(sq) {
			continue
		}
		for qv := sq.Start * plan.group; qv < sq.End*plan.group; qv += plan.nq {
			nqv := min(plan.nq, sq.End*plan.group-qv)
			ctx := int(batch.Positions[(qv+nqv-1)/plan.group]) + 1
			np := ceilDiv(ctx, decodePartLen(ctx, plan.splits))
			own := 0 // partials of its own: an item of one partition writes out directly
			if np > 1 {
				own = np
			}
			if t.decItems > s.decCuts[len(s.decCuts)-1] && (parts+own > plan.parts || t.decItems-s.decCuts[len(s.decCuts)-1] >= plan.items) {
				s.decCuts = append(s.decCuts, t.decItems)
				s.decZ = append(s.decZ, z)
				parts, z = 0, 0
			}
			tab = append(tab, int32(si), int32(qv), int32(nqv), int32(parts))
			parts += own
			z = max(z, np)
			t.decItems++
		}
	}
	if t.decItems > 0 {
		s.decCuts = append(s.decCuts, t.decItems)
		s.decZ = append(s.decZ, z)
	} else {
		s.decCuts = s.decCuts[:0]
	}
	decSeqOff := len(tab)
	nb = 0
	for _, sq := range batch.Seqs {
		tab = append(tab, int32(nb), int32(sq.Start), int32(sq.End-sq.Start))
		nb += len(sq.Blocks)
	}
	preOff := len(tab)
	for si, sq := range batch.Seqs {
		if !plan.prefill(sq) {
			continue
		}
		for qv := sq.Start * plan.group; qv < sq.End*plan.group; qv += prefillQueries {
			tab = append(tab, int32(si), int32(qv), int32(min(prefillQueries, sq.End*plan.group-qv)), 0)
			t.preItems++
		}
	}
	s.scratch = tab
	t.decZ = s.decZ
	if s.lastAttn == nil || s.lastRows != n || s.lastItems != t.items || !slices.Equal(s.lastAttn, tab) {
		s.lastAttnOff = s.push(tab)
		s.lastAttn = s.tab[s.lastAttnOff : s.lastAttnOff+len(tab) : s.lastAttnOff+len(tab)]
		s.lastRows, s.lastItems = n, t.items
	}
	t.off = s.lastAttnOff
	t.decOff, t.decSeqOff, t.preOff = t.off+decOff, t.off+decSeqOff, t.off+preOff
	return t
}

// kvFusible reports whether paged_decode may write this step's K and V
// itself: every row belongs to one sequence, in order, at consecutive
// positions, in the slot its block table gives (then a position of this
// step maps to its row, attention_decode.cu).
func kvFusible(batch *kernels.Batch, cfg kernels.KVConfig, n int) bool {
	bs := int32(cfg.BlockSize)
	next := 0
	for _, sq := range batch.Seqs {
		if sq.End == sq.Start {
			continue
		}
		if sq.Start != next {
			return false
		}
		next = sq.End
		for r := sq.Start; r < sq.End; r++ {
			p := batch.Positions[r]
			if r > sq.Start && p != batch.Positions[r-1]+1 {
				return false
			}
			if batch.Slots[r] != sq.Blocks[p/bs]*bs+p%bs {
				return false
			}
		}
	}
	return next == n
}
