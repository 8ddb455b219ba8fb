package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Qwen3.5/3.6's multi-token-prediction head (GGUF nextn_predict_layers = 1:
// block blk.<Layers> beside the trunk; Hugging Face mtp.*), as llama.cpp
// v0.5.0's graph_mtp runs it. Given the trunk's final-normed hidden state
// h(t) at position t and the embedding of token t+1, it predicts token t+2:
//
//	x = eh_proj · [enorm(embed(tok(t+1))) ; hnorm(h(t))]
//	x += attention(attn_norm(x))       a full-attention Qwen3.5 layer at
//	x += ffn(post_attention_norm(x))   position t+1, with a KV of its own
//	h' = shared_head_norm(x)           (output_norm when the file has none)
//	logits = head · h'                 (the trunk's output when none)
//
// and chains on its own h' for the token after. Its KV row at position p
// is the pair (h(p−1), token p); position 0 pairs with a zero h, as
// llama.cpp's first pending row.
//
// The head's weights are loaded only when it is asked for (NewMTP): a
// model served without MTP speculation costs no memory for it. It shares
// the trunk's backend, embedding, output and scratch: the engine runs it
// between the trunk's forwards, never beside one. The trunk hands it h(t)
// on the device: once a head is made, every trunk forward also writes the
// final-normed rows of the whole batch to m.hid, which the head gathers
// rows from by batch index.

// qwen35MTP is the head's weights.
type qwen35MTP struct {
	layer             qwen35Layer    // attention (ord 0 of the head's own KV) and feed-forward
	ehE, ehH          kernels.Tensor // eh_proj's columns that multiply the embedding and the hidden state
	enorm, hnorm      kernels.Tensor
	embed, head, norm kernels.Tensor // own embedding, LM head and head norm, or the trunk's
}

// HasMTP says whether the model's file carries a multi-token-prediction
// head (nextn_predict_layers; NewMTP runs one).
func (m *Qwen35) HasMTP() bool { return m.cfg.MTPLayers > 0 }

// loadMTP loads the head from block blk.<c.Layers>, whose attention and
// feed-forward are a trunk attention layer's (qwen35moe: the mixture).
func (w *weightLoader) loadMTP(m *Qwen35, c Qwen35Config) *qwen35MTP {
	h := &qwen35MTP{}
	p := fmt.Sprintf("blk.%d.", c.Layers)
	l := &h.layer
	l.attnNorm = w.loadF32(p+"attn_norm.weight", c.Hidden)
	l.post = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
	w.qwen35Attention(l, p, c)
	if c.Experts > 0 {
		w.qwen35MoE(l, p, c)
	} else {
		l.wGate = w.load(p+"ffn_gate.weight", c.FFN, c.Hidden)
		l.wUp = w.load(p+"ffn_up.weight", c.FFN, c.Hidden)
		l.wDown = w.load(p+"ffn_down.weight", c.Hidden, c.FFN)
	}
	h.enorm = w.loadF32(p+"nextn.enorm.weight", c.Hidden)
	h.hnorm = w.loadF32(p+"nextn.hnorm.weight", c.Hidden)
	if t, ok := w.get(p+"nextn.eh_proj.weight", c.Hidden, 2*c.Hidden); ok {
		e, hh := w.splitColumns(t, c.Hidden)
		h.ehE, h.ehH = w.upload(e), w.upload(hh)
	}
	h.embed, h.head, h.norm = m.tokEmbd, m.output, m.outNorm
	if w.src.Has(p + "nextn.embed_tokens.weight") {
		h.embed = w.load(p+"nextn.embed_tokens.weight", c.Vocab, c.Hidden)
	}
	if w.src.Has(p + "nextn.shared_head_head.weight") {
		h.head = w.load(p+"nextn.shared_head_head.weight", c.Vocab, c.Hidden)
	}
	if w.src.Has(p + "nextn.shared_head_norm.weight") {
		h.norm = w.loadF32(p+"nextn.shared_head_norm.weight", c.Hidden)
	}
	return h
}

