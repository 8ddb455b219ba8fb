package models

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// Qwen35 is the hybrid decoder of Qwen3.5 and Qwen3.6 (GGUF archs qwen35
// and qwen35moe), as llama.cpp v0.5.0's src/models/qwen35.cpp and
// qwen35moe.cpp define it: most layers are Gated
// DeltaNet linear attention, every full_attention_interval-th a gated
// full-attention layer. Every layer is
//
//	x += mixer(rmsnorm(x))          mixer: DeltaNet or attention
//	x += swiglu(rmsnorm(x))         (post_attention_norm; qwen35moe: the top-k
//	                                 mixture, renormalised, + sigmoid-gated shared expert)
//
// The attention layers (qwen35Attention) project Q together with an output
// gate per head, QK-norm, rotate the first rope.dimension_count elements of
// each head (NeoX pairs; for text the M-RoPE sections all see one position),
// attend over the paged KV and multiply by sigmoid(gate). The DeltaNet
// layers (qwen35DeltaNet) keep a recurrent state per sequence in the
// backend's StateStore, a slot of which the engine's pool gives each
// running sequence (kernels.SeqRows.State).
type Qwen35 struct {
	cfg    Qwen35Config
	be     kernels.Backend
	dn     kernels.DeltaNetOps
	hn     kernels.HeadNormOps
	moe    kernels.MoEOps          // qwen35moe
	shared kernels.SharedExpertOps // qwen35moe
	opts   Options

	tokEmbd, outNorm, output kernels.Tensor
	invFreq                  kernels.Tensor // [RopeDims/2]
	layers                   []qwen35Layer
	kv                       kernels.KVStore    // the attention layers' KV, by attention ordinal
	states                   kernels.StateStore // the DeltaNet layers' state, by recurrent ordinal

	// Scratch for opts.MaxBatchTokens rows, allocated once at load.
	x, h, o     kernels.Tensor // [rows, hidden]
	q, qGate    kernels.Tensor // [rows, heads*hd]
	att         kernels.Tensor // [rows, heads*hd]
	k, v        kernels.Tensor // [rows, kvHeads*hd]
	qkv         kernels.Tensor // [rows, channels]  q|k|v before the convolution
	z, dnOut    kernels.Tensor // [rows, vHeads*S]
	beta, alpha kernels.Tensor // [rows, vHeads]
	gate, up    kernels.Tensor // [rows, ffn] (the shared expert's width with experts)
	router      kernels.Tensor // [rows, experts]; qwen35moe
	shGate      kernels.Tensor // [rows, 1] the shared expert's gate logit; qwen35moe
	sel, logits kernels.Tensor // [seqs, hidden], [seqs, vocab]
	host        []float32
	rowHost     []float32 // RowLogits' read-back (rowlogits.go), nil until used
	promptRows  []bool

	// The MTP head's weights (qwen35_mtp.go), nil until NewMTP loads them;
	// from then on (hiddenOut) every forward also writes the batch's
	// final-normed rows to hid for it.
	mtp       *qwen35MTP
	hiddenOut bool
	hid       kernels.Tensor // [MaxBatchTokens+1, hidden], the last row zero
	hidZero   int32
}

// Qwen35Config is the hybrid model's shape from its GGUF metadata.
type Qwen35Config struct {
	Arch                       string // "qwen35"
	Layers, Hidden, FFN, Vocab int
	Heads, KVHeads, HeadDim    int // the full-attention layers
	RopeDims                   int // elements of each head that rotate
	ContextLen                 int
	RMSEps, RopeTheta          float32
	Recurrent                  []bool // [Layers] true for a DeltaNet layer
	DeltaNet                   kernels.DeltaNetShape
	TiedEmbeddings             bool
	// MTPLayers is nextn_predict_layers: multi-token-prediction blocks
	// after the Layers trunk layers (qwen35_mtp.go).
	MTPLayers int
	// qwen35moe: every layer's feed-forward is a top-ExpertsUsed mixture,
	// renormalised, plus a shared expert behind a sigmoid gate.
	Experts, ExpertsUsed, ExpertFFN, SharedFFN int
	attnLayers, recurrentLayers                int
	fullAttentionInterval, ropeSects           int
}

type qwen35Layer struct {
	recurrent      bool
	ord            int            // index among the layers of its kind (KV store or state store layer)
	attnNorm, post kernels.Tensor // [hidden]

	// full attention (heads of Q rows permuted for the interleaved kernel: qwen35QK)
	wq, wqGate, wk, wv, wo kernels.Tensor
	qNorm, kNorm           kernels.Tensor // [headDim], permuted alike

	// Gated DeltaNet
	wqkv, wz, wBeta, wAlpha, wOut kernels.Tensor
	dn                            kernels.DeltaNetWeights

	wGate, wUp, wDown kernels.Tensor // [ffn, hidden] ×2, [hidden, ffn]; with experts [experts, …] of those

	// qwen35moe
	wRouter                     kernels.Tensor // [experts, hidden]
	shGate, shUp, shDown, shInp kernels.Tensor // the shared expert; shInp [1, hidden] its gate
}

