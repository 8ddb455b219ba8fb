package models

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Phi-3, 3.5 and 4 (GGUF arch phi3, or a Phi3ForCausalLM checkpoint read by
// hfConfig.phi3 into the same Config) are the Llama block with its weights
// fused and its rotary embedding changed; the forward pass is llamaLayers'.
//
//	attn_qkv [q | k | v rows]     split at load into wq, wk, wv (row slices, no copy)
//	ffn_up   [gate | up rows]     split at load into wGate, wUp; down(silu(gate)·up)
//	RoPE     NeoX pairs (i, i+r/2) over the first r = rope.dimension_count
//	         elements of each head (Phi-4-mini: r = 3/4 of the head); the rest
//	         pass through unrotated
//	LongRoPE each pair's frequency divided by rope_factors_long or _short:
//	         long when the configured context exceeds
//	         rope.scaling.original_context_length, as llama.cpp's
//	         get_rope_factors chooses (Hugging Face switches per forward on the
//	         sequence's length, which a KV cache cannot follow); cos and sin
//	         scaled by rope.scaling.attn_factor
//	window   attention.sliding_window when set and > 0, on every layer
//
// llama.cpp disables Phi's sliding window (its load_arch_hparams, PR 13676);
// Hugging Face applies it, and so does Sluice: the two agree up to that many
// tokens of context.

// phi3 reads the phi3.* keys beyond the Llama family's.
func (m *metaReader) phi3(cfg *Config) error {
	cfg.RopeDims = m.intOr("rope.dimension_count", cfg.HeadDim)
	cfg.RopeOrigContext = m.intOr("rope.scaling.original_context_length", cfg.ContextLen)
	cfg.RopeAttnFactor = m.floatOr("rope.scaling.attn_factor", 1)
	window := m.intOr("attention.sliding_window", 0)
	if m.err != nil {
		return m.err
	}
	switch {
	case cfg.RopeDims <= 0 || cfg.RopeDims%2 != 0 || cfg.RopeDims > cfg.HeadDim:
		return fmt.Errorf("gguf %s: phi3.rope.dimension_count %d for head size %d: %w", m.g.path, cfg.RopeDims, cfg.HeadDim, ErrMalformed)
	case cfg.RopeAttnFactor <= 0:
		return fmt.Errorf("gguf %s: phi3.rope.scaling.attn_factor %g: %w", m.g.path, cfg.RopeAttnFactor, ErrMalformed)
	}
	phi3Derive(cfg, window)
	return nil
}

// phi3Derive sets what follows from Phi-3's checked rotary settings and
// window, the same for a GGUF file and a Hugging Face checkpoint (hfconfig.go).
func phi3Derive(cfg *Config, window int) {
	if window > 0 {
		cfg.Window = window
		cfg.RopeThetaLocal = cfg.RopeTheta // one RoPE for all layers, window or not
		cfg.WindowLayers = make([]bool, max(cfg.Layers, 0))
		setWindowPattern(cfg.WindowLayers, 0)
	}
	if cfg.RopeDims < cfg.HeadDim {
		// The rotated part is permuted at load so that the interleaved
		// kernel, given r/2 frequencies, rotates it (phi3QK).
		cfg.RopeStyle = kernels.RoPEInterleaved
	}
	if cfg.RopeDims == cfg.HeadDim {
		// cos and sin × f on both q and k is q·k × f² when every element rotates.
		f := float64(cfg.RopeAttnFactor)
		cfg.QueryScale = float32(f * f / math.Sqrt(float64(cfg.HeadDim)))
	}
}

// phi3Layer loads one Phi-3 layer: the Llama layer's tensors cut out of the
// fused ones.
func (w *weightLoader) phi3Layer(l *llamaLayer, p string, c Config) {
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	l.attnNorm = w.loadF32(p+"attn_norm.weight", c.Hidden)
	if qkv, ok := w.get(p+"attn_qkv.weight", qDim+2*kvDim, c.Hidden); ok {
		parts := w.splitRows(qkv, qDim, kvDim, kvDim)
		if c.RopeDims < c.HeadDim {
			parts[0] = w.phi3QK(parts[0], c, c.Heads, c.RopeAttnFactor*c.RopeAttnFactor)
			parts[1] = w.phi3QK(parts[1], c, c.KVHeads, 1)
		}
		l.wq, l.wk, l.wv = w.upload(parts[0]), w.upload(parts[1]), w.upload(parts[2])
	}
	l.wo = w.load(p+"attn_output.weight", c.Hidden, qDim)
	l.ffnNorm = w.loadF32(p+"ffn_norm.weight", c.Hidden)
	if up, ok := w.get(p+"ffn_up.weight", 2*c.FFN, c.Hidden); ok {
		parts := w.splitRows(up, c.FFN, c.FFN)
		l.wGate, l.wUp = w.upload(parts[0]), w.upload(parts[1])
	}
	l.wDown = w.load(p+"ffn_down.weight", c.Hidden, c.FFN)
}

// splitRows cuts t's rows into consecutive parts of the given row counts;
// each part shares t's bytes.
func (w *weightLoader) splitRows(t kernels.HostTensor, rows ...int) []kernels.HostTensor {
	cols := t.Shape[len(t.Shape)-1]
	rb := t.DType.RowBytes(cols)
	out := make([]kernels.HostTensor, len(rows))
	off := 0
	for i, n := range rows {
		out[i] = kernels.HostTensor{Name: fmt.Sprintf("%s[%d:%d]", t.Name, off, off+n), DType: t.DType,
			Shape: []int{n, cols}, Data: t.Data[off*rb : (off+n)*rb]}
		off += n
	}
	return out
}

func (w *weightLoader) upload(t kernels.HostTensor) kernels.Tensor {
	if w.err != nil {
		return nil
	}
	up, err := w.be.Upload(t)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
	}
	return up
}

