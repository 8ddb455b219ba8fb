//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluicehq/sluice/kernels"
)

// The optional ops of Gemma 3, Qwen3 and the mixture-of-experts models
// (kernels/gemma.go, moe.go), with the kernels of modelops.cu. Each checks
// its arguments as kernels/cpu does, then records launches.

var (
	_ kernels.GemmaOps        = (*Backend)(nil)
	_ kernels.MoEOps          = (*Backend)(nil)
	_ kernels.SoftCapOps      = (*Backend)(nil)
	_ kernels.SharedExpertOps = (*Backend)(nil)
)

func (b *Backend) HeadRMSNorm(x, w kernels.Tensor, n, heads int, eps float32) error {
	xt, err := f32Of(x, "HeadRMSNorm x")
	if err != nil {
		return err
	}
	wt, err := f32Of(w, "HeadRMSNorm weight")
	if err != nil {
		return err
	}
	hd := int(wt.elems())
	if heads <= 0 || xt.cols() != heads*hd || int64(n*xt.cols()) > xt.elems() {
		return fmt.Errorf("cuda backend: HeadRMSNorm: %d rows of %v as %d heads of %d", n, xt.shape, heads, hd)
	}
	if n <= 0 {
		return nil
	}
	return b.launch("head_rms_norm", [3]int{n * heads, 1, 1}, [3]int{32, 1, 1}, ptrArg(xt.ptr), ptrArg(wt.ptr), intArg(hd), f32Arg(eps))
}

func (b *Backend) Scale(x kernels.Tensor, n int, s float32) error {
	xt, err := f32Of(x, "Scale x")
	if err != nil {
		return err
	}
	m := int64(n * xt.cols())
	if m > xt.elems() {
		return fmt.Errorf("cuda backend: Scale: %d rows exceed %v", n, xt.shape)
	}
	if m <= 0 {
		return nil
	}
	return b.launch("scale_rows", elementGrid(m), [3]int{256, 1, 1}, ptrArg(xt.ptr), f32Arg(s), arg{v: uint64(m)})
}

func (b *Backend) GeGLU(dst, gate, up kernels.Tensor, n int) error {
	d, err := f32Of(dst, "GeGLU dst")
	if err != nil {
		return err
	}
	g, err := f32Of(gate, "GeGLU gate")
	if err != nil {
		return err
	}
	u, err := f32Of(up, "GeGLU up")
	if err != nil {
		return err
	}
	m := int64(n * d.cols())
	if m > g.elems() || m > u.elems() || m > d.elems() {
		return fmt.Errorf("cuda backend: GeGLU: %d rows exceed the tensors", n)
	}
	if m <= 0 {
		return nil
	}
	return b.launch("geglu", elementGrid(m), [3]int{256, 1, 1}, ptrArg(d.ptr), ptrArg(g.ptr), ptrArg(u.ptr), arg{v: uint64(m)})
}

// SoftCap caps the first n rows of x (Gemma 2's final logits).
func (b *Backend) SoftCap(x kernels.Tensor, n int, cap float32) error {
	xt, err := f32Of(x, "SoftCap x")
	if err != nil {
		return err
	}
	m := int64(n * xt.cols())
	if m > xt.elems() || !(cap > 0) {
		return fmt.Errorf("cuda backend: SoftCap: %d rows of %v, cap %g", n, xt.shape, cap)
	}
	if m <= 0 {
		return nil
	}
	return b.launch("soft_cap", elementGrid(m), [3]int{256, 1, 1}, ptrArg(xt.ptr), f32Arg(cap), arg{v: uint64(m)})
}

// capScratch is CappedAttention's device scratch for the scores, grown on
// demand and kept for the backend's life (Close frees every allocation).
type capScratch struct {
	scores kernels.Tensor
	cap    int // floats
	rows   []int32
}

// CappedAttention is SlidingAttention (window ≤ 0: the whole context) with
// each score capped before the softmax (Gemma 2). It runs capped_attention,
// a plain kernel of modelops.cu, instead of attention.cu's paged ones, which
// have no place for the cap: each row reads the slots windowBatch lays out
// for it. It is correct, not tuned (a block per row and head, the scores
// in device memory).
func (b *Backend) CappedAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, cap float32) error {
	if !(cap > 0) {
		return b.SlidingAttention(out, q, k, v, kv, layer, batch, scale, window)
	}
	return b.rowAttention("CappedAttention", "capped_attention", out, q, k, v, kv, layer, batch, scale, window, f32Arg(cap))
}

