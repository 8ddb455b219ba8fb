package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// gpt-oss (GGUF arch gpt-oss, llama.cpp's openai-moe) is the Llama block
// with these changes, all in this file and the kernels of gptossOps:
//
//	Q, K, V and the attention output carry biases;
//	every attention head has a learned sink: one more logit in its softmax,
//	  with no value, so a head can attend to nothing
//	  (p_i = e^{s_i} / (Σ_j e^{s_j} + e^{sink}));
//	layers alternate between a sliding window (attention.sliding_window,
//	  128 in the release; even layers) and the whole context;
//	RoPE is NeoX-style with YaRN scaling (rope.scaling.*: factor 32 from
//	  4096 tokens): each pair's frequency interpolated or kept by its
//	  wavelength, and cos/sin scaled by 1 + 0.1·ln(factor), which is folded
//	  into the query scale here (q and k both carry it);
//	the feed-forward is a mixture of experts with a biased router, the top
//	  k weighted by a softmax over their logits, and experts with biases and
//	  gpt-oss's clamped SwiGLU:
//	    g = min(gate, 7), u = clamp(up, −7, 7), act = g·σ(1.702·g)·(u + 1);
//	  its expert weights come as MXFP4 (kernels/quant/mxfp4.go);
//	the feed-forward's norm is post_attention_norm; the head is untied.
//
// Its chat format is harmony (ReasoningHarmony).

const (
	gptossWindowPattern = 2 // even layers are window layers (llama.cpp's load_swa_pattern default)
	gptossSwiGLUAlpha   = 1.702
	gptossSwiGLULimit   = 7.0
)

// gptossOps are the kernels gpt-oss adds to a mixture-of-experts pass; the
// CPU backend has them (kernels/cpu/gptoss.go).
type gptossOps interface {
	// SinkAttention is SlidingAttention (window ≤ 0: the whole context)
	// whose softmax over each head's scores has one more logit, sinks[h]
	// (unscaled), that contributes no value.
	SinkAttention(out, q, k, v kernels.Tensor, kv kernels.KVStore, layer int, b *kernels.Batch, scale float32, window int, sinks kernels.Tensor) error
	// OAIMoEFFN is MoEFFN (norm set: the top k weighted by a softmax over
	// their logits) with per-expert biases (gateB, upB [experts, ffn],
	// downB [experts, hidden]) and the clamped SwiGLU above (alpha, limit).
	OAIMoEFFN(dst, x, logits, gate, up, down, gateB, upB, downB kernels.Tensor, n, k int, alpha, limit float32) error
}

// gptossExtras are the parts of a gpt-oss model the Llama struct lacks.
type gptossExtras struct {
	ops    gptossOps
	layers []gptossLayer
}

type gptossLayer struct {
	bo, sinks, bRouter kernels.Tensor // [hidden], [heads], [experts]
	bGate, bUp, bDown  kernels.Tensor // [experts, expert ffn] ×2, [experts, hidden]
}

