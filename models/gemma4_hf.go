package models

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/kernels"
)

// Gemma 4 (dense) from a Hugging Face checkpoint: Gemma4ForCausalLM, or the
// text model of Gemma4ForConditionalGeneration (text_config,
// model.language_model.*; the vision and audio towers are not loaded), read
// into what metaReader.gemma4 makes of a GGUF file so the forward pass is
// shared. transformers' Gemma4TextConfig keeps the window layers' head
// shape in head_dim and num_key_value_heads and the global layers' in
// global_head_dim and, with attention_k_eq_v only, num_global_key_value_heads;
// rope_parameters holds one object per layer kind, the global layers'
// "proportional" (their first partial_rotary_factor of the pairs turn at
// base^(−2i/global_head_dim), the rest not at all), which HFDir exposes as
// GGUF's rope_freqs.weight (divisor 1 or 1e30 per pair). The norms are plain
// weights, as in GGUF; layer_scalar is layer_output_scale.weight. The small
// models' (E2B/E4B) per-layer inputs, shared K/V and double-wide MLPs are
// read as gemma4_small.go reads them from GGUF, and the 26B-A4B's mixture
// (enable_moe_block) as gemma4_moe.go reads it: router.proj, router.scale and
// router.per_expert_scale, experts.gate_up_proj (GGUF's fused layout) and
// experts.down_proj, the three branch norms.

// gemma4TextDefaults is transformers' Gemma4TextConfig with nothing set.
func gemma4TextDefaults() hfConfig {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	return hfConfig{
		HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 30, NumAttentionHeads: 8, NumKeyValueHeads: 4,
		HeadDim: 256, VocabSize: 262144, MaxPositionEmbeddings: 131072, RMSNormEps: f(1e-6),
		SlidingWindow: i(512), HiddenActivation: "gelu_pytorch_tanh",
	}
}

// hfGemma4Extra is the part of a Gemma 4 text config hfConfig lacks, with
// Gemma4TextConfig's defaults.
type hfGemma4Extra struct {
	GlobalHeadDim           int    `json:"global_head_dim"`
	VocabSizePerLayerInput  *int   `json:"vocab_size_per_layer_input"`
	NumGlobalKeyValueHeads  *int   `json:"num_global_key_value_heads"`
	AttentionKEqV           bool   `json:"attention_k_eq_v"`
	HiddenSizePerLayerInput int    `json:"hidden_size_per_layer_input"`
	NumKVSharedLayers       int    `json:"num_kv_shared_layers"`
	EnableMoEBlock          bool   `json:"enable_moe_block"`
	NumExperts              int    `json:"num_experts"`
	TopKExperts             int    `json:"top_k_experts"`
	MoEIntermediateSize     int    `json:"moe_intermediate_size"`
	UseDoubleWideMLP        bool   `json:"use_double_wide_mlp"`
	AttentionBias           bool   `json:"attention_bias"`
	UseBidirectional        string `json:"use_bidirectional_attention"`
	RopeParameters          map[string]struct {
		RopeType            string   `json:"rope_type"`
		RopeTheta           *float64 `json:"rope_theta"`
		PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
		Factor              *float64 `json:"factor"`
	} `json:"rope_parameters"`
}

