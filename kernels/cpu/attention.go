package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluicehq/sluice/kernels"
)

var scorePool = sync.Pool{New: func() any { return new([]float32) }}

// attentionGrain is the least work (context positions × head size) worth
// handing a helper thread: about 10 µs of Attention's loops at 0.7 ns a
// unit (BenchmarkAttentionDecode) when it was set. A decode row of SmolLM2
// at context 16 (9 heads, 7 µs) was slower split over two threads than
// inline. The run kernels (attnrun.go) take about 0.1 ns a unit, so this is
// now nearer 1.6 µs; not re-tuned, as t=2 against t=1 at contexts 16 and 64
// came out either way on the loaded machine they were measured on.
const attentionGrain = 16384

// attnScratch is Attention's state, kept on the backend so a steady-state
// call allocates nothing, as matScratch is for matMul: the row→sequence map
// and the one closure handed to parallelFor (a fresh closure per call, per
// layer per step, would escape to the heap).
type attnScratch struct {
	rowSeq []int32 // sequence of each row

	// The current call, read by run.
	os, qs                      []float32
	kc, vc                      []uint16
	batch                       *kernels.Batch
	heads, group, qCols, kvCols int
	hd, bs                      int
	scale                       float32
	window                      int     // > 0: a row reads only its last window positions
	softcap                     float32 // > 0: each score s becomes softcap·tanh(s/softcap) (Gemma 2)
	fn                          func(lo, hi int)
}

func (b *Backend) Attention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32) error {
	return b.attention(out, q, k, v, kv, layer, batch, scale, 0, 0)
}

// SlidingAttention is kernels.GemmaOps's windowed attention: the same pass
// over the block table, starting window positions back instead of at 0.
func (b *Backend) SlidingAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int) error {
	return b.attention(out, q, k, v, kv, layer, batch, scale, max(window, 0), 0)
}

// CappedAttention is kernels.SoftCapOps's: the scores capped in the same pass.
func (b *Backend) CappedAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, cap float32) error {
	return b.attention(out, q, k, v, kv, layer, batch, scale, max(window, 0), max(cap, 0))
}

// QueryAttention is kernels.QueryAttentionOps's: SlidingAttention over the
// store as another pass left it, writing nothing.
func (b *Backend) QueryAttention(out, q kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int) error {
	return b.attention(out, q, nil, nil, kv, layer, batch, scale, max(window, 0), 0)
}

func (b *Backend) attention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, batch *kernels.Batch, scale float32, window int, softcap float32) error {
	os, ot, err := f32Of(out, "Attention out")
	if err != nil {
		return err
	}
	qs, qt, err := f32Of(q, "Attention q")
	if err != nil {
		return err
	}
	// k and v nil: QueryAttention, which reads the store as it is.
	var ks, vs []float32
	var kt *tensor
	if k != nil || v != nil {
		if ks, kt, err = f32Of(k, "Attention k"); err != nil {
			return err
		}
		if vs, _, err = f32Of(v, "Attention v"); err != nil {
			return err
		}
	}
	store, ok := kv.(*kvStore)
	if !ok {
		return fmt.Errorf("cpu backend: KV store %T was not made by this backend", kv)
	}
	cfg := store.cfg
	if layer < 0 || layer >= cfg.Layers {
		return fmt.Errorf("cpu backend: Attention: layer %d of %d", layer, cfg.Layers)
	}
	kvCols := cfg.KVHeads * cfg.HeadDim
	qCols := qt.cols()
	n := len(batch.Tokens)
	if kt != nil && (kt.cols() != kvCols || n*kvCols > len(ks)) || qCols%cfg.HeadDim != 0 || ot.cols() != qCols || n*qCols > len(qs) || n*qCols > len(os) {
		var kShape []int
		if kt != nil {
			kShape = kt.shape
		}
		return fmt.Errorf("cpu backend: Attention: q %v k %v out %v do not fit KV %+v with %d rows", qt.shape, kShape, ot.shape, cfg, n)
	}
	heads := qCols / cfg.HeadDim
	if heads%cfg.KVHeads != 0 {
		return fmt.Errorf("cpu backend: Attention: %d query heads over %d KV heads", heads, cfg.KVHeads)
	}
	slots := cfg.Blocks * cfg.BlockSize
	kc, vc := store.k[layer], store.v[layer]
	if ks != nil {
		for r, s := range batch.Slots[:n] {
			if s < 0 || int(s) >= slots {
				return fmt.Errorf("cpu backend: Attention: slot %d out of range [0,%d)", s, slots)
			}
			toHalf(kc[int(s)*kvCols:(int(s)+1)*kvCols], ks[r*kvCols:(r+1)*kvCols])
			toHalf(vc[int(s)*kvCols:(int(s)+1)*kvCols], vs[r*kvCols:(r+1)*kvCols])
		}
	}
	a := &b.attn
	if cap(a.rowSeq) < n {
		a.rowSeq = make([]int32, n)
	}
	rowSeq := a.rowSeq[:n] // sequence of each row
	ctxSum := 0            // positions attended to, over all rows
	for si, sq := range batch.Seqs {
		if sq.Start < 0 || sq.End > n || sq.Start > sq.End {
			return fmt.Errorf("cpu backend: Attention: sequence %d rows [%d,%d) outside the batch", si, sq.Start, sq.End)
		}
		if need := (sq.ContextLen + cfg.BlockSize - 1) / cfg.BlockSize; need > len(sq.Blocks) {
			return fmt.Errorf("cpu backend: Attention: sequence %d has %d blocks for %d tokens", si, len(sq.Blocks), sq.ContextLen)
		}
		lo := 0 // a window row never reads below its window, where a window table holds −1
		if window > 0 && sq.End > sq.Start {
			lo = min(max(int(batch.Positions[sq.Start])-window+1, 0)/cfg.BlockSize, len(sq.Blocks))
		}
		for _, blk := range sq.Blocks[lo:] {
			if blk < 0 || int(blk) >= cfg.Blocks {
				return fmt.Errorf("cpu backend: Attention: block %d out of range [0,%d)", blk, cfg.Blocks)
			}
		}
		for r := sq.Start; r < sq.End; r++ {
			if p := batch.Positions[r]; p < 0 || int(p) >= sq.ContextLen {
				return fmt.Errorf("cpu backend: Attention: row %d at position %d outside its context of %d", r, p, sq.ContextLen)
			}
			rowSeq[r] = int32(si)
			ctxSum += attended(int(batch.Positions[r]), window)
		}
	}
	group := heads / cfg.KVHeads
	hd, bs := cfg.HeadDim, cfg.BlockSize
	// An item (row, head) costs about its context times the head size, in
	// a dot product and an axpy on F16; early decode steps of one sequence
	// are too little work to share.
	grain := 1
	if perItem := ctxSum * hd / max(n, 1); perItem > 0 {
		grain = max(1, attentionGrain/perItem)
	}
	if a.fn == nil {
		a.fn = a.run
	}
	a.os, a.qs, a.kc, a.vc, a.batch = os, qs, kc, vc, batch
	a.heads, a.group, a.qCols, a.kvCols, a.hd, a.bs, a.scale = heads, group, qCols, kvCols, hd, bs, scale
	a.window, a.softcap = window, softcap
	b.parallelFor(n*heads, grain, a.fn)
	a.os, a.qs, a.kc, a.vc, a.batch = nil, nil, nil, nil, nil // do not pin the caller's buffers
	return nil
}

