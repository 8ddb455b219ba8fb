package models

import "github.com/sluicehq/sluice/kernels"

// Config is a Llama-family architecture's shape, read from GGUF metadata
// (llama.*, qwen2.*) or from a Hugging Face config.json.
type Config struct {
	Arch       string // "llama" (also Mistral, Mixtral, TinyLlama, SmolLM2), "qwen2", "qwen3", "qwen3moe", "qwen2moe", "olmoe", "gemma2", "gemma3", "gemma4", "phi3", "smollm3" or "gpt-oss"
	Layers     int
	Hidden     int // embedding width
	FFN        int // feed-forward width
	Heads      int
	KVHeads    int
	HeadDim    int // Hidden / Heads unless the file says otherwise
	Vocab      int
	ContextLen int

	RMSEps      float32
	RopeTheta   float32
	RopeStyle   kernels.RoPEStyle
	RopeScaling *RopeScaling // nil: none

	TiedEmbeddings bool // output head shares token_embd
	QKVBias        bool // Qwen2: attn_q/k/v carry biases
	QKNorm         bool // Qwen3, Gemma 3: per-head RMSNorm of Q and K before RoPE
	QKNormWhole    bool // OLMoE: QKNorm over each row's whole Q and K projections, not head by head

	// Mixture of experts (Qwen3-MoE, Mixtral, Qwen2-MoE, OLMoE); Experts = 0
	// for a dense FFN.
	Experts     int  // experts per layer
	ExpertsUsed int  // experts each token is routed to (top k)
	ExpertFFN   int  // an expert's feed-forward width
	ExpertNorm  bool // the top-k routing weights are renormalised to sum to 1
	// SharedExpertFFN is the width of Qwen2-MoE's shared expert, which every
	// row runs beside its routed ones, scaled by its own sigmoid gate; 0: none.
	SharedExpertFFN int

	// Gemma 3: sliding-window layers interleaved with global ones.
	Window         int     // tokens a window layer reads back (its own included); 0: all layers global
	WindowLayers   []bool  // [Layers] true for a window layer; nil when Window is 0
	RopeThetaLocal float32 // RoPE base of the window layers (the global ones use RopeTheta and RopeScaling)
	QueryScale     float32 // attention's q·k scale; 0: 1/√HeadDim
	// Gemma 4: the window layers' head size and KV heads when they differ
	// from the global layers' (HeadDim, KVHeads); 0: the same.
	HeadDimSWA, KVHeadsSWA int
	// Gemma 4 E2B/E4B (gemma4_small.go): layers from KVSharedFrom on reuse
	// an earlier layer's K/V (0: none); PerLayerEmbd is the width of each
	// layer's per-layer input (0: none); LayerFFN holds per-layer
	// feed-forward widths (nil: FFN everywhere; FFN is then the widest).
	KVSharedFrom int
	PerLayerEmbd int
	LayerFFN     []int
	// Gemma 2: s → cap·tanh(s/cap) on the attention scores and the final logits; 0: none.
	AttnSoftcap, FinalSoftcap float32

	// Phi-3 (phi3.go): partial rotary and LongRoPE.
	RopeDims        int     // elements of each head RoPE rotates; 0: HeadDim
	RopeOrigContext int     // LongRoPE: contexts above it use the long factors
	RopeAttnFactor  float32 // LongRoPE: cos and sin are scaled by it; 0: 1

	// NoRope marks the layers that apply no RoPE at all (SmolLM3's NoPE
	// layers, smollm3.go); nil: every layer rotates.
	NoRope []bool
}

// IsNoRopeLayer says whether layer i leaves Q and K unrotated.
func (c Config) IsNoRopeLayer(i int) bool { return i < len(c.NoRope) && c.NoRope[i] }

// IsWindowLayer says whether layer i attends only over the last Window tokens.
func (c Config) IsWindowLayer(i int) bool {
	return c.Window > 0 && i < len(c.WindowLayers) && c.WindowLayers[i]
}

// RopeScaling is Llama 3's frequency-dependent RoPE scaling ("rope_type":
// "llama3"), or, with Linear set, every frequency divided by Factor (Gemma 3's
// global layers from 4B up).
type RopeScaling struct {
	Factor          float32
	LowFreqFactor   float32
	HighFreqFactor  float32
	OriginalContext int
	Linear          bool
	// YaRN (gpt-oss): frequencies interpolated by Factor below the
	// wavelengths BetaFast/BetaSlow rotations of OriginalContext mark, kept
	// above, blended between (yarnFrequencies).
	YaRN               bool
	BetaFast, BetaSlow float32
	// YaRNUntruncated: the blend's ends are used as computed, not floored
	// and ceiled as ggml (and transformers by default) round them
	// (rope_scaling.truncate false, as gpt-oss's config.json sets it).
	YaRNUntruncated bool
}

// windowHeadDim is the head size of the window layers.
func (c Config) windowHeadDim() int {
	if c.HeadDimSWA > 0 {
		return c.HeadDimSWA
	}
	return c.HeadDim
}

// windowKVHeads is the KV head count of the window layers.
func (c Config) windowKVHeads() int {
	if c.KVHeadsSWA > 0 {
		return c.KVHeadsSWA
	}
	return c.KVHeads
}

// windowHeadsDiffer says whether the window layers' K/V rows differ in shape
// from the global layers' (so they cannot share one KV store).
func (c Config) windowHeadsDiffer() bool {
	return c.windowLayers() > 0 && (c.windowHeadDim() != c.HeadDim || c.windowKVHeads() != c.KVHeads)
}

// LayerHeadDim is layer i's head size.
func (c Config) LayerHeadDim(i int) int {
	if c.IsWindowLayer(i) {
		return c.windowHeadDim()
	}
	return c.HeadDim
}

// LayerKVHeads is layer i's KV head count.
func (c Config) LayerKVHeads(i int) int {
	if c.IsWindowLayer(i) {
		return c.windowKVHeads()
	}
	return c.KVHeads
}

// layerKVCols is the width of one K (or V) row layer i keeps: 0 for a
// layer that reads another's.
func (c Config) layerKVCols(i int) int {
	if c.KVSource(i) != i {
		return 0
	}
	return c.LayerKVHeads(i) * c.LayerHeadDim(i)
}
