package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// Llama is the Llama-family decoder (Llama 2/3, Mistral, TinyLlama, SmolLM2,
// Qwen2): pre-norm blocks of GQA attention with RoPE and a SwiGLU feed-forward,
// written once against kernels.Backend. Architectures that change the block
// (Gemma 3, gemma3.go) keep its loader, scratch and head and swap the layers.
type Llama struct {
	cfg  Config
	be   kernels.Backend
	opts Options

	tokEmbd, outNorm, output kernels.Tensor
	invFreq                  kernels.Tensor // [headDim/2] RoPE frequencies, scaling applied
	layers                   []llamaLayer
	kv                       kernels.KVStore
	win                      *windowKV               // set with Options.WindowKV (gemma3_window.go)
	gemma                    *gemma3Extras           // nil unless cfg.Arch is gemma2, gemma3 or gemma4
	gemma4                   *gemma4Extras           // nil unless cfg.Arch is gemma4
	gptoss                   *gptossExtras           // nil unless cfg.Arch is gpt-oss
	promptRows               []bool                  // promptFlags' buffer
	headNorm                 kernels.HeadNormOps     // set when cfg.QKNorm (Qwen3)
	moe                      kernels.MoEOps          // set when cfg.Experts > 0
	shared                   kernels.SharedExpertOps // set when cfg.SharedExpertFFN > 0 (qwen2moe.go)
	window                   kernels.GemmaOps        // set when a model other than Gemma has a window (Phi-3)

	// Scratch, allocated once at load for opts.MaxBatchTokens rows so that a
	// step allocates nothing.
	x      kernels.Tensor // [rows, hidden]   residual stream
	h      kernels.Tensor // [rows, hidden]   normed input of a sub-block
	q      kernels.Tensor // [rows, heads*hd]
	k, v   kernels.Tensor // [rows, kvHeads*hd]
	att    kernels.Tensor // [rows, heads*hd] attention output before the projection
	o      kernels.Tensor // [rows, hidden]   sub-block output added to x
	router kernels.Tensor // [rows, experts]  router logits; nil without experts
	shGate kernels.Tensor // [rows, 1]        shared expert's gate logit; nil without one
	gate   kernels.Tensor // [rows, ffn]      (SharedExpertFFN wide with a shared expert)
	up     kernels.Tensor // [rows, ffn]
	sel    kernels.Tensor // [seqs, hidden]   rows whose logits are wanted
	logits kernels.Tensor // [seqs, vocab]
	host   []float32      // [seqs*vocab]     logits read back

	// The outputs of the projections that share an input, in the order of
	// a layer's qkv and gateUp (kernels.MatMuls).
	qkvOut, gateUpOut []kernels.Tensor
	// rowHost is RowLogits' read-back (rowlogits.go), nil until used.
	rowHost []float32
}

type llamaLayer struct {
	attnNorm, ffnNorm kernels.Tensor // [hidden] F32
	wq, wk, wv, wo    kernels.Tensor // [heads*hd, hidden], [kvHeads*hd, hidden] ×2, [hidden, heads*hd]
	bq, bk, bv        kernels.Tensor // nil unless cfg.QKVBias
	wGate, wUp, wDown kernels.Tensor // [ffn, hidden] ×2, [hidden, ffn]; with experts [experts, …] of those
	wRouter           kernels.Tensor // [experts, hidden]; nil without experts
	shared            sharedExpert   // Qwen2-MoE only (qwen2moe.go)

	qNorm, kNorm              kernels.Tensor // [headDim] F32; Qwen3, Gemma 3
	postAttnNorm, postFFNNorm kernels.Tensor // [hidden] F32; Gemma 3 only

	// The projections that read one input, run as one kernels.MatMuls:
	// [wq wk wv] with their biases (nil without any), and [wGate wUp].
	qkv, qkvBias, gateUp []kernels.Tensor
}