func (m *Qwen35) Config() Qwen35Config { return m.cfg }
func (m *Qwen35) VocabSize() int       { return m.cfg.Vocab }
func (m *Qwen35) ContextLen() int      { return m.cfg.ContextLen }
func (m *Qwen35) Options() Options     { return m.opts }

// StateSlots is the number of recurrent-state slots (stateSlots): the
// engine's pool hands them out to running sequences, checkpoints and cached
// prefix states (the engine's RecurrentModel). A model without DeltaNet
// layers has no state to hand out: 0.
func (m *Qwen35) StateSlots() int {
	if m.cfg.recurrentLayers == 0 {
		return 0
	}
	return m.states.Config().Slots
}

// StateSlotBytes is one slot's memory, every DeltaNet layer.
func (m *Qwen35) StateSlotBytes() int64 { return m.states.Config().SlotBytes() }

// CopyState copies slot src's recurrent state to slot dst (a fork).
func (m *Qwen35) CopyState(dst, src int32) error { return m.dn.CopyState(m.states, dst, src) }

// CanRollBackState reports whether the backend's state store can put a
// speculating sequence's state back to any of its draft rows
// (kernels.StateRollBack), which RollBackState needs: the CPU backend's
// can, the CUDA one's cannot (its engine samples on the device and never
// speculates).
func (m *Qwen35) CanRollBackState() bool {
	_, ok := m.states.(kernels.StateRollBack)
	return ok
}

// RollBackState puts slot's state back to the one after kept of the
// drafts its sequence carried in the latest step, every DeltaNet layer.
func (m *Qwen35) RollBackState(slot int32, kept int) error {
	r, ok := m.states.(kernels.StateRollBack)
	if !ok {
		return fmt.Errorf("%s: the backend's state store cannot roll back", m.cfg.Arch)
	}
	return r.RollBack(slot, kept)
}

// Forward runs one step and reads the logits of b.LogitRows back.
func (m *Qwen35) Forward(b *kernels.Batch) ([]float32, error) {
	logits, err := m.ForwardDevice(b)
	if err != nil {
		return nil, err
	}
	n := len(b.LogitRows) * m.cfg.Vocab
	if n > 0 {
		if err := m.be.Read(logits, m.host[:n]); err != nil {
			return nil, fmt.Errorf("%s forward: %w", m.cfg.Arch, err)
		}
	}
	return m.host[:n], nil
}

// DeviceSampler is the backend's sampler, nil when logits come to the host.
func (m *Qwen35) DeviceSampler() kernels.DeviceSampler { return kernels.SamplerOf(m.be) }

// ForwardDevice runs every row of b through every layer and leaves the
// logits of b.LogitRows in the backend's [MaxSeqs, vocab] tensor.
func (m *Qwen35) ForwardDevice(b *kernels.Batch) (kernels.Tensor, error) {
	n, nl := len(b.Tokens), len(b.LogitRows)
	if n == 0 || n > m.opts.MaxBatchTokens || len(b.Positions) != n || len(b.Slots) != n || nl > m.opts.MaxSeqs {
		return nil, fmt.Errorf("%s: batch of %d tokens (%d positions, %d slots, %d logit rows), limits %d and %d",
			m.cfg.Arch, n, len(b.Positions), len(b.Slots), nl, m.opts.MaxBatchTokens, m.opts.MaxSeqs)
	}
	for _, t := range b.Tokens {
		if t < 0 || int(t) >= m.cfg.Vocab {
			return nil, fmt.Errorf("%s: token id %d outside the vocabulary of %d", m.cfg.Arch, t, m.cfg.Vocab)
		}
	}
	slots := int32(m.states.Config().Slots)
	for _, s := range b.Seqs {
		if m.cfg.recurrentLayers > 0 && (s.State < 0 || s.State >= slots) {
			return nil, fmt.Errorf("%s: recurrent state slot %d of %d", m.cfg.Arch, s.State, slots)
		}
	}
	c, be := &m.cfg, m.be
	promptRows, _ := be.(kernels.PromptRows)
	if promptRows != nil {
		promptRows.SetPromptRows(m.promptFlags(b))
		defer promptRows.SetPromptRows(nil)
	}
	err := be.GetRows(m.x, m.tokEmbd, b.Tokens)
	for i := range m.layers {
		if err != nil {
			break
		}
		l := &m.layers[i]
		err = be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps)
		if err == nil && l.recurrent {
			err = m.deltaNet(l, b, n)
		} else if err == nil {
			err = m.attention(l, b, n)
		}
		if err == nil {
			err = firstErr(
				be.Add(m.x, m.o, n),
				be.RMSNorm(m.h, m.x, l.post, n, c.RMSEps),
				m.ffn(l, n),
				be.Add(m.x, m.o, n),
			)
		}
	}
	if promptRows != nil {
		promptRows.SetPromptRows(nil)
	}
	if err == nil && m.hiddenOut {
		err = m.hiddenRows(n)
	}
	if err == nil && nl > 0 {
		err = firstErr(
			be.GetRows(m.sel, m.x, b.LogitRows),
			be.RMSNorm(m.sel, m.sel, m.outNorm, nl, c.RMSEps),
			be.MatMul(m.logits, m.sel, m.output, nil, nl),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("%s forward: %w", c.Arch, err)
	}
	return m.logits, nil
}