// run computes the (row, head) items [lo, hi) of the current call.
func (a *attnScratch) run(lo, hi int) {
	os, qs, kc, vc, batch, rowSeq := a.os, a.qs, a.kc, a.vc, a.batch, a.rowSeq
	heads, group, qCols, kvCols, hd, bs, scale := a.heads, a.group, a.qCols, a.kvCols, a.hd, a.bs, a.scale
	sp := scorePool.Get().(*[]float32)
	defer scorePool.Put(sp)
	for item := lo; item < hi; item++ {
		r, h := item/heads, item%heads
		sq := &batch.Seqs[rowSeq[r]]
		pos := int(batch.Positions[r])
		ctx := attended(pos, a.window) // causal: this row sees positions [first, pos]
		first := pos + 1 - ctx
		if cap(*sp) < ctx {
			*sp = make([]float32, ctx)
		}
		scores := (*sp)[:ctx]
		qv := qs[r*qCols+h*hd : r*qCols+(h+1)*hd]
		kvOff := (h / group) * hd
		attnScores(scores, kc, sq.Blocks, first, bs, kvCols, kvOff, qv, scale)
		if c := a.softcap; c > 0 {
			for i, s := range scores {
				scores[i] = c * float32(math.Tanh(float64(s/c)))
			}
		}
		sum := expF32(scores, scores, maxF32(scores))
		o := os[r*qCols+h*hd : r*qCols+(h+1)*hd]
		clear(o)
		attnValues(o, vc, sq.Blocks, first, bs, kvCols, kvOff, scores, 1/sum)
	}
}

// maxF32 is max(x...) as Go's max takes it (NaN if any is, +0 over −0),
// which does not depend on the order, so four independent chains give the
// same value as one: the one chain's max latency bounded the loop at about
// a fifth of Attention's time.
func maxF32(x []float32) float32 {
	m0 := float32(math.Inf(-1))
	m1, m2, m3 := m0, m0, m0
	i := 0
	for ; i+4 <= len(x); i += 4 {
		m0, m1, m2, m3 = max(m0, x[i]), max(m1, x[i+1]), max(m2, x[i+2]), max(m3, x[i+3])
	}
	for ; i < len(x); i++ {
		m0 = max(m0, x[i])
	}
	return max(max(m0, m1), max(m2, m3))
}

// attended is how many positions a row at pos reads: all of [0, pos], or the
// last window of them.
func attended(pos, window int) int {
	if window > 0 && pos+1 > window {
		return window
	}
	return pos + 1
}