func (m *Llama) Config() Config   { return m.cfg }
func (m *Llama) VocabSize() int   { return m.cfg.Vocab }
func (m *Llama) ContextLen() int  { return m.cfg.ContextLen }
func (m *Llama) Options() Options { return m.opts }

// ForwardDevice runs one step: every row of b through every layer, K/V
// written into the paged cache at b.Slots, and the logits of b.LogitRows
// left in the backend's [MaxSeqs, vocab] tensor (their rows in LogitRows
// order), valid until the next call. Forward reads them back.
func (m *Llama) ForwardDevice(b *kernels.Batch) (kernels.Tensor, error) {
	n, nl := len(b.Tokens), len(b.LogitRows)
	if n == 0 || n > m.opts.MaxBatchTokens || len(b.Positions) != n || len(b.Slots) != n {
		return nil, fmt.Errorf("%s: batch of %d tokens (%d positions, %d slots), limit %d", m.cfg.Arch, n, len(b.Positions), len(b.Slots), m.opts.MaxBatchTokens)
	}
	if nl > m.opts.MaxSeqs {
		return nil, fmt.Errorf("%s: %d logit rows, limit %d", m.cfg.Arch, nl, m.opts.MaxSeqs)
	}
	for _, t := range b.Tokens {
		if t < 0 || int(t) >= m.cfg.Vocab {
			return nil, fmt.Errorf("%s: token id %d outside the vocabulary of %d", m.cfg.Arch, t, m.cfg.Vocab)
		}
	}
	c, be := &m.cfg, m.be
	promptRows, _ := be.(kernels.PromptRows)
	if promptRows != nil {
		promptRows.SetPromptRows(m.promptFlags(b))
		defer promptRows.SetPromptRows(nil)
	}
	err := be.GetRows(m.x, m.tokEmbd, b.Tokens)
	if err == nil {
		if m.gptoss != nil {
			err = m.gptossLayers(b, n)
		} else if m.gemma4 != nil {
			err = m.gemma4Layers(b, n)
		} else if m.gemma != nil {
			err = m.gemma3Layers(b, n)
		} else {
			err = m.llamaLayers(b, n)
		}
	}
	if promptRows != nil {
		promptRows.SetPromptRows(nil) // the logits: the row kernels for every row
	}
	if err == nil && nl > 0 {
		err = firstErr(
			be.GetRows(m.sel, m.x, b.LogitRows),
			be.RMSNorm(m.sel, m.sel, m.outNorm, nl, c.RMSEps),
			be.MatMul(m.logits, m.sel, m.output, nil, nl),
			m.finalSoftcap(nl),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("%s forward: %w", c.Arch, err)
	}
	return m.logits, nil
}

// promptFlags marks the rows of b that are prompt tokens (kernels.PromptRows).
func (m *Llama) promptFlags(b *kernels.Batch) []bool {
	f := m.promptRows[:0]
	for _, s := range b.Seqs {
		for r := s.Start; r < s.End; r++ {
			f = append(f, int(b.Positions[r]) < s.Prompt)
		}
	}
	m.promptRows = f
	return f
}

// llamaLayers runs the n rows of b through every layer, m.x in and out.
func (m *Llama) llamaLayers(b *kernels.Batch, n int) error {
	c, be := &m.cfg, m.be
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.QueryScale != 0 {
		scale = c.QueryScale
	}
	err := m.prepareWindow(b)
	for i := range m.layers {
		if err != nil {
			break
		}
		l := &m.layers[i]
		err = firstErr(
			// attention
			be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps),
			kernels.MatMuls(be, m.qkvOut, m.h, l.qkv, l.qkvBias, n),
			m.qkNorm(l, n),
			m.rope(i, b, n),
			m.attention(i, b, scale),
			be.MatMul(m.o, m.att, l.wo, nil, n),
			be.Add(m.x, m.o, n),
			// feed-forward
			be.RMSNorm(m.h, m.x, l.ffnNorm, n, c.RMSEps),
			m.ffn(l, n),
			be.Add(m.x, m.o, n),
		)
	}
	return err
}