// gemma4 reads a Gemma 4 text config (src: the object hc was read from).
func (hc *hfConfig) gemma4(cfg *Config, path string, src []byte) error {
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("hf config %s: Gemma 4: %s: %w", path, fmt.Sprintf(format, args...), sentinel)
	}
	x := hfGemma4Extra{GlobalHeadDim: 512, HiddenSizePerLayerInput: 256}
	if err := json.Unmarshal(src, &x); err != nil {
		return fmt.Errorf("hf config %s: %w: %w", path, ErrMalformed, err)
	}
	switch {
	case hc.HiddenActivation != "gelu_pytorch_tanh":
		return fail(ErrUnsupported, "hidden_activation %q (Gemma's feed-forward is gelu_pytorch_tanh)", hc.HiddenActivation)
	case x.HiddenSizePerLayerInput < 0 || x.NumKVSharedLayers < 0 || x.NumKVSharedLayers >= cfg.Layers:
		return fail(ErrMalformed, "hidden_size_per_layer_input %d, num_kv_shared_layers %d of %d layers", x.HiddenSizePerLayerInput, x.NumKVSharedLayers, cfg.Layers)
	case x.HiddenSizePerLayerInput > 0 && x.VocabSizePerLayerInput != nil && *x.VocabSizePerLayerInput != cfg.Vocab:
		return fail(ErrUnsupported, "vocab_size_per_layer_input %d ≠ vocab_size %d (the per-layer table is read per token)", *x.VocabSizePerLayerInput, cfg.Vocab)
	case x.UseDoubleWideMLP && x.NumKVSharedLayers == 0:
		return fail(ErrUnsupported, "use_double_wide_mlp without shared-K/V layers (it widens those)")
	case x.EnableMoEBlock && (x.NumExperts <= 0 || x.TopKExperts <= 0 || x.TopKExperts > x.NumExperts || x.MoEIntermediateSize <= 0):
		return fail(ErrMalformed, "enable_moe_block with %d experts, top %d, %d wide", x.NumExperts, x.TopKExperts, x.MoEIntermediateSize)
	case x.AttentionBias:
		return fail(ErrUnsupported, "attention_bias true (Gemma 4's projections have no biases)")
	case x.UseBidirectional == "all":
		return fail(ErrUnsupported, "use_bidirectional_attention \"all\" (a causal decoder only)")
	case hc.SlidingWindow == nil || *hc.SlidingWindow <= 0:
		return fail(ErrUnsupported, "sliding_window %v (the window layers need one)", hc.SlidingWindow)
	case x.GlobalHeadDim <= 0 || x.GlobalHeadDim%2 != 0:
		return fail(ErrMalformed, "global_head_dim %d", x.GlobalHeadDim)
	}
	if x.EnableMoEBlock {
		// The router's top k renormalised, as GGUF's experts are read.
		cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN, cfg.ExpertNorm = x.NumExperts, x.TopKExperts, x.MoEIntermediateSize, true
	}
	cfg.QKNorm, cfg.QueryScale = true, 1
	cfg.HeadDimSWA, cfg.HeadDim = cfg.HeadDim, x.GlobalHeadDim
	cfg.KVHeadsSWA = cfg.KVHeads
	if x.AttentionKEqV && x.NumGlobalKeyValueHeads != nil {
		cfg.KVHeads = *x.NumGlobalKeyValueHeads
	}
	if cfg.KVHeads <= 0 || cfg.Heads%cfg.KVHeads != 0 || cfg.Heads%cfg.KVHeadsSWA != 0 {
		return fail(ErrMalformed, "%d heads over %d global and %d window KV heads", cfg.Heads, cfg.KVHeads, cfg.KVHeadsSWA)
	}
	cfg.Window = *hc.SlidingWindow
	cfg.WindowLayers = make([]bool, max(cfg.Layers, 0))
	if hc.LayerTypes != nil {
		if len(hc.LayerTypes) != cfg.Layers {
			return fail(ErrMalformed, "%d layer_types for %d layers", len(hc.LayerTypes), cfg.Layers)
		}
		for i, t := range hc.LayerTypes {
			if t != "sliding_attention" && t != "full_attention" {
				return fail(ErrMalformed, "layer_types[%d] = %q (want sliding_attention or full_attention)", i, t)
			}
			cfg.WindowLayers[i] = t == "sliding_attention"
		}
	} else {
		setWindowPattern(cfg.WindowLayers, 6) // Gemma4TextConfig's 5:1
	}
	if cfg.Layers > 0 {
		cfg.WindowLayers[cfg.Layers-1] = false // transformers forces the last layer global
	}
	cfg.FinalSoftcap = 0 // Gemma4TextConfig's null: none (GGUF's reader defaults to llama.cpp's 30)
	if hc.FinalLogitSoftcapping != nil {
		if v := *hc.FinalLogitSoftcapping; !(v > 0) || math.IsInf(v, 0) {
			return fail(ErrMalformed, "final_logit_softcapping = %g must be positive (or null for none)", v)
		}
		cfg.FinalSoftcap = float32(*hc.FinalLogitSoftcapping)
	}
	if hc.TieWordEmbeddings == nil || *hc.TieWordEmbeddings {
		cfg.TiedEmbeddings = true // Gemma4TextConfig's default
	}
	// E2B/E4B: per-layer inputs, the last num_kv_shared_layers layers
	// reading the K/V of the last earlier layer of their kind (transformers'
	// kv_sharing_modes; llama.cpp's from−2 and from−1, checked as the GGUF
	// reader checks them), those layers' feed-forward twice as wide with
	// use_double_wide_mlp.
	cfg.PerLayerEmbd = x.HiddenSizePerLayerInput
	if n := x.NumKVSharedLayers; n > 0 {
		from := cfg.Layers - n
		if from < 2 || !cfg.WindowLayers[from-2] || cfg.WindowLayers[from-1] {
			return fail(ErrUnsupported, "%d shared-K/V layers of %d: the two before them must be a window and a global layer", n, cfg.Layers)
		}
		cfg.KVSharedFrom = from
		if x.UseDoubleWideMLP {
			cfg.LayerFFN = make([]int, cfg.Layers)
			for i := range cfg.LayerFFN {
				cfg.LayerFFN[i] = cfg.FFN
				if i >= from {
					cfg.LayerFFN[i] = 2 * cfg.FFN
				}
			}
			cfg.FFN *= 2
		}
	}
	cfg.RopeThetaLocal, cfg.RopeTheta = 10000, 1e6
	if rp := x.RopeParameters; rp != nil {
		for kind, p := range rp {
			switch {
			case kind != "sliding_attention" && kind != "full_attention":
				return fail(ErrUnsupported, "rope_parameters.%s (want sliding_attention and full_attention)", kind)
			case p.RopeTheta == nil || !(*p.RopeTheta > 0):
				return fail(ErrMalformed, "rope_parameters.%s.rope_theta %v", kind, p.RopeTheta)
			case p.Factor != nil && *p.Factor != 1:
				return fail(ErrUnsupported, "rope_parameters.%s.factor %g", kind, *p.Factor)
			case kind == "sliding_attention" && p.RopeType != "default" && p.RopeType != "":
				return fail(ErrUnsupported, "rope_parameters.sliding_attention.rope_type %q (want default)", p.RopeType)
			case kind == "full_attention" && p.RopeType != "default" && p.RopeType != "" && p.RopeType != "proportional":
				return fail(ErrUnsupported, "rope_parameters.full_attention.rope_type %q (want proportional or default)", p.RopeType)
			}
			if kind == "sliding_attention" {
				cfg.RopeThetaLocal = float32(*p.RopeTheta)
			} else {
				cfg.RopeTheta = float32(*p.RopeTheta)
			}
		}
	}
	return nil
}