// splitColumns cuts t [rows, 2·half] into its first and last half columns
// (copies). A split inside a quantization block dequantizes to F32 first.
func (w *weightLoader) splitColumns(t kernels.HostTensor, half int) (a, b kernels.HostTensor) {
	rows := t.Shape[0]
	dt, data := t.DType, t.Data
	if half%dt.BlockElems() != 0 {
		vals := make([]float32, rows*2*half)
		if err := quant.Dequantize(dt, data, vals); err != nil {
			w.err = fmt.Errorf("%s: tensor %s: %w", w.src.Path(), t.Name, err)
			return a, b
		}
		dt, data = kernels.F32, f32Host(t.Name, vals).Data
	}
	rb := dt.RowBytes(half)
	da, db := make([]byte, rows*rb), make([]byte, rows*rb)
	for r := range rows {
		copy(da[r*rb:(r+1)*rb], data[2*r*rb:(2*r+1)*rb])
		copy(db[r*rb:(r+1)*rb], data[(2*r+1)*rb:(2*r+2)*rb])
	}
	shape := []int{rows, half}
	return kernels.HostTensor{Name: t.Name + "[embed]", DType: dt, Shape: shape, Data: da},
		kernels.HostTensor{Name: t.Name + "[hidden]", DType: dt, Shape: shape, Data: db}
}

// Qwen35MTP is a Qwen3.5 model's MTP head made ready to run: its KV store
// and the buffers of its inputs and outputs. One per model.
type Qwen35MTP struct {
	m    *Qwen35
	w    *qwen35MTP
	kv   kernels.KVStore
	rows int // most rows a Forward may carry: the trunk's MaxBatchTokens
	// out holds the latest forward's head-normed rows of b.LogitRows (the
	// next forward's chained h when it asks fromHead), prev the ones
	// before: a forward reads one and writes the other.
	out, prev  kernels.Tensor // [MaxSeqs, hidden]
	logits     kernels.Tensor // [MaxSeqs, vocab]
	host       []float32
	idx        []int32
	blocks, bs int
}

// NewMTP loads the model's MTP head from src, the source the model was
// loaded from (kept open while the head is used: the CPU backend reads
// weights in place), readies it with a KV store of blocks blocks of the
// model's block size, and turns on the trunk's hidden-row output (m.hid),
// which every later trunk forward then also computes. One head a model.
func (m *Qwen35) NewMTP(src WeightSource, blocks int) (*Qwen35MTP, error) {
	c, o, be := &m.cfg, m.opts, m.be
	switch {
	case c.MTPLayers > 1:
		return nil, fmt.Errorf("%s: %d MTP (nextn) layers; one is supported (as llama.cpp's qwen35): %w", c.Arch, c.MTPLayers, ErrUnsupported)
	case c.MTPLayers == 0:
		return nil, fmt.Errorf("%s: the model has no MTP (nextn) head: %w", c.Arch, ErrUnsupported)
	case m.mtp != nil:
		return nil, fmt.Errorf("%s: the MTP head is in use already", c.Arch)
	case blocks <= 0:
		return nil, fmt.Errorf("%s: MTP KV of %d blocks", c.Arch, blocks)
	}
	w := weightLoader{src: src, be: be}
	weights := w.loadMTP(m, *c)
	if w.err != nil {
		return nil, fmt.Errorf("%s: MTP head: %w", c.Arch, w.err)
	}
	h := &Qwen35MTP{m: m, w: weights, rows: o.MaxBatchTokens, blocks: blocks, bs: o.BlockSize}
	var err error
	alloc := func(shape ...int) kernels.Tensor {
		if err != nil {
			return nil
		}
		var t kernels.Tensor
		t, err = be.Alloc(shape...)
		return t
	}
	if m.hid == nil {
		// One row past the batch stays zero: the row a negative index reads.
		m.hid = alloc(o.MaxBatchTokens+1, c.Hidden)
		m.hidZero = int32(o.MaxBatchTokens)
	}
	h.out, h.prev = alloc(o.MaxSeqs, c.Hidden), alloc(o.MaxSeqs, c.Hidden)
	h.logits = alloc(o.MaxSeqs, c.Vocab)
	if err != nil {
		return nil, fmt.Errorf("%s: MTP head: %w", c.Arch, err)
	}
	if h.kv, err = be.NewKVStore(kernels.KVConfig{Layers: 1, Blocks: blocks, BlockSize: o.BlockSize,
		KVHeads: c.KVHeads, HeadDim: c.HeadDim}); err != nil {
		return nil, fmt.Errorf("%s: MTP head KV: %w", c.Arch, err)
	}
	h.host = make([]float32, o.MaxSeqs*c.Vocab)
	m.mtp, m.hiddenOut = weights, true
	return h, nil
}

func (h *Qwen35MTP) VocabSize() int  { return h.m.cfg.Vocab }
func (h *Qwen35MTP) ContextLen() int { return h.m.opts.ContextLen }