// phi3QK copies a Q or K projection with the first r rows of each head
// reordered from NeoX pairs (j, j+r/2) to interleaved ones (2j, 2j+1), so that
// the interleaved RoPE kernel with r/2 frequencies rotates exactly the
// elements Phi rotates, and leaves the other head elements where they are;
// permuting q and k alike leaves every q·k unchanged. The rotated rows are
// scaled by gain: Phi's attention factor multiplies cos and sin of only the
// rotated part, so with partial rotary it cannot fold into the query scale.
func (w *weightLoader) phi3QK(t kernels.HostTensor, c Config, heads int, gain float32) kernels.HostTensor {
	if w.err != nil {
		return t
	}
	rb := t.DType.RowBytes(t.Shape[1])
	hd, r := c.HeadDim, c.RopeDims
	data := make([]byte, len(t.Data))
	copy(data, t.Data)
	for h := range heads {
		for j := range r / 2 {
			for half := range 2 {
				src := (h*hd + half*r/2 + j) * rb
				dst := (h*hd + 2*j + half) * rb
				copy(data[dst:dst+rb], t.Data[src:src+rb])
			}
		}
		if gain != 1 {
			rows := data[h*hd*rb : (h*hd+r)*rb]
			if err := scaleBlocks(t.DType, rows, gain); err != nil {
				w.err = fmt.Errorf("%s: %s: %w", w.src.Path(), t.Name, err)
				return t
			}
		}
	}
	t.Data = data
	return t
}

// scaleBlocks multiplies every value stored in data by s. Each block format
// Sluice reads is x = d·q (+ m·q'), so scaling d and m scales x; d and m are
// f16, so the product is rounded to 11 significant bits.
func scaleBlocks(dt kernels.DType, data []byte, s float32) error {
	f16 := func(b []byte) {
		binary.LittleEndian.PutUint16(b, quant.F32ToF16(s*quant.F16ToF32(binary.LittleEndian.Uint16(b))))
	}
	var offs []int // f16 scale offsets within a block
	switch dt {
	case kernels.F32:
		for i := 0; i < len(data); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(s*v))
		}
		return nil
	case kernels.F16:
		for i := 0; i < len(data); i += 2 {
			f16(data[i:])
		}
		return nil
	case kernels.BF16:
		for i := 0; i < len(data); i += 2 {
			v := quant.BF16ToF32(binary.LittleEndian.Uint16(data[i:]))
			binary.LittleEndian.PutUint16(data[i:], quant.F32ToBF16(s*v))
		}
		return nil
	case kernels.Q4_0, kernels.Q5_0, kernels.Q8_0:
		offs = []int{0}
	case kernels.Q4_1, kernels.Q5_1, kernels.Q4_K, kernels.Q5_K:
		offs = []int{0, 2} // d and m (dmin for the K-quants)
	case kernels.Q6_K:
		offs = []int{208} // d comes last
	default:
		return fmt.Errorf("scaling %v weights (partial rotary with a LongRoPE attention factor): %w", dt, ErrUnsupported)
	}
	bb := dt.BlockBytes()
	for b := 0; b+bb <= len(data); b += bb {
		for _, o := range offs {
			f16(data[b+o:])
		}
	}
	return nil
}

// phi3Frequencies are the r/2 pair frequencies base^(−2i/r) of the rotated
// part, each divided by its LongRoPE factor when the file has them.
func (w *weightLoader) phi3Frequencies(c Config) []float32 {
	r := c.RopeDims
	f := make([]float32, r/2)
	for i := range f {
		f[i] = float32(math.Pow(float64(c.RopeTheta), -2*float64(i)/float64(r)))
	}
	long, short := w.src.Has("rope_factors_long.weight"), w.src.Has("rope_factors_short.weight")
	if !long && !short {
		return f
	}
	name := "rope_factors_short.weight"
	if c.ContextLen > c.RopeOrigContext {
		name = "rope_factors_long.weight"
	}
	w.loadF32(name, r/2)
	if w.err != nil {
		return nil
	}
	for i, div := range w.host[name] {
		if !(div > 0) || math.IsInf(float64(div), 0) {
			w.err = fmt.Errorf("%s: %s[%d] = %g is not a positive frequency divisor: %w", w.src.Path(), name, i, div, ErrMalformed)
			return nil
		}
		f[i] /= div
	}
	return f
}

// attention is Attention, or SlidingAttention on a window layer of a model
// other than Gemma (whose gemma3Layers calls it itself), on the store the
// layer keeps its K/V in (with Options.WindowKV, a window layer's is the
// window store).
func (m *Llama) attention(layer int, b *kernels.Batch, scale float32) error {
	kv, li, lb := m.layerKV(layer, b)
	if m.window != nil && m.cfg.IsWindowLayer(layer) {
		return m.window.SlidingAttention(m.att, m.q, m.k, m.v, kv, li, lb, scale, m.cfg.Window)
	}
	return m.be.Attention(m.att, m.q, m.k, m.v, kv, li, lb, scale)
}

// loadWindow finishes a windowed model other than Gemma (Phi-3, Mistral):
// the backend's sliding-window attention.
func (m *Llama) loadWindow() error {
	ops, ok := m.be.(kernels.GemmaOps)
	if !ok {
		return fmt.Errorf("%s: the %s backend lacks SlidingAttention (the model's %d-token window): %w", m.cfg.Arch, m.be.Name(), m.cfg.Window, ErrUnsupported)
	}
	m.window = ops
	return nil
}
