package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// Gemma 3 and Gemma 2 are the Llama block with the changes below, all in
// this file; Gemma 2 differs from Gemma 3 only as configuration:
//
//	Gemma 2: no QK-norm; every other layer a window layer (window 4096
//	unless the file says); one RoPE base for all layers (rope.freq_base_swa
//	when set); attention scores and final logits soft-capped, s → c·tanh(s/c),
//	c = attn_logit_softcapping (50) and final_logit_softcapping (30), the
//	defaults llama.cpp's load_arch_hparams uses when a file omits them.
//
// Gemma 3:
//
//	x = embd[tok] · √hidden
//	per layer:  h = norm(x);  q,k,v = h·Wq, h·Wk, h·Wv
//	            q, k = headnorm(q), headnorm(k)          (QK-norm)
//	            q, k = rope(q), rope(k)                  (window layers: base 10k; global: RopeTheta)
//	            a = attn(q,k,v)  over the last Window positions on window layers
//	            x += postnorm(a·Wo)
//	            x += postnorm(down(gelu_tanh(gate(norm(x))) ⊙ up(norm(x))))
//	logits = norm(x) · embdᵀ
//
// Every norm is Gemma's (1 + w) RMSNorm; GGUF files store 1 + w already
// (convert_hf_to_gguf adds it), so the kernels see a plain RMSNorm weight.
// The layer pattern (every sixth global) and the window-layer RoPE base come
// from the file when it says, else from llama.cpp's defaults for gemma3.

const (
	gemma3WindowPattern  = 6     // layers i with i%6 < 5 are window layers
	gemma3RopeThetaLocal = 10000 // llama.cpp's rope_freq_base_train_swa default
	gemma2WindowPattern  = 2     // even layers are window layers
	gemma2Window         = 4096
	gemma2AttnSoftcap    = 50
	gemma2FinalSoftcap   = 30
)

// isGemma says whether arch runs gemma3Layers.
func isGemma(arch string) bool { return arch == "gemma3" || arch == "gemma2" }

// gemma3 reads the gemma3.* (or gemma2.*) keys beyond the Llama family's.
func (m *metaReader) gemma3(cfg *Config) error {
	cfg.TiedEmbeddings = true // Gemma's head is the embedding; an output.weight would be a copy
	pattern := gemma3WindowPattern
	if cfg.Arch == "gemma2" {
		pattern = gemma2WindowPattern
		cfg.QKNorm = false // Gemma 2 has none; a stray attn_q_norm is not read
		cfg.RopeThetaLocal = m.floatOr("rope.freq_base_swa", cfg.RopeTheta)
		cfg.Window = m.intOr("attention.sliding_window", gemma2Window)
		cfg.AttnSoftcap = m.floatOr("attn_logit_softcapping", gemma2AttnSoftcap)
		cfg.FinalSoftcap = m.floatOr("final_logit_softcapping", gemma2FinalSoftcap)
		if m.err == nil && (!(cfg.AttnSoftcap > 0) || !(cfg.FinalSoftcap > 0)) {
			return fmt.Errorf("gguf %s: gemma2 soft-caps %g (attention) and %g (final) must be positive: %w", m.g.path, cfg.AttnSoftcap, cfg.FinalSoftcap, ErrMalformed)
		}
	} else {
		cfg.RopeThetaLocal = m.floatOr("rope.freq_base_swa", gemma3RopeThetaLocal)
		cfg.Window = m.intOr("attention.sliding_window", 0)
	}
	// Gemma's reference scales queries by query_pre_attn_scalar^-½, which is
	// the head size except in the 27B model (hidden/heads); GGUF does not
	// store it, so it is inferred from the shape as llama.cpp does.
	cfg.QueryScale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	if cfg.Layers == 62 && cfg.Heads > 0 {
		cfg.QueryScale = float32(1 / math.Sqrt(float64(cfg.Hidden/cfg.Heads)))
	}
	if m.err != nil || cfg.Window <= 0 || cfg.Layers <= 0 {
		cfg.Window = 0
		return m.err
	}
	cfg.WindowLayers = make([]bool, cfg.Layers)
	key := m.prefix + "attention.sliding_window_pattern"
	switch v := m.g.meta[key].(type) {
	case nil:
		setWindowPattern(cfg.WindowLayers, pattern)
	case []bool:
		if len(v) != cfg.Layers {
			return fmt.Errorf("gguf %s: %s has %d entries for %d layers: %w", m.g.path, key, len(v), cfg.Layers, ErrMalformed)
		}
		copy(cfg.WindowLayers, v)
	default:
		n, ok := asUint(v)
		if !ok || n > uint64(cfg.Layers) {
			return fmt.Errorf("gguf %s: %s = %v: %w", m.g.path, key, v, ErrMalformed)
		}
		setWindowPattern(cfg.WindowLayers, int(n))
	}
	return nil
}