// rowAttention runs kernel, capped_attention or one of its kind
// (gptoss.cu's sink_attention), for the op named what: a block per row and
// head over the slots each row reads, its scores in scratch. The kernel
// takes capped_attention's arguments, last the one given here (the cap, the
// sinks).
func (b *Backend) rowAttention(what, kernel string, out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, last arg) error {
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cuda backend: KV store %T was not made by this backend", kv)
	}
	cfg := store.cfg
	n := len(batch.Tokens)
	if len(batch.Positions) < n || len(batch.Slots) < n {
		return fmt.Errorf("cuda backend: %s: %d rows with %d positions and %d slots", what, n, len(batch.Positions), len(batch.Slots))
	}
	ot, err := f32Of(out, what+" out")
	if err != nil {
		return err
	}
	qt, err := f32Of(q, what+" q")
	if err != nil {
		return err
	}
	kt, err := f32Of(k, what+" k")
	if err != nil {
		return err
	}
	vt, err := f32Of(v, what+" v")
	if err != nil {
		return err
	}
	kvCols, qCols := cfg.KVHeads*cfg.HeadDim, qt.cols()
	if kt.cols() != kvCols || vt.cols() != kvCols || qCols%cfg.HeadDim != 0 || ot.cols() != qCols ||
		int64(n*qCols) > qt.elems() || int64(n*kvCols) > kt.elems() || int64(n*kvCols) > vt.elems() || int64(n*qCols) > ot.elems() {
		return fmt.Errorf("cuda backend: %s: q %v k %v out %v do not fit KV %+v with %d rows", what, qt.shape, kt.shape, ot.shape, cfg, n)
	}
	heads := qCols / cfg.HeadDim
	if heads%cfg.KVHeads != 0 {
		return fmt.Errorf("cuda backend: %s: %d query heads over %d KV heads", what, heads, cfg.KVHeads)
	}
	if layer < 0 || layer >= cfg.Layers {
		return fmt.Errorf("cuda backend: %s: layer %d of %d", what, layer, cfg.Layers)
	}
	if n == 0 {
		return nil
	}
	if window <= 0 { // every row's window reaches position 0: each keeps its sequence's table
		for _, p := range batch.Positions[:n] {
			window = max(window, int(p)+1)
		}
	}
	wb := windowBatches.Get().(*windowBatch)
	defer windowBatches.Put(wb)
	if err := wb.build(batch, cfg, n, window); err != nil {
		return err
	}
	// Each row's table is the slots of the positions it reads, as build laid
	// them out: its virtual sequence's, up to its (rewritten) position.
	s := &b.capped
	s.rows = s.rows[:0]
	from := 0 // build lays the tables out back to back in wb.slots, in Seqs' order
	for _, sq := range wb.b.Seqs {
		for r := sq.Start; r < sq.End; r++ {
			s.rows = append(s.rows, int32(from), wb.b.Positions[r]+1)
		}
		from += len(sq.Blocks)
	}
	stride := 0
	for r := range n {
		stride = max(stride, int(s.rows[2*r+1]))
	}
	if need := n * heads * stride; s.cap < need {
		c := max(need, 2*s.cap)
		t, err := b.Alloc(c)
		if err != nil {
			return fmt.Errorf("cuda backend: %s scratch: %w", what, err)
		}
		s.scores, s.cap = t, c
	}
	st, _ := f32Of(s.scores, what+" scratch")
	kc, vc := store.layer(layer)
	slotsOff := b.step.push(wb.b.Slots)
	if err := b.launch("kv_write", [3]int{n, 1, 1}, [3]int{128, 1, 1},
		ptrArg(kc), ptrArg(vc), ptrArg(kt.ptr), ptrArg(vt.ptr), tabArg(slotsOff), intArg(kvCols)); err != nil {
		return err
	}
	tabOff, rowsOff := b.step.push(wb.slots), b.step.push(s.rows)
	return b.launch(kernel, [3]int{n, heads, 1}, [3]int{128, 1, 1},
		ptrArg(ot.ptr), ptrArg(qt.ptr), ptrArg(kc), ptrArg(vc), tabArg(tabOff), tabArg(rowsOff), ptrArg(st.ptr),
		arg{v: uint64(stride)}, intArg(heads), intArg(cfg.KVHeads), intArg(cfg.HeadDim), f32Arg(scale), last)
}

