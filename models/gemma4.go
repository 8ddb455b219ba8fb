package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Gemma 4 (llama.cpp's gemma4, text only) is Gemma 3's block with these
// changes, all in this file:
//
//	window layers and global layers have heads of their own shape: the
//	  global ones' head size is attention.key_length (512 in the 31B), the
//	  window ones' attention.key_length_swa (256), and their KV head counts
//	  come per layer from an attention.head_count_kv array; the two kinds
//	  therefore keep their K/V in two stores (allocKV);
//	which layers are window layers is the attention.sliding_window_pattern
//	  bool array (five window layers to one global in the released models);
//	V is RMS-normed per head without a weight, after Q and K's QK-norm;
//	attention scores are not scaled (q·k, scale 1: QK-norm bounds them);
//	a global layer without attn_v (attention_k_eq_v) uses K's projection
//	  as V (before the norms: V gets the unweighted norm, K its own);
//	global layers rotate by "proportional" RoPE: rope_freqs.weight holds a
//	  divisor per pair, 1 for the rotated quarter and 1e30 for the rest,
//	  which then do not turn; window layers use rope.freq_base_swa, plain;
//	norms are plain RMSNorm weights (the converter adds no 1 + w);
//	a layer may end by scaling the residual stream by a scalar
//	  (layer_output_scale.weight);
//	the final logits are soft-capped by final_logit_softcapping, 30 when
//	  the file omits it (llama.cpp's default, which its gemma4 keeps; 0:
//	  none); the attention scores never are.
//
// The small Gemma 4 models (E2B, E4B) add per-layer inputs, layers that
// reuse earlier layers' K/V and per-layer feed-forward widths
// (gemma4_small.go); the 26B-A4B adds a mixture of experts beside each
// layer's dense FFN (gemma4_moe.go).

const (
	gemma4RopeThetaLocal = 10000 // llama.cpp's rope_freq_base_train_swa default
	gemma4FinalSoftcap   = 30    // llama.cpp's f_final_logit_softcapping default
)

// gemma4Extras are the parts of a Gemma 4 model the Llama struct lacks.
type gemma4Extras struct {
	qW, kW, vW, attW kernels.Tensor            // window layers' scratch: [rows, heads*hdSWA], [rows, kvHeadsSWA*hdSWA] ×2, [rows, heads*hdSWA]
	onesW, onesG     kernels.Tensor            // [hdSWA], [hd] of 1: V's norm has no weight
	outScale         []float32                 // [layers] the residual's scale at each layer's end; 0: none
	ffn              map[int][2]kernels.Tensor // gate and up scratch by feed-forward width, but the widest (m.gate, m.up)
	ple              *gemma4PLE                // nil without per-layer inputs
	moe              *gemma4MoE                // nil without experts
}

// gemma4 reads the gemma4.* keys beyond the Llama family's.
func (m *metaReader) gemma4(cfg *Config) error {
	g, path := m.g, m.g.path
	cfg.QKNorm = true
	cfg.QueryScale = 1
	cfg.RopeThetaLocal = m.floatOr("rope.freq_base_swa", gemma4RopeThetaLocal)
	cfg.Window = m.int("attention.sliding_window")
	cfg.FinalSoftcap = m.floatOr("final_logit_softcapping", gemma4FinalSoftcap)
	cfg.HeadDimSWA = m.intOr("attention.key_length_swa", cfg.HeadDim)
	vFull := m.intOr("attention.value_length", cfg.HeadDim)
	vSWA := m.intOr("attention.value_length_swa", cfg.HeadDimSWA)
	rotFull := m.intOr("rope.dimension_count", cfg.HeadDim)
	rotSWA := m.intOr("rope.dimension_count_swa", rotFull)
	if m.err != nil {
		return m.err
	}
	switch {
	case vFull != cfg.HeadDim || vSWA != cfg.HeadDimSWA:
		return fmt.Errorf("gguf %s: gemma4 value lengths %d/%d differ from key lengths %d/%d: %w", path, vFull, vSWA, cfg.HeadDim, cfg.HeadDimSWA, ErrMalformed)
	case cfg.HeadDimSWA <= 0 || cfg.HeadDimSWA%2 != 0:
		return fmt.Errorf("gguf %s: gemma4 window head size %d: %w", path, cfg.HeadDimSWA, ErrMalformed)
	case rotFull != cfg.HeadDim || rotSWA != cfg.HeadDimSWA:
		return fmt.Errorf("gguf %s: gemma4 rotary dims %d/%d of heads %d/%d (partial rotary other than through rope_freqs): %w", path, rotFull, rotSWA, cfg.HeadDim, cfg.HeadDimSWA, ErrUnsupported)
	case cfg.Window <= 0 || cfg.Layers <= 0:
		return fmt.Errorf("gguf %s: gemma4 window %d: %w", path, cfg.Window, ErrMalformed)
	}
	key := m.prefix + "attention.sliding_window_pattern"
	pattern, ok := g.meta[key].([]bool)
	if !ok || len(pattern) != cfg.Layers {
		return fmt.Errorf("gguf %s: %s must be a bool per layer (%d): %w", path, key, cfg.Layers, ErrMalformed)
	}
	cfg.WindowLayers = append([]bool(nil), pattern...)
	if err := m.gemma4KVHeads(cfg); err != nil {
		return err
	}
	return m.gemma4Small(cfg)
}

// gemma4KVHeads reads attention.head_count_kv, one number or one per layer:
// every window layer must have the same count, and every global layer.
func (m *metaReader) gemma4KVHeads(cfg *Config) error {
	key := m.prefix + "attention.head_count_kv"
	if _, present := m.g.meta[key]; !present {
		cfg.KVHeads, cfg.KVHeadsSWA = cfg.Heads, cfg.Heads
		return nil
	}
	if n, ok := m.g.Uint(key); ok {
		if n == 0 || n > math.MaxInt32 {
			return fmt.Errorf("gguf %s: %s = %d: %w", m.g.path, key, n, ErrMalformed)
		}
		cfg.KVHeads, cfg.KVHeadsSWA = int(n), int(n)
		return nil
	}
	per, ok := m.g.Int32s(key)
	if !ok || len(per) != cfg.Layers {
		return fmt.Errorf("gguf %s: %s must be a number or one per layer (%d): %w", m.g.path, key, cfg.Layers, ErrMalformed)
	}
	cfg.KVHeads, cfg.KVHeadsSWA = 0, 0
	for i, n := range per {
		dst := &cfg.KVHeads
		if cfg.WindowLayers[i] {
			dst = &cfg.KVHeadsSWA
		}
		if n <= 0 || *dst != 0 && *dst != int(n) {
			return fmt.Errorf("gguf %s: %s[%d] = %d: layers of one kind must share their KV head count: %w", m.g.path, key, i, n, ErrMalformed)
		}
		*dst = int(n)
	}
	if cfg.KVHeads == 0 { // no global layer
		cfg.KVHeads = cfg.KVHeadsSWA
	}
	if cfg.KVHeadsSWA == 0 {
		cfg.KVHeadsSWA = cfg.KVHeads
	}
	if cfg.Heads%cfg.KVHeadsSWA != 0 {
		return fmt.Errorf("gguf %s: %d heads not a multiple of the window layers' %d KV heads: %w", m.g.path, cfg.Heads, cfg.KVHeadsSWA, ErrMalformed)
	}
	return nil
}

// gemma4Layer loads layer i of a Gemma 4 model, each tensor at its layer
// kind's head shape.
func (w *weightLoader) gemma4Layer(l *llamaLayer, p string, c Config, i int) {
	hd, kvh := c.LayerHeadDim(i), c.LayerKVHeads(i)
	if w.err == nil && w.src.Has(p+"attn_qkv.weight") {
		w.err = fmt.Errorf("%s: gemma4 with fused %sattn_qkv.weight is not supported yet: %w", w.src.Path(), p, ErrUnsupported)
		return
	}
	l.attnNorm = w.loadF32(p+"attn_norm.weight", c.Hidden)
	l.wq = w.load(p+"attn_q.weight", c.Heads*hd, c.Hidden)
	// A shared-K/V layer's attn_k/attn_v, where a file has them, are not
	// read: llama.cpp's gemma4 never runs them either.
	if c.KVSource(i) == i {
		l.wk = w.load(p+"attn_k.weight", kvh*hd, c.Hidden)
		if w.src.Has(p + "attn_v.weight") {
			l.wv = w.load(p+"attn_v.weight", kvh*hd, c.Hidden)
		}
		l.kNorm = w.loadF32(p+"attn_k_norm.weight", hd)
	}
	l.wo = w.load(p+"attn_output.weight", c.Hidden, c.Heads*hd)
	l.qNorm = w.loadF32(p+"attn_q_norm.weight", hd)
	l.postAttnNorm = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
	l.ffnNorm = w.loadF32(p+"ffn_norm.weight", c.Hidden)
	ffn := c.LayerFFNWidth(i)
	l.wGate = w.load(p+"ffn_gate.weight", ffn, c.Hidden)
	l.wUp = w.load(p+"ffn_up.weight", ffn, c.Hidden)
	l.wDown = w.load(p+"ffn_down.weight", c.Hidden, ffn)
	l.postFFNNorm = w.loadF32(p+"post_ffw_norm.weight", c.Hidden)
}

// loadGemma4 finishes a Gemma 4 model: the backend's Gemma kernels, the
// window layers' RoPE frequencies and scratch, the layer scales.
func (m *Llama) loadGemma4(w *weightLoader) error {
	c := m.cfg
	ops, ok := m.be.(kernels.GemmaOps)
	if !ok {
		return fmt.Errorf("%s: the %s backend lacks the Gemma kernels (GeGLU, QK-norm, sliding-window attention): %w", c.Arch, m.be.Name(), ErrUnsupported)
	}
	g := &gemma3Extras{ops: ops}
	if c.FinalSoftcap > 0 {
		if g.softcap, ok = m.be.(kernels.SoftCapOps); !ok {
			return fmt.Errorf("%s: the %s backend lacks logit soft-capping: %w", c.Arch, m.be.Name(), ErrUnsupported)
		}
	}
	g4 := &gemma4Extras{outScale: make([]float32, c.Layers)}
	for i := range c.Layers {
		name := fmt.Sprintf("blk.%d.layer_output_scale.weight", i)
		if !w.src.Has(name) {
			continue
		}
		t, ok := w.get(name, 1)
		if !ok {
			return w.err
		}
		v := make([]float32, 1)
		if err := quant.Dequantize(t.DType, t.Data, v); err != nil {
			return fmt.Errorf("%s: tensor %s: %w", w.src.Path(), name, err)
		}
		g4.outScale[i] = v[0]
	}
	local := c
	local.RopeTheta, local.RopeScaling, local.HeadDim = c.RopeThetaLocal, nil, c.windowHeadDim()
	rows, hdW, kvW := m.opts.MaxBatchTokens, c.windowHeadDim(), c.windowKVHeads()
	var err error
	up := func(name string, v []float32) kernels.Tensor {
		var t kernels.Tensor
		if err == nil {
			t, err = m.be.Upload(f32Host(name, v))
		}
		return t
	}
	alloc := func(shape ...int) kernels.Tensor {
		var t kernels.Tensor
		if err == nil {
			t, err = m.be.Alloc(shape...)
		}
		return t
	}
	g.localFreq = up("rope.inv_freq_local", ropeFrequencies(local))
	g4.onesW, g4.onesG = up("gemma4.ones_swa", ones(hdW)), up("gemma4.ones", ones(c.HeadDim))
	g4.qW, g4.attW = alloc(rows, c.Heads*hdW), alloc(rows, c.Heads*hdW)
	g4.kW, g4.vW = alloc(rows, kvW*hdW), alloc(rows, kvW*hdW)
	if err != nil {
		return err
	}
	if g4.ffn, err = m.gemma4FFNScratch(); err != nil {
		return err
	}
	if c.PerLayerEmbd > 0 {
		if g4.ple, err = m.loadGemma4PLE(w); err != nil {
			return err
		}
	}
	if c.Experts > 0 {
		if g4.moe, err = m.loadGemma4MoE(w); err != nil {
			return err
		}
	}
	m.headNorm = ops
	m.gemma, m.gemma4 = g, g4
	return nil
}

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// gemma4Layers runs the n rows of b through every layer, m.x in and out.
func (m *Llama) gemma4Layers(b *kernels.Batch, n int) error {
	c, be, g, g4 := &m.cfg, m.be, m.gemma, m.gemma4
	err := firstErr(m.prepareWindow(b), g.ops.Scale(m.x, n, float32(math.Sqrt(float64(c.Hidden)))))
	if err == nil && g4.ple != nil {
		err = m.gemma4PLEInputs(b, n)
	}
	for i := range m.layers {
		if err != nil {
			return err
		}
		l := &m.layers[i]
		q, k, v, att, freq, vNorm, window := m.q, m.k, m.v, m.att, m.invFreq, g4.onesG, 0
		if c.IsWindowLayer(i) {
			q, k, v, att, freq, vNorm, window = g4.qW, g4.kW, g4.vW, g4.attW, g.localFreq, g4.onesW, c.Window
		}
		gate, up := m.gate, m.up
		if f, ok := g4.ffn[c.LayerFFNWidth(i)]; ok {
			gate, up = f[0], f[1]
		}
		kvh, src := c.LayerKVHeads(i), c.KVSource(i)
		kv, li, lb := m.layerKV(src, b)
		err = firstErr(
			// attention
			be.RMSNorm(m.h, m.x, l.attnNorm, n, c.RMSEps),
			be.MatMul(q, m.h, l.wq, nil, n),
			g.ops.HeadRMSNorm(q, l.qNorm, n, c.Heads, c.RMSEps),
			be.RoPE(q, freq, b.Positions, c.Heads, c.RopeStyle),
		)
		if err == nil && src == i {
			err = m.gemma4KV(l, k, v, vNorm, freq, b, n, kvh)
		}
		// A shared-K/V layer passes k and v as its source layer left them
		// (the last layer of its kind to compute any): the kernel writes the
		// same values into the same slots again and reads the source's K/V.
		err = firstErr(err,
			g.ops.SlidingAttention(att, q, k, v, kv, li, lb, c.QueryScale, window),
			be.MatMul(m.o, att, l.wo, nil, n),
			be.RMSNorm(m.o, m.o, l.postAttnNorm, n, c.RMSEps),
			be.Add(m.x, m.o, n),
		)
		if err == nil {
			err = m.gemma4FFN(i, n, gate, up)
		}
		if err == nil && g4.ple != nil {
			err = m.gemma4PLELayer(i, n)
		}
		if s := g4.outScale[i]; err == nil && s != 0 {
			err = g.ops.Scale(m.x, n, s)
		}
	}
	return err
}

// gemma4KV computes layer l's K and V into k and v: projected, K normed
// with its weight and V without, K rotated.
func (m *Llama) gemma4KV(l *llamaLayer, k, v, vNorm, freq kernels.Tensor, b *kernels.Batch, n, kvh int) error {
	c, be, ops := &m.cfg, m.be, m.gemma.ops
	wv := l.wv
	if wv == nil {
		wv = l.wk // attention_k_eq_v: V is K's projection, normed apart
	}
	return firstErr(
		be.MatMul(k, m.h, l.wk, nil, n),
		be.MatMul(v, m.h, wv, nil, n),
		ops.HeadRMSNorm(k, l.kNorm, n, kvh, c.RMSEps),
		ops.HeadRMSNorm(v, vNorm, n, kvh, c.RMSEps),
		be.RoPE(k, freq, b.Positions, kvh, c.RopeStyle),
	)
}