// MaxRows is the most rows one Forward may carry.
func (h *Qwen35MTP) MaxRows() int { return h.rows }

// MaxLogitRows is the most logit rows one Forward may ask for.
func (h *Qwen35MTP) MaxLogitRows() int { return h.m.opts.MaxSeqs }

// KVBlocks and BlockSize are the head's KV store's geometry.
func (h *Qwen35MTP) KVBlocks() int  { return h.blocks }
func (h *Qwen35MTP) BlockSize() int { return h.bs }

// Forward runs the head over b (slots in the head's own KV store), row i
// pairing token b.Tokens[i] with h row hidden[i], and returns the logits of
// b.LogitRows, [len(b.LogitRows), vocab], valid until the next call. The h
// rows are the trunk's latest forward's, by batch row (a negative index
// reads a zero row: position 0, or an h not kept), or with fromHead the
// head-normed states of the previous Forward's logit rows, by logit row,
// which is how drafts chain.
func (h *Qwen35MTP) Forward(b *kernels.Batch, hidden []int32, fromHead bool) ([]float32, error) {
	m, c, be := h.m, &h.m.cfg, h.m.be
	n, nl := len(b.Tokens), len(b.LogitRows)
	if n == 0 || n > h.rows || len(b.Positions) != n || len(b.Slots) != n || len(hidden) != n || nl > m.opts.MaxSeqs {
		return nil, fmt.Errorf("%s MTP: batch of %d tokens (%d positions, %d slots, %d h rows, %d logit rows), limits %d and %d",
			c.Arch, n, len(b.Positions), len(b.Slots), len(hidden), nl, h.rows, m.opts.MaxSeqs)
	}
	for _, t := range b.Tokens {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("%s MTP: token id %d outside the vocabulary of %d", c.Arch, t, c.Vocab)
		}
	}
	from, limit := m.hid, int32(h.rows)
	if fromHead {
		h.out, h.prev = h.prev, h.out
		from, limit = h.prev, int32(m.opts.MaxSeqs)
	}
	h.idx = h.idx[:0]
	for _, r := range hidden {
		switch {
		case r < 0 && !fromHead:
			r = m.hidZero
		case r < 0 || r >= limit:
			return nil, fmt.Errorf("%s MTP: h row %d of %d", c.Arch, r, limit)
		}
		h.idx = append(h.idx, r)
	}
	w := h.w
	l := &w.layer
	promptRows, _ := be.(kernels.PromptRows)
	if promptRows != nil {
		promptRows.SetPromptRows(m.promptFlags(b))
		defer promptRows.SetPromptRows(nil)
	}
	// m.h the embedding, m.o the h rows: both normed, projected and summed into m.x.
	err := firstErr(
		be.GetRows(m.h, w.embed, b.Tokens),
		be.RMSNorm(m.h, m.h, w.enorm, n, c.RMSEps),
		be.GetRows(m.o, from, h.idx),
		be.RMSNorm(m.o, m.o, w.hnorm, n, c.RMSEps),
		be.MatMul(m.x, m.h, w.ehE, nil, n),
		be.MatMul(m.h, m.o, w.ehH, nil, n),
		be.Add(m.x, m.h, n),
		be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps),
	)
	if err == nil {
		err = firstErr(
			m.attentionKV(l, b, n, h.kv),
			be.Add(m.x, m.o, n),
			be.RMSNorm(m.h, m.x, l.post, n, c.RMSEps),
			m.ffn(l, n),
			be.Add(m.x, m.o, n),
		)
	}
	if promptRows != nil {
		promptRows.SetPromptRows(nil)
	}
	if err == nil && nl > 0 {
		err = firstErr(
			be.GetRows(h.out, m.x, b.LogitRows),
			be.RMSNorm(h.out, h.out, w.norm, nl, c.RMSEps),
			be.MatMul(h.logits, h.out, w.head, nil, nl),
			be.Read(h.logits, h.host[:nl*c.Vocab]),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("%s MTP forward: %w", c.Arch, err)
	}
	return h.host[:nl*c.Vocab], nil
}

// hiddenRows writes the trunk's final-normed rows of the batch to m.hid
// for the MTP head: llama.cpp's t_h_nextn, every row.
func (m *Qwen35) hiddenRows(n int) error {
	return m.be.RMSNorm(m.hid, m.x, m.outNorm, n, m.cfg.RMSEps)
}