// deltaNet is a Gated DeltaNet layer: m.h in, m.o out.
//
//	qkv [n, (2·Hk+Hv)·S]  z [n, Hv·S]  beta, alpha [n, Hv]  → DeltaNet → [n, Hv·S] → ssm_out
func (m *Qwen35) deltaNet(l *qwen35Layer, b *kernels.Batch, n int) error {
	be := m.be
	return firstErr(
		be.MatMul(m.qkv, m.h, l.wqkv, nil, n),
		be.MatMul(m.z, m.h, l.wz, nil, n),
		be.MatMul(m.beta, m.h, l.wBeta, nil, n),
		be.MatMul(m.alpha, m.h, l.wAlpha, nil, n),
		m.dn.DeltaNet(m.dnOut, m.qkv, m.z, m.beta, m.alpha, l.dn, m.cfg.DeltaNet, m.states, l.ord, b),
		be.MatMul(m.o, m.dnOut, l.wOut, nil, n),
	)
}

// attention is a gated full-attention layer: m.h in, m.o out.
func (m *Qwen35) attention(l *qwen35Layer, b *kernels.Batch, n int) error {
	return m.attentionKV(l, b, n, m.kv)
}

// attentionKV is attention over kv (the MTP head's own, or the trunk's).
func (m *Qwen35) attentionKV(l *qwen35Layer, b *kernels.Batch, n int, kv kernels.KVStore) error {
	c, be := &m.cfg, m.be
	pos := b.Positions[:n]
	return firstErr(
		be.MatMul(m.q, m.h, l.wq, nil, n),
		be.MatMul(m.qGate, m.h, l.wqGate, nil, n),
		be.MatMul(m.k, m.h, l.wk, nil, n),
		be.MatMul(m.v, m.h, l.wv, nil, n),
		m.hn.HeadRMSNorm(m.q, l.qNorm, n, c.Heads, c.RMSEps),
		m.hn.HeadRMSNorm(m.k, l.kNorm, n, c.KVHeads, c.RMSEps),
		be.RoPE(m.q, m.invFreq, pos, c.Heads, kernels.RoPEInterleaved),
		be.RoPE(m.k, m.invFreq, pos, c.KVHeads, kernels.RoPEInterleaved),
		be.Attention(m.att, m.q, m.k, m.v, kv, l.ord, b, 1/sqrt32(float32(c.HeadDim))),
		m.dn.SigmoidMul(m.att, m.qGate, n),
		be.MatMul(m.o, m.att, l.wo, nil, n),
	)
}

// ffn is the feed-forward of m.h into m.o: SwiGLU, or (qwen35moe) the
// routed mixture plus the gated shared expert, whose output goes through
// m.h, read for the last time by its up projection.
func (m *Qwen35) ffn(l *qwen35Layer, n int) error {
	be, c := m.be, &m.cfg
	if m.moe == nil {
		return firstErr(
			be.MatMul(m.gate, m.h, l.wGate, nil, n),
			be.MatMul(m.up, m.h, l.wUp, nil, n),
			be.SwiGLU(m.gate, m.gate, m.up, n),
			be.MatMul(m.o, m.gate, l.wDown, nil, n),
		)
	}
	return firstErr(
		be.MatMul(m.router, m.h, l.wRouter, nil, n),
		m.moe.MoEFFN(m.o, m.h, m.router, l.wGate, l.wUp, l.wDown, n, c.ExpertsUsed, true),
		be.MatMul(m.shGate, m.h, l.shInp, nil, n),
		be.MatMul(m.gate, m.h, l.shGate, nil, n),
		be.MatMul(m.up, m.h, l.shUp, nil, n),
		be.SwiGLU(m.gate, m.gate, m.up, n),
		be.MatMul(m.h, m.gate, l.shDown, nil, n),
		m.shared.GatedAdd(m.o, m.h, m.shGate, n),
	)
}

// promptFlags marks the rows of b that are prompt tokens (kernels.PromptRows).
func (m *Qwen35) promptFlags(b *kernels.Batch) []bool {
	f := m.promptRows[:0]
	for _, s := range b.Seqs {
		for r := s.Start; r < s.End; r++ {
			f = append(f, int(b.Positions[r]) < s.Prompt)
		}
	}
	m.promptRows = f
	return f
}
