package cpu

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/kernels"
)

// gpt-oss's kernels (models/gptoss.go's gptossOps): attention whose softmax
// has a learned sink logit per head, and the expert feed-forward with
// per-expert biases and the clamped SwiGLU. Quantized experts take
// moe_group.go's grouped path; the attention is Attention's loop with the
// sink, its per-position dots and sums one assembly call a head
// (gptoss_amd64.s).

// SinkAttention writes k and v into layer's cache at b.Slots, then for each
// row and head computes softmax over [q·K·scale…, sink_h] and the weighted
// sum of V (the sink has no value), over the causal context or its last
// window positions.
func (b *Backend) SinkAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, sinks kernels.Tensor) error {
	os, ot, err := f32Of(out, "SinkAttention out")
	if err != nil {
		return err
	}
	qs, qt, err := f32Of(q, "SinkAttention q")
	if err != nil {
		return err
	}
	ks, kt, err := f32Of(k, "SinkAttention k")
	if err != nil {
		return err
	}
	vs, _, err := f32Of(v, "SinkAttention v")
	if err != nil {
		return err
	}
	sk, _, err := f32Of(sinks, "SinkAttention sinks")
	if err != nil {
		return err
	}
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cpu backend: KV store %T was not made by this backend", kv)
	}
	cfg := store.cfg
	kvCols, qCols, n := cfg.KVHeads*cfg.HeadDim, qt.cols(), len(batch.Tokens)
	if layer < 0 || layer >= cfg.Layers || kt.cols() != kvCols || qCols%cfg.HeadDim != 0 || ot.cols() != qCols ||
		n*qCols > len(qs) || n*kvCols > len(ks) || n*qCols > len(os) || len(batch.Slots) < n {
		return fmt.Errorf("cpu backend: SinkAttention: q %v k %v out %v, layer %d, do not fit KV %+v with %d rows", qt.shape, kt.shape, ot.shape, layer, cfg, n)
	}
	heads := qCols / cfg.HeadDim
	if heads%cfg.KVHeads != 0 || len(sk) < heads {
		return fmt.Errorf("cpu backend: SinkAttention: %d query heads, %d KV heads, %d sinks", heads, cfg.KVHeads, len(sk))
	}
	slots := cfg.Blocks * cfg.BlockSize
	kc, vc := store.k[layer], store.v[layer]
	for r, s := range batch.Slots[:n] {
		if s < 0 || int(s) >= slots {
			return fmt.Errorf("cpu backend: SinkAttention: slot %d out of range [0,%d)", s, slots)
		}
		toHalf(kc[int(s)*kvCols:(int(s)+1)*kvCols], ks[r*kvCols:(r+1)*kvCols])
		toHalf(vc[int(s)*kvCols:(int(s)+1)*kvCols], vs[r*kvCols:(r+1)*kvCols])
	}
	c := sinkPool.Get().(*sinkCall)
	defer sinkPool.Put(c)
	c.rowSeq = slices.Grow(c.rowSeq[:0], n)[:n]
	rowSeq, ctxSum := c.rowSeq, 0
	clear(rowSeq)
	for si, sq := range batch.Seqs {
		if sq.Start < 0 || sq.End > n || sq.Start > sq.End {
			return fmt.Errorf("cpu backend: SinkAttention: sequence %d rows [%d,%d) outside the batch", si, sq.Start, sq.End)
		}
		if need := (sq.ContextLen + cfg.BlockSize - 1) / cfg.BlockSize; need > len(sq.Blocks) {
			return fmt.Errorf("cpu backend: SinkAttention: sequence %d has %d blocks for %d tokens", si, len(sq.Blocks), sq.ContextLen)
		}
		for r := sq.Start; r < sq.End; r++ {
			p := int(batch.Positions[r])
			if p < 0 || p >= sq.ContextLen {
				return fmt.Errorf("cpu backend: SinkAttention: row %d at position %d outside its context of %d", r, p, sq.ContextLen)
			}
			first := p + 1 - attended(p, window)
			for _, blk := range sq.Blocks[first/cfg.BlockSize : p/cfg.BlockSize+1] {
				if blk < 0 || int(blk) >= cfg.Blocks {
					return fmt.Errorf("cpu backend: SinkAttention: block %d out of range [0,%d)", blk, cfg.Blocks)
				}
			}
			rowSeq[r] = int32(si)
			ctxSum += attended(p, window)
		}
	}
	// An item (row, head) costs its context times the head size, as in
	// Attention: early decode steps are too little work to share.
	grain := 1
	if perItem := ctxSum * cfg.HeadDim / max(n, 1); perItem > 0 {
		grain = max(1, attentionGrain/perItem)
	}
	c.os, c.qs, c.sk, c.kc, c.vc, c.batch = os, qs, sk, store.k[layer], store.v[layer], batch
	c.heads, c.group, c.qCols, c.kvCols, c.hd, c.bs = heads, heads/cfg.KVHeads, qCols, kvCols, cfg.HeadDim, cfg.BlockSize
	c.scale, c.window = scale, window
	b.parallelFor(n*heads, grain, c.fn)
	c.os, c.qs, c.sk, c.kc, c.vc, c.batch = nil, nil, nil, nil, nil, nil // do not pin the caller's buffers
	return nil
}