// windowBatch is SlidingAttention's rewritten batch, reused across calls.
type windowBatch struct {
	b     kernels.Batch
	slots []int32 // every virtual sequence's slot table, back to back
}

var windowBatches = sync.Pool{New: func() any { return new(windowBatch) }}

// SlidingAttention runs Attention with each row's context clamped to its
// window, leaving the attention kernels as they are: the rows are handed to
// Attention over a view of the store with one-slot blocks, so that a
// block table can start at any position. A row whose window reaches back
// to position 0 keeps its sequence's positions; one past it becomes a
// sequence of its own whose table holds the slots of (p−window, p], at
// position window−1. Blocks below every row's window are never looked at
// (a window table may hold −1 there).
func (b *Backend) SlidingAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int) error {
	return b.slidingAttention(out, q, k, v, kv, layer, batch, scale, window, 0)
}

// slidingAttention is SlidingAttention, with sinks as attention takes them.
func (b *Backend) slidingAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, sinks devPtr) error {
	if window <= 0 {
		return b.attention(out, q, k, v, kv, layer, batch, scale, sinks)
	}
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cuda backend: KV store %T was not made by this backend", kv)
	}
	cfg := store.cfg
	n := len(batch.Tokens)
	if len(batch.Positions) < n || len(batch.Slots) < n {
		return fmt.Errorf("cuda backend: SlidingAttention: %d rows with %d positions and %d slots", n, len(batch.Positions), len(batch.Slots))
	}
	wb := windowBatches.Get().(*windowBatch)
	defer windowBatches.Put(wb)
	if err := wb.build(batch, cfg, n, window); err != nil {
		return err
	}
	view := *store
	view.cfg.Blocks, view.cfg.BlockSize = cfg.Blocks*cfg.BlockSize, 1
	// The rows' K and V are in the cache before any row reads them: another
	// row of the same sequence is now a sequence of its own, and Attention's
	// fused writes assume a row is read only by its own sequence.
	kt, err := f32Of(k, "SlidingAttention k")
	if err != nil {
		return err
	}
	vt, err := f32Of(v, "SlidingAttention v")
	if err != nil {
		return err
	}
	kvCols := cfg.KVHeads * cfg.HeadDim
	if kt.cols() != kvCols || vt.cols() != kvCols || int64(n*kvCols) > kt.elems() || int64(n*kvCols) > vt.elems() {
		return fmt.Errorf("cuda backend: SlidingAttention: k %v v %v do not fit KV %+v with %d rows", kt.shape, vt.shape, cfg, n)
	}
	if layer < 0 || layer >= cfg.Layers {
		return fmt.Errorf("cuda backend: SlidingAttention: layer %d of %d", layer, cfg.Layers)
	}
	if n == 0 {
		return nil
	}
	kc, vc := store.layer(layer)
	off := b.step.push(wb.b.Slots)
	if err := b.launch("kv_write", [3]int{n, 1, 1}, [3]int{128, 1, 1},
		ptrArg(kc), ptrArg(vc), ptrArg(kt.ptr), ptrArg(vt.ptr), tabArg(off), intArg(kvCols)); err != nil {
		return err
	}
	return b.attention(out, q, k, v, &view, layer, &wb.b, scale, sinks)
}