// setWindowPattern marks all but every n-th layer (the last of each group of
// n) as window layers; n = 0 makes every layer one, as llama.cpp reads it.
func setWindowPattern(w []bool, n int) {
	for i := range w {
		w[i] = n == 0 || i%n < n-1
	}
}

// gemma3Extras are the parts of a Gemma model the Llama struct lacks.
type gemma3Extras struct {
	ops       kernels.GemmaOps
	softcap   kernels.SoftCapOps // Gemma 2 only
	localFreq kernels.Tensor     // [headDim/2] RoPE frequencies of the window layers
}

// loadGemma3 loads what a Gemma layer adds to the Llama tensors.
func (m *Llama) loadGemma3(w *weightLoader) error {
	c := m.cfg
	ops, ok := m.be.(kernels.GemmaOps)
	if !ok {
		return fmt.Errorf("%s: the %s backend lacks the Gemma kernels (GeGLU, QK-norm, sliding-window attention): %w", c.Arch, m.be.Name(), ErrUnsupported)
	}
	g := &gemma3Extras{ops: ops}
	if c.QKNorm {
		m.headNorm = ops
	}
	if c.AttnSoftcap > 0 || c.FinalSoftcap > 0 {
		if g.softcap, ok = m.be.(kernels.SoftCapOps); !ok {
			return fmt.Errorf("%s: the %s backend lacks logit soft-capping: %w", c.Arch, m.be.Name(), ErrUnsupported)
		}
	}
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		if c.QKNorm {
			l.qNorm = w.loadF32(p+"attn_q_norm.weight", c.HeadDim)
			l.kNorm = w.loadF32(p+"attn_k_norm.weight", c.HeadDim)
		}
		l.postAttnNorm = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
		l.postFFNNorm = w.loadF32(p+"post_ffw_norm.weight", c.Hidden)
	}
	if w.err != nil {
		return w.err
	}
	local := c
	local.RopeTheta, local.RopeScaling = c.RopeThetaLocal, nil
	freq, err := m.be.Upload(f32Host("rope.inv_freq_local", ropeFrequencies(local)))
	if err != nil {
		return err
	}
	g.localFreq = freq
	m.gemma = g
	return nil
}

// finalSoftcap caps the n rows of logits (Gemma 2), or does nothing.
func (m *Llama) finalSoftcap(n int) error {
	if m.cfg.FinalSoftcap <= 0 {
		return nil
	}
	return m.gemma.softcap.SoftCap(m.logits, n, m.cfg.FinalSoftcap)
}

// gemmaAttention is layer i's attention: windowed on a window layer, its
// scores capped on Gemma 2.
func (m *Llama) gemmaAttention(kv kernels.KVStore, li int, b *kernels.Batch, window int) error {
	c, g := &m.cfg, m.gemma
	if c.AttnSoftcap > 0 {
		return g.softcap.CappedAttention(m.att, m.q, m.k, m.v, kv, li, b, c.QueryScale, window, c.AttnSoftcap)
	}
	return g.ops.SlidingAttention(m.att, m.q, m.k, m.v, kv, li, b, c.QueryScale, window)
}

// gemma3Layers runs the n rows of b through every layer, m.x in and out.
func (m *Llama) gemma3Layers(b *kernels.Batch, n int) error {
	c, be, g := &m.cfg, m.be, m.gemma
	err := firstErr(m.prepareWindow(b), g.ops.Scale(m.x, n, float32(math.Sqrt(float64(c.Hidden)))))
	for i := range m.layers {
		if err != nil {
			return err
		}
		l := &m.layers[i]
		freq, window := m.invFreq, 0
		kv, li, lb := m.layerKV(i, b)
		if c.IsWindowLayer(i) {
			freq, window = g.localFreq, c.Window
		}
		err = firstErr(
			// attention
			be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps),
			kernels.MatMuls(be, m.qkvOut, m.h, l.qkv, nil, n),
			m.qkNorm(l, n),
			be.RoPE(m.q, freq, b.Positions, c.Heads, c.RopeStyle),
			be.RoPE(m.k, freq, b.Positions, c.KVHeads, c.RopeStyle),
			m.gemmaAttention(kv, li, lb, window),
			be.MatMul(m.o, m.att, l.wo, nil, n),
			be.RMSNorm(m.o, m.o, l.postAttnNorm, n, c.RMSEps),
			be.Add(m.x, m.o, n),
			// feed-forward
			be.RMSNorm(m.h, m.x, l.ffnNorm, n, c.RMSEps),
			kernels.MatMuls(be, m.gateUpOut, m.h, l.gateUp, nil, n),
			g.ops.GeGLU(m.gate, m.gate, m.up, n),
			be.MatMul(m.o, m.gate, l.wDown, nil, n),
			be.RMSNorm(m.o, m.o, l.postFFNNorm, n, c.RMSEps),
			be.Add(m.x, m.o, n),
		)
	}
	return err
}