// sinkCall is one SinkAttention call's state, pooled so that a steady-state
// call allocates nothing: the row→sequence map and the one closure handed
// to parallelFor, bound to the call (attnScratch's reasons; this file keeps
// its own so as not to widen Backend).
type sinkCall struct {
	rowSeq                              []int32
	os, qs, sk                          []float32
	kc, vc                              []uint16
	batch                               *kernels.Batch
	heads, group, qCols, kvCols, hd, bs int
	scale                               float32
	window                              int
	fn                                  func(lo, hi int)
}

var sinkPool = sync.Pool{New: func() any {
	c := new(sinkCall)
	c.fn = c.run
	return c
}}

// sinkSlots holds a worker's cache slots of the current row's context.
var sinkSlots = sync.Pool{New: func() any { return new([]int32) }}

// run computes the (row, head) items [lo, hi): softmax over the row's
// scores and the head's sink, then the weighted sum of V. A row's slots are
// found once for all its heads (items are row-major), walking the block
// table instead of dividing each position by the block size.
func (c *sinkCall) run(lo, hi int) {
	os, qs, sk, kc, vc, batch, rowSeq := c.os, c.qs, c.sk, c.kc, c.vc, c.batch, c.rowSeq
	heads, group, qCols, kvCols, hd, bs := c.heads, c.group, c.qCols, c.kvCols, c.hd, c.bs
	sp, slp := scorePool.Get().(*[]float32), sinkSlots.Get().(*[]int32)
	defer scorePool.Put(sp)
	defer sinkSlots.Put(slp)
	row := -1
	var slots []int32
	for item := lo; item < hi; item++ {
		r, h := item/heads, item%heads
		if r != row {
			row = r
			blocks := batch.Seqs[rowSeq[r]].Blocks
			pos := int(batch.Positions[r])
			ctx := attended(pos, c.window)
			first := pos + 1 - ctx
			*slp = slices.Grow((*slp)[:0], ctx)
			slots = (*slp)[:ctx]
			b, off := first/bs, first%bs
			for i := range slots {
				slots[i] = blocks[b]*int32(bs) + int32(off)
				if off++; off == bs {
					b, off = b+1, 0
				}
			}
			*sp = slices.Grow((*sp)[:0], ctx)
		}
		scores := (*sp)[:len(slots)]
		qv := qs[r*qCols+h*hd : r*qCols+(h+1)*hd]
		off := (h / group) * hd
		sinkScores(scores, kc, slots, kvCols, off, qv, c.scale)
		mx := sk[h]
		for _, sc := range scores {
			mx = max(mx, sc)
		}
		sum := expF32(scores, scores, mx) + float32(math.Exp(float64(sk[h]-mx)))
		o := os[r*qCols+h*hd : r*qCols+(h+1)*hd]
		clear(o)
		sinkValues(o, vc, slots, kvCols, off, scores, 1/sum)
	}
}