// build lays out batch's rows as SlidingAttention runs them, checking what
// the CPU backend checks over the positions each row reads.
func (wb *windowBatch) build(batch *kernels.Batch, cfg kernels.KVConfig, n, window int) error {
	bs := cfg.BlockSize
	slots := cfg.Blocks * bs
	out := &wb.b
	out.Tokens, out.Slots, out.LogitRows = batch.Tokens[:n], batch.Slots[:n], nil
	out.Positions = append(out.Positions[:0], batch.Positions[:n]...)
	out.Seqs = out.Seqs[:0]
	wb.slots = wb.slots[:0]
	for _, s := range batch.Slots[:n] {
		if s < 0 || int(s) >= slots {
			return fmt.Errorf("cuda backend: SlidingAttention: slot %d out of range [0,%d)", s, slots)
		}
	}
	// Tables are sliced out of wb.slots once it stops growing.
	type seqAt struct{ start, end, ctx, from, to int }
	var at []seqAt
	for si, sq := range batch.Seqs {
		if sq.Start < 0 || sq.End > n || sq.Start > sq.End {
			return fmt.Errorf("cuda backend: SlidingAttention: sequence %d rows [%d,%d) outside the batch", si, sq.Start, sq.End)
		}
		slot := func(p int) (int32, error) {
			if p/bs >= len(sq.Blocks) {
				return 0, fmt.Errorf("cuda backend: SlidingAttention: sequence %d has %d blocks for position %d", si, len(sq.Blocks), p)
			}
			blk := sq.Blocks[p/bs]
			if blk < 0 || int(blk) >= cfg.Blocks {
				return 0, fmt.Errorf("cuda backend: SlidingAttention: block %d out of range [0,%d)", blk, cfg.Blocks)
			}
			return blk*int32(bs) + int32(p%bs), nil
		}
		head := sq.Start // rows [sq.Start, head) read from position 0
		for r := sq.Start; r < sq.End; r++ {
			p := int(batch.Positions[r])
			if p < 0 || p >= sq.ContextLen {
				return fmt.Errorf("cuda backend: SlidingAttention: row %d at position %d outside its context of %d", r, p, sq.ContextLen)
			}
			if r > sq.Start && batch.Positions[r] <= batch.Positions[r-1] {
				return fmt.Errorf("cuda backend: SlidingAttention: sequence %d rows are not in position order", si)
			}
			if p < window {
				head = r + 1
			}
		}
		if head > sq.Start {
			last := int(batch.Positions[head-1])
			from := len(wb.slots)
			for p := 0; p <= last; p++ {
				s, err := slot(p)
				if err != nil {
					return err
				}
				wb.slots = append(wb.slots, s)
			}
			at = append(at, seqAt{sq.Start, head, last + 1, from, len(wb.slots)})
		}
		for r := head; r < sq.End; r++ {
			p := int(batch.Positions[r])
			from := len(wb.slots)
			for j := p - window + 1; j <= p; j++ {
				s, err := slot(j)
				if err != nil {
					return err
				}
				wb.slots = append(wb.slots, s)
			}
			out.Positions[r] = int32(window - 1)
			at = append(at, seqAt{r, r + 1, window, from, len(wb.slots)})
		}
	}
	for _, a := range at {
		out.Seqs = append(out.Seqs, kernels.SeqRows{Start: a.start, End: a.end, ContextLen: a.ctx, Blocks: wb.slots[a.from:a.to:a.to]})
	}
	return nil
}

// moeMaxExperts is MOE_MAX_EXPERTS in modelops.cu.
const moeMaxExperts = 256

// moeScratch is MoEFFN's device scratch, grown on demand and kept for the
// backend's life (Close frees it with every allocation), and its host side.
type moeScratch struct {
	cap, hidden, ffn int
	x, g, u, o       kernels.Tensor // [cap, hidden], [cap, ffn] ×2, [cap, hidden]
	route            kernels.Tensor // [2·cap·k] moe_route's (expert, weight) pairs
	routeCap         int
	host             []float32
	rows             [][]int32
	weights          [][]int32 // float32 bits, pushed as a table
}

// MoEFFN routes on the device (moe_route), reads the routing back, then
// runs each expert with rows routed to it once over all of them: the rows
// gathered (get_rows_f32_any), gate and up projections, SwiGLU, down
// projection (the backend's own MatMul on the expert's slice of the
// weights), and the weighted result added into each row (moe_scatter).
func (b *Backend) MoEFFN(dst, x, logits, gate, up, down kernels.Tensor, n, k int, norm bool) error {
	return b.moeFFN(dst, x, logits, gate, up, down, n, k, norm, nil)
}

// oaiExperts are what gpt-oss's experts add to MoEFFN's (OAIMoEFFN):
// per-expert biases ([experts, ffn] ×2, [experts, hidden]) and the clamped
// SwiGLU's alpha and limit.
type oaiExperts struct {
	gateB, upB, downB *tensor
	alpha, limit      float32
}