// gemma4RopeFreqs exposes the global layers' proportional RoPE as GGUF's
// rope_freqs.weight: per pair of a global head, divisor 1 for the first
// int(partial_rotary_factor · global_head_dim / 2) (transformers'
// rope_angles), 1e30 (no turn) for the rest, as llama.cpp's converter
// writes it; all 1 for "default".
func (h *HFDir) gemma4RopeFreqs() error {
	raw, err := os.ReadFile(filepath.Join(h.dir, "config.json"))
	if err != nil {
		return nil // Config reports it
	}
	var top struct {
		TextConfig json.RawMessage `json:"text_config"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	if top.TextConfig != nil {
		raw = top.TextConfig
	}
	x := hfGemma4Extra{GlobalHeadDim: 512}
	if json.Unmarshal(raw, &x) != nil || x.GlobalHeadDim <= 0 || x.GlobalHeadDim%2 != 0 {
		return nil
	}
	half, rot := x.GlobalHeadDim/2, x.GlobalHeadDim/2
	full, ok := x.RopeParameters["full_attention"]
	if !ok && x.RopeParameters == nil {
		full.RopeType, ok = "proportional", true
		f := 0.25
		full.PartialRotaryFactor = &f
	}
	if ok && full.RopeType == "proportional" {
		prf := 1.0
		if full.PartialRotaryFactor != nil {
			prf = *full.PartialRotaryFactor
		}
		if !(prf > 0 && prf <= 1) {
			return fmt.Errorf("hf %s: rope_parameters.full_attention.partial_rotary_factor %g: %w", h.dir, prf, ErrMalformed)
		}
		rot = int(math.Floor(prf * float64(x.GlobalHeadDim) / 2))
	}
	const name = "rope_freqs.weight"
	if _, dup := h.tensors[name]; dup {
		return fmt.Errorf("hf %s: %s is both a tensor and config.json's rope_parameters: %w", h.dir, name, ErrMalformed)
	}
	data := make([]byte, 4*half)
	for i := range half {
		div := float32(1)
		if i >= rot {
			div = 1e30
		}
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(div))
	}
	if h.config == nil {
		h.config = map[string]kernels.HostTensor{}
	}
	h.config[name] = kernels.HostTensor{Name: name, DType: kernels.F32, Shape: []int{half}, Data: data}
	return nil
}