// sinkScoresGeneric sets scores[i] = q·K[slots[i]]·scale, K's row at
// slot·kvCols + off.
func sinkScoresGeneric(scores []float32, kc []uint16, slots []int32, kvCols, off int, q []float32, scale float32) {
	hd := len(q)
	for i, slot := range slots {
		at := int(slot)*kvCols + off
		scores[i] = dotHalfF32(kc[at:at+hd], q) * scale
	}
}

// sinkValuesGeneric adds (e[i]·inv)·V[slots[i]] to o in order.
func sinkValuesGeneric(o []float32, vc []uint16, slots []int32, kvCols, off int, e []float32, inv float32) {
	hd := len(o)
	for i, slot := range slots {
		at := int(slot)*kvCols + off
		axpyHalf(o, e[i]*inv, vc[at:at+hd])
	}
}

// OAIMoEFFN: for each of the first n rows of x, its top k experts by router
// logit, weighted by a softmax over those k logits, each computing
//
//	g = gate_e·x + gateB_e, u = up_e·x + upB_e
//	a = min(g, limit)·σ(alpha·min(g, limit))·(clamp(u, −limit, limit) + 1)
//	y = down_e·a + downB_e
//
// summed by weight into dst.
func (b *Backend) OAIMoEFFN(dst, x, logits, gate, up, down, gateB, upB, downB kernels.Tensor, n, k int, alpha, limit float32) error {
	d, dt, err := f32Of(dst, "OAIMoEFFN dst")
	if err != nil {
		return err
	}
	xs, xt, err := f32Of(x, "OAIMoEFFN x")
	if err != nil {
		return err
	}
	ls, lt, err := f32Of(logits, "OAIMoEFFN logits")
	if err != nil {
		return err
	}
	var ts [3]*tensor
	for i, t := range []kernels.Tensor{gate, up, down} {
		if ts[i], err = asCPU(t); err != nil {
			return err
		}
	}
	gt, ut, wd := ts[0], ts[1], ts[2]
	gb, gbt, err := f32Of(gateB, "OAIMoEFFN gate bias")
	if err != nil {
		return err
	}
	ub, _, err := f32Of(upB, "OAIMoEFFN up bias")
	if err != nil {
		return err
	}
	db, dbt, err := f32Of(downB, "OAIMoEFFN down bias")
	if err != nil {
		return err
	}
	hidden, experts := xt.cols(), lt.cols()
	if len(gt.shape) != 3 || len(ut.shape) != 3 || len(wd.shape) != 3 {
		return fmt.Errorf("cpu backend: OAIMoEFFN: expert tensors %v %v %v are not [experts, rows, cols]", gt.shape, ut.shape, wd.shape)
	}
	ffn := gt.shape[1]
	switch {
	case gt.shape[0] != experts || gt.shape[2] != hidden || !slices.Equal(gt.shape, ut.shape),
		wd.shape[0] != experts || wd.shape[1] != hidden || wd.shape[2] != ffn,
		len(gb) != experts*ffn || len(ub) != experts*ffn || len(db) != experts*hidden,
		dt.cols() != hidden || n*hidden > len(xs) || n*hidden > len(d) || n*experts > len(ls),
		k <= 0 || k > experts:
		return fmt.Errorf("cpu backend: OAIMoEFFN: x %v logits %v gate %v down %v biases %v %v dst %v, %d rows, top %d",
			xt.shape, lt.shape, gt.shape, wd.shape, gbt.shape, dbt.shape, dt.shape, n, k)
	}
	s := &b.moe
	s.route(ls, n, experts, k, true)
	if kg, ku, kd, ok := moeKernels(gt, ut, wd); ok {
		// Quantized experts (MXFP4 in gpt-oss files) take the grouped path:
		// x quantized once, gate and up in one pass, every expert's tiles in
		// one parallelFor, where the loop below runs three matMuls an expert.
		s.alpha, s.limit = alpha, limit
		if s.oaiAct == nil {
			s.oaiAct = func(h, _, u []float32) { oaiSwiGLU(h, u, s.alpha, s.limit) }
		}
		b.moeGrouped(d, xs, n, gt, ut, wd, kg, ku, kd, s.oaiAct, &moeBiases{gate: gb, up: ub, down: db})
		return nil
	}
	b.oaiMoEEach(d, xs, n, gt, ut, wd, gb, ub, db, alpha, limit)
	return nil
}