// moeFFN is MoEFFN, or with oai OAIMoEFFN: the biases go to each expert's
// MatMuls (its row of each bias tensor) and oai_swiglu replaces SwiGLU.
func (b *Backend) moeFFN(dst, x, logits, gate, up, down kernels.Tensor, n, k int, norm bool, oai *oaiExperts) error {
	d, err := f32Of(dst, "MoEFFN dst")
	if err != nil {
		return err
	}
	xt, err := f32Of(x, "MoEFFN x")
	if err != nil {
		return err
	}
	lt, err := f32Of(logits, "MoEFFN logits")
	if err != nil {
		return err
	}
	gt, err := asCUDA(gate)
	if err != nil {
		return err
	}
	ut, err := asCUDA(up)
	if err != nil {
		return err
	}
	wd, err := asCUDA(down)
	if err != nil {
		return err
	}
	hidden, experts := xt.cols(), lt.cols()
	if len(gt.shape) != 3 || len(ut.shape) != 3 || len(wd.shape) != 3 {
		return fmt.Errorf("cuda backend: MoEFFN: expert tensors %v %v %v are not [experts, rows, cols]", gt.shape, ut.shape, wd.shape)
	}
	ffn := gt.shape[1]
	switch {
	case gt.shape[0] != experts || gt.shape[2] != hidden || ut.shape[0] != experts || ut.shape[1] != ffn || ut.shape[2] != hidden || gt.dtype != ut.dtype,
		wd.shape[0] != experts || wd.shape[1] != hidden || wd.shape[2] != ffn,
		d.cols() != hidden || int64(n*hidden) > xt.elems() || int64(n*hidden) > d.elems() || int64(n*experts) > lt.elems(),
		k <= 0 || k > experts || experts > moeMaxExperts:
		return fmt.Errorf("cuda backend: MoEFFN: x %v logits %v gate %v down %v dst %v, %d rows, top %d (at most %d experts)",
			xt.shape, lt.shape, gt.shape, wd.shape, d.shape, n, k, moeMaxExperts)
	case oai != nil && (oai.gateB.elems() != int64(experts*ffn) || oai.upB.elems() != int64(experts*ffn) || oai.downB.elems() != int64(experts*hidden)):
		return fmt.Errorf("cuda backend: OAIMoEFFN: biases %v %v %v for %d experts of %d and %d", oai.gateB.shape, oai.upB.shape, oai.downB.shape,
			experts, ffn, hidden)
	}
	if n <= 0 {
		return nil
	}
	s, err := b.moeScratch(n, k, hidden, ffn, experts)
	if err != nil {
		return err
	}
	normArg := 0
	if norm {
		normArg = 1
	}
	rt := s.route.(*tensor)
	if err := b.launch("moe_route", [3]int{ceilDiv(n, 64), 1, 1}, [3]int{64, 1, 1},
		ptrArg(rt.ptr), ptrArg(lt.ptr), intArg(n), intArg(experts), intArg(k), intArg(normArg)); err != nil {
		return err
	}
	// The host must know which rows each expert takes to run it over them
	// together; the read waits for the step so far.
	host := s.host[:2*n*k]
	if err := b.Read(s.route, host); err != nil {
		return err
	}
	for e := range experts {
		s.rows[e], s.weights[e] = s.rows[e][:0], s.weights[e][:0]
	}
	for i := range n * k {
		e := int(host[2*i])
		if e < 0 || e >= experts {
			return fmt.Errorf("cuda backend: MoEFFN: the router picked expert %d of %d", e, experts)
		}
		s.rows[e] = append(s.rows[e], int32(i/k))
		s.weights[e] = append(s.weights[e], int32(math.Float32bits(host[2*i+1])))
	}
	if err := b.launch("zero_f32", elementGrid(int64(n*hidden)), [3]int{256, 1, 1}, ptrArg(d.ptr), arg{v: uint64(n * hidden)}); err != nil {
		return err
	}
	sx, sg, su, so := s.x.(*tensor), s.g.(*tensor), s.u.(*tensor), s.o.(*tensor)
	for e := range experts {
		m := len(s.rows[e])
		if m == 0 {
			continue
		}
		rows, ws := b.step.push(s.rows[e]), b.step.push(s.weights[e])
		var gb, ub, db kernels.Tensor // nil interfaces, not nil *tensor, without biases
		act := func() error { return b.SwiGLU(sg, sg, su, m) }
		if oai != nil {
			gb, ub, db = biasView(oai.gateB, e, ffn), biasView(oai.upB, e, ffn), biasView(oai.downB, e, hidden)
			act = func() error {
				return b.launch("oai_swiglu", elementGrid(int64(m*ffn)), [3]int{256, 1, 1}, ptrArg(sg.ptr), ptrArg(su.ptr),
					arg{v: uint64(m * ffn)}, f32Arg(oai.alpha), f32Arg(oai.limit))
			}
		}
		if err := firstErr(
			b.launch("get_rows_f32_any", [3]int{m, 1, 1}, [3]int{128, 1, 1}, ptrArg(sx.ptr), ptrArg(xt.ptr), tabArg(rows), intArg(hidden)),
			b.MatMul(sg, sx, expertView(gt, e), gb, m),
			b.MatMul(su, sx, expertView(ut, e), ub, m),
			act(),
			b.MatMul(so, sg, expertView(wd, e), db, m),
			b.launch("moe_scatter", [3]int{m, 1, 1}, [3]int{128, 1, 1}, ptrArg(d.ptr), ptrArg(so.ptr), tabArg(rows), tabArg(ws), intArg(hidden)),
		); err != nil {
			return err
		}
	}
	return nil
}