// rope rotates m.q and m.k of layer i, or leaves them on a NoPE layer
// (SmolLM3's).
func (m *Llama) rope(i int, b *kernels.Batch, n int) error {
	c := &m.cfg
	if c.IsNoRopeLayer(i) {
		return nil
	}
	pos := b.Positions[:n]
	return firstErr(
		m.be.RoPE(m.q, m.invFreq, pos, c.Heads, c.RopeStyle),
		m.be.RoPE(m.k, m.invFreq, pos, c.KVHeads, c.RopeStyle),
	)
}

// ffn computes the feed-forward of m.h into m.o: SwiGLU, or the mixture of
// experts the router picks for each row.
func (m *Llama) ffn(l *llamaLayer, n int) error {
	be, c := m.be, &m.cfg
	if m.moe != nil {
		return firstErr(
			be.MatMul(m.router, m.h, l.wRouter, nil, n),
			m.moe.MoEFFN(m.o, m.h, m.router, l.wGate, l.wUp, l.wDown, n, c.ExpertsUsed, c.ExpertNorm),
			m.sharedExpert(l, n),
		)
	}
	return firstErr(
		kernels.MatMuls(be, m.gateUpOut, m.h, l.gateUp, nil, n),
		be.SwiGLU(m.gate, m.gate, m.up, n),
		be.MatMul(m.o, m.gate, l.wDown, nil, n),
	)
}

// qkNorm applies Qwen3's per-head norms (or OLMoE's whole-row ones) to m.q
// and m.k; a no-op for models without them.
func (m *Llama) qkNorm(l *llamaLayer, n int) error {
	if m.cfg.QKNormWhole {
		return m.wholeQKNorm(l, n)
	}
	if m.headNorm == nil {
		return nil
	}
	return firstErr(
		m.headNorm.HeadRMSNorm(m.q, l.qNorm, n, m.cfg.Heads, m.cfg.RMSEps),
		m.headNorm.HeadRMSNorm(m.k, l.kNorm, n, m.cfg.KVHeads, m.cfg.RMSEps),
	)
}

// firstErr keeps the forward pass readable as a list of kernel calls: they are
// evaluated in order, and the first failure is the one reported. Kernels after
// a failure still run, on scratch whose contents no longer matter.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// ropeFrequencies returns RoPE's per-pair angular frequencies θ_i = base^(−2i/d),
// with Llama 3's frequency-dependent scaling when the model asks for it.
func ropeFrequencies(c Config) []float32 {
	if s := c.RopeScaling; s != nil && s.YaRN {
		return yarnFrequencies(c)
	}
	half := c.HeadDim / 2
	f := make([]float32, half)
	for i := range half {
		freq := math.Pow(float64(c.RopeTheta), -2*float64(i)/float64(c.HeadDim))
		if s := c.RopeScaling; s != nil && s.Factor > 0 {
			if s.Linear {
				freq /= float64(s.Factor)
			} else {
				freq = llama3Scale(freq, s)
			}
		}
		f[i] = float32(freq)
	}
	return f
}

// llama3Scale leaves high frequencies alone, divides low ones by the factor and
// interpolates between, as in Meta's reference implementation.
func llama3Scale(freq float64, s *RopeScaling) float64 {
	orig := float64(s.OriginalContext)
	lowWavelen := orig / float64(s.LowFreqFactor)
	highWavelen := orig / float64(s.HighFreqFactor)
	wavelen := 2 * math.Pi / freq
	switch {
	case wavelen < highWavelen:
		return freq
	case wavelen > lowWavelen:
		return freq / float64(s.Factor)
	default:
		smooth := (orig/wavelen - float64(s.LowFreqFactor)) / float64(s.HighFreqFactor-s.LowFreqFactor)
		return (1-smooth)*freq/float64(s.Factor) + smooth*freq
	}
}