// oaiMoEEach is OAIMoEFFN's mixture over the rows routed in b.moe, three
// matMuls per expert with its rows gathered: the float experts' path, and
// the reference the grouped path must match bit for bit (TestOAIMoEFFNGrouped).
func (b *Backend) oaiMoEEach(d, xs []float32, n int, gt, ut, wd *tensor, gb, ub, db []float32, alpha, limit float32) {
	s := &b.moe
	experts, ffn, hidden := gt.shape[0], gt.shape[1], gt.shape[2]
	clear(d[:n*hidden])
	for e := range experts {
		m := len(s.rows[e])
		if m == 0 {
			continue
		}
		s.x, s.g, s.u, s.o = grow(s.x, m*hidden), grow(s.g, m*ffn), grow(s.u, m*ffn), grow(s.o, m*hidden)
		for i, r := range s.rows[e] {
			copy(s.x[i*hidden:(i+1)*hidden], xs[int(r)*hidden:(int(r)+1)*hidden])
		}
		matMul(&b.workers, s.g, s.x, m, hidden, expertView(gt, e), ffn, gb[e*ffn:(e+1)*ffn])
		matMul(&b.workers, s.u, s.x, m, hidden, expertView(ut, e), ffn, ub[e*ffn:(e+1)*ffn])
		oaiSwiGLU(s.g[:m*ffn], s.u[:m*ffn], alpha, limit)
		matMul(&b.workers, s.o, s.g, m, ffn, expertView(wd, e), hidden, db[e*hidden:(e+1)*hidden])
		for i, r := range s.rows[e] {
			axpy(d[int(r)*hidden:(int(r)+1)*hidden], s.weights[e][i], s.o[i*hidden:(i+1)*hidden])
		}
	}
}

// oaiSwiGLU is ggml's swiglu_oai in place over g: x = min(g, limit),
// y = clamp(u, −limit, limit), g = x/(1 + e^(−alpha·x))·(y + 1). The
// exponentials go through expF32 (SIMD, within 3 ulp, as SwiGLU's do) a
// stack chunk at a time, between two SIMD loops (oaiSwiGLUPre, Post) with
// the generic loops' bits; one by one through math.Exp they were a fifth of
// a tiny gpt-oss's decode step.
func oaiSwiGLU(g, u []float32, alpha, limit float32) {
	var t [256]float32
	for len(g) > 0 {
		c := min(len(g), len(t))
		tc := t[:c]
		oaiSwiGLUPre(tc, g[:c], alpha, limit)
		expF32(tc, tc, 0)
		oaiSwiGLUPost(g[:c], u[:c], tc, limit)
		g, u = g[c:], u[c:]
	}
}

// oaiSwiGLUPreGeneric sets t[i] = alpha·−min(g[i], limit).
func oaiSwiGLUPreGeneric(t, g []float32, alpha, limit float32) {
	t = t[:len(g)]
	for i, gv := range g {
		t[i] = alpha * -min(gv, limit)
	}
}

// oaiSwiGLUPostGeneric sets g[i] = min(g[i], limit)/(1 + t[i])·(y + 1),
// y = clamp(u[i], −limit, limit).
func oaiSwiGLUPostGeneric(g, u, t []float32, limit float32) {
	u, t = u[:len(g)], t[:len(g)]
	for i, gv := range g {
		x := min(gv, limit)
		y := min(max(u[i], -limit), limit)
		g[i] = x / (1 + t[i]) * (y + 1)
	}
}