// GatedAdd adds Qwen2-MoE's shared expert into the mixture: dst[i] +=
// sigmoid(gate[i,0]) · x[i] for the first n rows (gated_add).
func (b *Backend) GatedAdd(dst, x, gate kernels.Tensor, n int) error {
	d, err := f32Of(dst, "GatedAdd dst")
	if err != nil {
		return err
	}
	xt, err := f32Of(x, "GatedAdd x")
	if err != nil {
		return err
	}
	gt, err := f32Of(gate, "GatedAdd gate")
	if err != nil {
		return err
	}
	cols := d.cols()
	if xt.cols() != cols || gt.cols() != 1 || n < 0 || int64(n*cols) > d.elems() || int64(n*cols) > xt.elems() || int64(n) > gt.elems() {
		return fmt.Errorf("cuda backend: GatedAdd: dst %v, x %v, gate %v, %d rows", d.shape, xt.shape, gt.shape, n)
	}
	if n == 0 {
		return nil
	}
	return b.launch("gated_add", [3]int{n, 1, 1}, [3]int{128, 1, 1}, ptrArg(d.ptr), ptrArg(xt.ptr), ptrArg(gt.ptr), intArg(cols))
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// expertView is expert e's matrix of a [experts, rows, cols] weight.
func expertView(t *tensor, e int) *tensor {
	rows, cols := t.shape[1], t.shape[2]
	bytes := int64(rows) * int64(t.dtype.RowBytes(cols))
	return &tensor{shape: []int{rows, cols}, dtype: t.dtype, ptr: t.ptr + devPtr(int64(e)*bytes), bytes: bytes}
}

// biasView is row e of an F32 [experts, cols] bias.
func biasView(t *tensor, e, cols int) *tensor {
	return &tensor{shape: []int{cols}, dtype: kernels.F32, ptr: t.ptr + devPtr(4*int64(e)*int64(cols)), bytes: 4 * int64(cols)}
}

// moeScratch returns the backend's MoE scratch, grown to hold n rows.
func (b *Backend) moeScratch(n, k, hidden, ffn, experts int) (*moeScratch, error) {
	s := &b.moe
	if s.cap < n || s.hidden != hidden || s.ffn != ffn {
		c := max(n, 2*s.cap)
		if s.hidden != hidden || s.ffn != ffn {
			c = n
		}
		var err error
		alloc := func(shape ...int) kernels.Tensor {
			if err != nil {
				return nil
			}
			var t kernels.Tensor
			t, err = b.Alloc(shape...)
			return t
		}
		x, g, u, o := alloc(c, hidden), alloc(c, ffn), alloc(c, ffn), alloc(c, hidden)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: MoEFFN scratch: %w", err)
		}
		s.x, s.g, s.u, s.o, s.cap, s.hidden, s.ffn = x, g, u, o, c, hidden, ffn
	}
	if s.routeCap < 2*n*k {
		c := max(2*n*k, 2*s.routeCap)
		t, err := b.Alloc(c)
		if err != nil {
			return nil, fmt.Errorf("cuda backend: MoEFFN scratch: %w", err)
		}
		s.route, s.routeCap, s.host = t, c, make([]float32, c)
	}
	if len(s.rows) < experts {
		s.rows, s.weights = make([][]int32, experts), make([][]int32, experts)
	}
	return s, nil
}