// gptoss reads the gpt-oss.* keys beyond the Llama family's.
func (m *metaReader) gptoss(cfg *Config) error {
	cfg.Window = m.int("attention.sliding_window")
	cfg.RopeThetaLocal = m.floatOr("rope.freq_base_swa", cfg.RopeTheta)
	if m.err != nil {
		return m.err
	}
	if cfg.Window <= 0 || cfg.Layers <= 0 {
		return fmt.Errorf("gguf %s: gpt-oss window %d: %w", m.g.path, cfg.Window, ErrMalformed)
	}
	if cfg.RopeThetaLocal != cfg.RopeTheta {
		return fmt.Errorf("gguf %s: gpt-oss window layers with their own RoPE base %g: %w", m.g.path, cfg.RopeThetaLocal, ErrUnsupported)
	}
	cfg.WindowLayers = make([]bool, cfg.Layers)
	key := m.prefix + "attention.sliding_window_pattern"
	switch v := m.g.meta[key].(type) {
	case nil:
		setWindowPattern(cfg.WindowLayers, gptossWindowPattern)
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
	if rd := m.intOr("rope.dimension_count", cfg.HeadDim); rd != cfg.HeadDim {
		return fmt.Errorf("gguf %s: gpt-oss rotary dims %d of heads %d: %w", m.g.path, rd, cfg.HeadDim, ErrUnsupported)
	}
	cfg.QueryScale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	if s := cfg.RopeScaling; s != nil && s.YaRN {
		ms := yarnMScale(s.Factor)
		cfg.QueryScale *= ms * ms
	}
	return m.err
}

// yarnMScale is the factor ggml's rope_yarn scales cos and sin by, with the
// attention factor llama.cpp's context sets for a YaRN model without a log
// multiplier (get_mscale(factor) / (1 + 0.1·ln factor) cancels ggml's own,
// leaving 1 + 0.1·ln factor), in float32 as both compute it.
func yarnMScale(factor float32) float32 {
	if factor <= 1 {
		return 1
	}
	logf := func(x float32) float32 { return float32(math.Log(float64(x))) }
	fs := 1 / factor // rope_freq_scale_train
	l := logf(1 / fs)
	attn := (0.1*l + 1) * (1 / (1 + 0.1*l))
	return attn * (1 + 0.1*logf(1/fs))
}

// yarnFrequencies is ropeFrequencies for YaRN as ggml's rope_yarn applies
// it with ext_factor 1: pair i's frequency θ_i = base^(−2i/d) (accumulated
// in float32 as ggml's cache does) becomes θ_i·(s·(1−r_i) + r_i), s = 1/factor
// and r_i the ramp between the correction dims, 1 below the first.
func yarnFrequencies(c Config) []float32 {
	s := c.RopeScaling
	d, half := c.HeadDim, c.HeadDim/2
	base, scale := c.RopeTheta, 1/s.Factor
	corr := func(beta float32) float64 {
		return float64(float32(d) * float32(math.Log(float64(float32(s.OriginalContext)/(beta*2*float32(math.Pi))))) / (2 * float32(math.Log(float64(base)))))
	}
	lo, hi := corr(s.BetaFast), corr(s.BetaSlow)
	if !s.YaRNUntruncated {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo, hi = max(0, lo), min(float64(d-1), hi)
	thetaScale := float32(math.Pow(float64(base), -2/float64(d)))
	out := make([]float32, half)
	theta := float32(1)
	for i := range half {
		y := (float32(i) - float32(lo)) / max(0.001, float32(hi-lo))
		ramp := 1 - min(1, max(0, y))
		out[i] = theta*scale*(1-ramp) + theta*ramp
		theta *= thetaScale
	}
	return out
}

// gptossLayer loads what a gpt-oss layer adds to the Llama tensors (those
// with the FFN norm as post_attention_norm).
func (w *weightLoader) gptossLayer(l *llamaLayer, p string, c Config) gptossLayer {
	l.ffnNorm = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
	e, f := c.Experts, c.ExpertFFN
	return gptossLayer{
		bo:      w.loadF32(p+"attn_output.bias", c.Hidden),
		sinks:   w.loadF32(p+"attn_sinks.weight", c.Heads),
		bRouter: w.loadF32(p+"ffn_gate_inp.bias", e),
		bGate:   w.load(p+"ffn_gate_exps.bias", e, f),
		bUp:     w.load(p+"ffn_up_exps.bias", e, f),
		bDown:   w.load(p+"ffn_down_exps.bias", e, c.Hidden),
	}
}

// loadGPTOSS finishes a gpt-oss model: its kernels and layer extras.
func (m *Llama) loadGPTOSS(layers []gptossLayer) error {
	ops, ok := m.be.(gptossOps)
	if !ok {
		return fmt.Errorf("%s: the %s backend lacks attention sinks and gpt-oss's expert feed-forward: %w", m.cfg.Arch, m.be.Name(), ErrUnsupported)
	}
	m.gptoss = &gptossExtras{ops: ops, layers: layers}
	return nil
}

// gptossLayers runs the n rows of b through every layer, m.x in and out.
func (m *Llama) gptossLayers(b *kernels.Batch, n int) error {
	c, be, g := &m.cfg, m.be, m.gptoss
	err := m.prepareWindow(b)
	for i := range m.layers {
		if err != nil {
			return err
		}
		l, gl := &m.layers[i], &g.layers[i]
		window := 0
		if c.IsWindowLayer(i) {
			window = c.Window
		}
		kv, li, lb := m.layerKV(i, b)
		err = firstErr(
			// attention
			be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps),
			be.MatMul(m.q, m.h, l.wq, l.bq, n),
			be.MatMul(m.k, m.h, l.wk, l.bk, n),
			be.MatMul(m.v, m.h, l.wv, l.bv, n),
			be.RoPE(m.q, m.invFreq, b.Positions, c.Heads, c.RopeStyle),
			be.RoPE(m.k, m.invFreq, b.Positions, c.KVHeads, c.RopeStyle),
			g.ops.SinkAttention(m.att, m.q, m.k, m.v, kv, li, lb, c.QueryScale, window, gl.sinks),
			be.MatMul(m.o, m.att, l.wo, gl.bo, n),
			be.Add(m.x, m.o, n),
			// experts
			be.RMSNorm(m.h, m.x, l.ffnNorm, n, c.RMSEps),
			be.MatMul(m.router, m.h, l.wRouter, gl.bRouter, n),
			g.ops.OAIMoEFFN(m.o, m.h, m.router, l.wGate, l.wUp, l.wDown, gl.bGate, gl.bUp, gl.bDown, n, c.ExpertsUsed,
				gptossSwiGLUAlpha, gptossSwiGLULimit),
			be.Add(m.x, m.o, n),
		)
	}
	return err
}
