package models

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/sluicehq/sluice/kernels"
)

// hfConfig is the part of a Hugging Face config.json the Llama family uses.
type hfConfig struct {
	Architectures         []string       `json:"architectures"`
	HiddenSize            int            `json:"hidden_size"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	NumKeyValueHeads      int            `json:"num_key_value_heads"`
	HeadDim               int            `json:"head_dim"`
	VocabSize             int            `json:"vocab_size"`
	MaxPositionEmbeddings int            `json:"max_position_embeddings"`
	RMSNormEps            *float64       `json:"rms_norm_eps"`
	RopeTheta             *float64       `json:"rope_theta"`
	RopeScaling           *hfRopeScaling `json:"rope_scaling"`
	// RopeParameters is transformers 5's spelling of both (foldRopeParameters).
	RopeParameters    json.RawMessage `json:"rope_parameters"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`

	// Gemma 3 and Gemma 2 (soft-capping is Gemma 2's)
	QueryPreAttnScalar    *float64        `json:"query_pre_attn_scalar"`
	SlidingWindow         *int            `json:"sliding_window"`
	SlidingWindowPattern  *int            `json:"sliding_window_pattern"`
	LayerTypes            []string        `json:"layer_types"` // "sliding_attention" | "full_attention"
	RopeLocalBaseFreq     *float64        `json:"rope_local_base_freq"`
	FinalLogitSoftcapping *float64        `json:"final_logit_softcapping"`
	AttnLogitSoftcapping  *float64        `json:"attn_logit_softcapping"`
	HiddenActivation      string          `json:"hidden_activation"`
	TextConfig            json.RawMessage `json:"text_config"` // Gemma3ForConditionalGeneration: the language model's config

	// Mixture of experts (hfmoe.go): Mixtral counts its experts in
	// num_local_experts, Qwen2/3-MoE and OLMoE in num_experts.
	HiddenAct                    string   `json:"hidden_act"`
	NumLocalExperts              *int     `json:"num_local_experts"`
	NumExperts                   *int     `json:"num_experts"`
	NumExpertsPerTok             *int     `json:"num_experts_per_tok"`
	MoEIntermediateSize          *int     `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize *int     `json:"shared_expert_intermediate_size"`
	NormTopkProb                 *bool    `json:"norm_topk_prob"`
	DecoderSparseStep            *int     `json:"decoder_sparse_step"`
	MLPOnlyLayers                []int    `json:"mlp_only_layers"`
	ClipQKV                      *float64 `json:"clip_qkv"`
	UseSlidingWindow             *bool    `json:"use_sliding_window"`

	// Phi-3, 3.5 and 4 (phi3): partial rotary (Phi-4-mini) and LongRoPE.
	PartialRotaryFactor           *float64 `json:"partial_rotary_factor"`
	OriginalMaxPositionEmbeddings *int     `json:"original_max_position_embeddings"`

	// SmolLM3 (smollm3.go): 1 where a layer rotates, 0 for its NoPE layers.
	NoRopeLayers        []int `json:"no_rope_layers"`
	NoRopeLayerInterval *int  `json:"no_rope_layer_interval"`

	// gpt-oss (gptoss_hf.go): the clamped SwiGLU's constants and the
	// attention biases, which the forward pass has fixed.
	SwigluLimit   *float64 `json:"swiglu_limit"`
	SwigluAlpha   *float64 `json:"swiglu_alpha"`
	AttentionBias *bool    `json:"attention_bias"`
	// QuantizationConfig: gpt-oss's release names mxfp4 here.
	QuantizationConfig *struct {
		QuantMethod string `json:"quant_method"`
	} `json:"quantization_config"`
}

// gemma3TextDefaults is transformers' Gemma3TextConfig with nothing set: the
// values a Gemma 3 config.json leaves out (a multimodal checkpoint's
// text_config lists only what differs from them).
func gemma3TextDefaults() hfConfig {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	return hfConfig{
		HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 26, NumAttentionHeads: 8, NumKeyValueHeads: 4,
		HeadDim: 256, VocabSize: 262208, MaxPositionEmbeddings: 131072,
		RMSNormEps: f(1e-6), RopeTheta: f(1e6), QueryPreAttnScalar: f(256),
		SlidingWindow: i(4096), SlidingWindowPattern: i(gemma3WindowPattern), RopeLocalBaseFreq: f(gemma3RopeThetaLocal),
		HiddenActivation: "gelu_pytorch_tanh",
	}
}

// phi3Defaults is transformers' Phi3Config with nothing set (Phi-3 mini's
// shape): rms_norm_eps 1e-5, not the Llama family's 1e-6, and an original
// context of 4096 whatever max_position_embeddings says.
func phi3Defaults() hfConfig {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	return hfConfig{
		HiddenSize: 3072, IntermediateSize: 8192, NumHiddenLayers: 32, NumAttentionHeads: 32,
		VocabSize: 32064, MaxPositionEmbeddings: 4096, OriginalMaxPositionEmbeddings: i(4096),
		RMSNormEps: f(1e-5), RopeTheta: f(10000), HiddenAct: "silu",
	}
}

// gemma2Defaults is transformers' Gemma2Config with nothing set (Gemma 2
// 2B's shape); released config.json files spell every field out.
func gemma2Defaults() hfConfig {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	return hfConfig{
		HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 26, NumAttentionHeads: 8, NumKeyValueHeads: 4,
		HeadDim: 256, VocabSize: 256000, MaxPositionEmbeddings: 8192,
		RMSNormEps: f(1e-6), RopeTheta: f(10000), QueryPreAttnScalar: f(256), SlidingWindow: i(gemma2Window),
		AttnLogitSoftcapping: f(gemma2AttnSoftcap), FinalLogitSoftcapping: f(gemma2FinalSoftcap),
		HiddenActivation: "gelu_pytorch_tanh",
	}
}

type hfRopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type"` // older spelling of rope_type
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
	// LongRoPE (Phi-3's "longrope", formerly "su"): per-pair frequency
	// divisors for contexts up to the original one and beyond it.
	ShortFactor     []float64 `json:"short_factor"`
	LongFactor      []float64 `json:"long_factor"`
	AttentionFactor *float64  `json:"attention_factor"`
	// YaRN (gpt-oss): the blend's ends in rotations, whether they are
	// rounded out (transformers' default true), and DeepSeek's mscale pair.
	BetaFast     *float64 `json:"beta_fast"`
	BetaSlow     *float64 `json:"beta_slow"`
	Truncate     *bool    `json:"truncate"`
	Mscale       *float64 `json:"mscale"`
	MscaleAllDim *float64 `json:"mscale_all_dim"`
}

// hfArchs maps config.json's architectures[0] to our architecture names.
var hfArchs = map[string]string{
	"LlamaForCausalLM":   "llama",
	"MistralForCausalLM": "llama",
	"Qwen2ForCausalLM":   "qwen2",
	"Qwen3ForCausalLM":   "qwen3",
	"Gemma3ForCausalLM":  "gemma3",
	"Gemma2ForCausalLM":  "gemma2",
	// Mixtures of experts (hfmoe.go); Mixtral is Llama with experts.
	"MixtralForCausalLM":  "llama",
	"Qwen2MoeForCausalLM": "qwen2moe",
	"Qwen3MoeForCausalLM": "qwen3moe",
	"OlmoeForCausalLM":    "olmoe",
	"Phi3ForCausalLM":     "phi3",
	"SmolLM3ForCausalLM":  "smollm3",
	"GptOssForCausalLM":   "gpt-oss",
	// The multimodal checkpoint: its language model alone (text_config and
	// the language_model tensors; the vision tower is not loaded).
	"Gemma3ForConditionalGeneration": "gemma3",
	// Gemma 4 dense (gemma4_hf.go), likewise.
	"Gemma4ForCausalLM":              "gemma4",
	"Gemma4ForConditionalGeneration": "gemma4",
}

// readHFConfig parses dir/config.json. has tells which (GGUF-named) tensors
// exist, for the properties config.json leaves implicit (biases, lm_head).
func readHFConfig(path string, has func(string) bool) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("hf config: %w", err)
	}
	var hc hfConfig
	if err := json.Unmarshal(raw, &hc); err != nil {
		return Config{}, fmt.Errorf("hf config %s: %w: %w", path, ErrMalformed, err)
	}
	if len(hc.Architectures) == 0 {
		return Config{}, fmt.Errorf("hf config %s: architectures: %w", path, ErrMissingKey)
	}
	arch, ok := hfArchs[hc.Architectures[0]]
	if !ok {
		return Config{}, fmt.Errorf("hf config %s: architecture %q (want LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM, Phi3ForCausalLM, SmolLM3ForCausalLM, GptOssForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma4ForCausalLM or Gemma4ForConditionalGeneration; Qwen3.5 through LoadQwen35Source): %w",
			path, hc.Architectures[0], ErrUnsupported)
	}
	text := raw // the text model's object: text_config where there is one
	if arch == "gemma3" || arch == "gemma4" {
		// Again over transformers' defaults, from text_config when there is one.
		if hc.TextConfig != nil {
			text = hc.TextConfig
		} else if a := hc.Architectures[0]; a == "Gemma3ForConditionalGeneration" || a == "Gemma4ForConditionalGeneration" {
			return Config{}, fmt.Errorf("hf config %s: %s without text_config: %w", path, a, ErrMissingKey)
		}
		archs := hc.Architectures
		hc = gemma3TextDefaults()
		if arch == "gemma4" {
			hc = gemma4TextDefaults()
		}
		if err := json.Unmarshal(text, &hc); err != nil {
			return Config{}, fmt.Errorf("hf config %s: text_config: %w: %w", path, ErrMalformed, err)
		}
		hc.Architectures = archs
	}
	if defaults, ok := map[string]func() hfConfig{"gemma2": gemma2Defaults, "phi3": phi3Defaults, "gpt-oss": gptossDefaults}[arch]; ok {
		archs := hc.Architectures
		hc = defaults()
		if err := json.Unmarshal(raw, &hc); err != nil {
			return Config{}, fmt.Errorf("hf config %s: %w: %w", path, ErrMalformed, err)
		}
		hc.Architectures = archs
	}
	src := raw // the object hc was read from: Gemma 3's text_config where there is one
	if arch == "gemma3" && hc.TextConfig != nil {
		src = hc.TextConfig
	}
	if arch != "gemma4" { // one rope_parameters object per layer kind, proportional (hfConfig.gemma4)
		if err := hc.foldRopeParameters(path, src); err != nil {
			return Config{}, err
		}
	}
	cfg := Config{
		Arch:       arch,
		Layers:     hc.NumHiddenLayers,
		Hidden:     hc.HiddenSize,
		FFN:        hc.IntermediateSize,
		Heads:      hc.NumAttentionHeads,
		KVHeads:    hc.NumKeyValueHeads,
		HeadDim:    hc.HeadDim,
		Vocab:      hc.VocabSize,
		ContextLen: hc.MaxPositionEmbeddings,
		RMSEps:     1e-6, // transformers' LlamaConfig default
		RopeTheta:  10000,
		// Hugging Face checkpoints keep q_proj/k_proj unpermuted: rotate halves.
		RopeStyle: kernels.RoPEHalves,
		QKVBias:   has("blk.0.attn_q.bias"),
		QKNorm:    has("blk.0.attn_q_norm.weight"),
	}
	if cfg.KVHeads == 0 {
		cfg.KVHeads = cfg.Heads
	}
	if cfg.HeadDim == 0 && cfg.Heads > 0 {
		cfg.HeadDim = cfg.Hidden / cfg.Heads
	}
	if hc.RMSNormEps != nil {
		cfg.RMSEps = float32(*hc.RMSNormEps)
	}
	if hc.RopeTheta != nil {
		cfg.RopeTheta = float32(*hc.RopeTheta)
	}
	cfg.TiedEmbeddings = !has("output.weight") || (hc.TieWordEmbeddings != nil && *hc.TieWordEmbeddings)
	if arch != "phi3" && arch != "gpt-oss" { // Phi-3's rope_scaling is LongRoPE (hfConfig.phi3), gpt-oss's YaRN (hfConfig.gptoss)
		if cfg.RopeScaling, err = hc.RopeScaling.config(path); err != nil {
			return Config{}, err
		}
	}
	switch arch {
	case "phi3":
		if err := hc.phi3(&cfg, path); err != nil {
			return Config{}, err
		}
	case "gemma3":
		if err := hc.gemma3(&cfg, path); err != nil {
			return Config{}, err
		}
	case "gemma2":
		if err := hc.gemma2(&cfg, path); err != nil {
			return Config{}, err
		}
	case "smollm3":
		if err := hc.smollm3(&cfg, path); err != nil {
			return Config{}, err
		}
	case "gpt-oss":
		if err := hc.gptoss(&cfg, path); err != nil {
			return Config{}, err
		}
	case "gemma4":
		if err := hc.gemma4(&cfg, path, text); err != nil {
			return Config{}, err
		}
	}
	if isHFMoE(hc.Architectures[0]) {
		if err := hc.moe(&cfg, path); err != nil {
			return Config{}, err
		}
	}
	if a := hc.Architectures[0]; (a == "MistralForCausalLM" || a == "MixtralForCausalLM") && hc.SlidingWindow != nil && *hc.SlidingWindow > 0 {
		// Mistral 7B v0.1's window (4096) is on every layer, as transformers'
		// MistralModel (and MixtralModel) masks it; later Mistrals and
		// Mixtrals set sliding_window null.
		cfg.Window, cfg.RopeThetaLocal = *hc.SlidingWindow, cfg.RopeTheta
		cfg.WindowLayers = make([]bool, max(cfg.Layers, 0))
		setWindowPattern(cfg.WindowLayers, 0)
	}
	if err := checkShape(cfg); err != nil {
		return Config{}, fmt.Errorf("hf config %s: %w", path, err)
	}
	return cfg, nil
}

// foldRopeParameters reads transformers 5's rope_parameters (the base and
// the scaling in one object, or one object per attention type as Gemma's
// configs have it) into rope_theta, rope_local_base_freq and rope_scaling,
// so that a checkpoint saved in that layout does not silently get the
// default base.
func (hc *hfConfig) foldRopeParameters(path string, src []byte) error {
	if len(hc.RopeParameters) == 0 || string(hc.RopeParameters) == "null" {
		return nil
	}
	type params struct {
		hfRopeScaling
		RopeTheta *float64 `json:"rope_theta"`
	}
	var flat params
	if err := json.Unmarshal(hc.RopeParameters, &flat); err != nil {
		return fmt.Errorf("hf config %s: rope_parameters: %w: %w", path, ErrMalformed, err)
	}
	global, local := &flat, (*params)(nil)
	if flat.RopeTheta == nil {
		var byType map[string]*params
		if err := json.Unmarshal(hc.RopeParameters, &byType); err != nil {
			return fmt.Errorf("hf config %s: rope_parameters: %w: %w", path, ErrMalformed, err)
		}
		global, local = byType["full_attention"], byType["sliding_attention"]
		delete(byType, "full_attention")
		delete(byType, "sliding_attention")
		if global == nil || global.RopeTheta == nil || len(byType) > 0 || (local != nil && local.RopeTheta == nil) {
			return fmt.Errorf("hf config %s: rope_parameters: want rope_theta, or full_attention (and sliding_attention) objects with one: %w", path, ErrUnsupported)
		}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(src, &keys); err != nil {
		return fmt.Errorf("hf config %s: %w: %w", path, ErrMalformed, err)
	}
	if err := foldTheta(&hc.RopeTheta, global.RopeTheta, keys, "rope_theta", path); err != nil {
		return err
	}
	if typ := cmp.Or(global.RopeType, global.Type); hc.RopeScaling == nil && typ != "" && typ != "default" {
		hc.RopeScaling = &global.hfRopeScaling
	}
	if local != nil {
		if typ := cmp.Or(local.RopeType, local.Type); typ != "" && typ != "default" {
			return fmt.Errorf("hf config %s: rope_parameters.sliding_attention rope_type %q (scaling of the window layers' RoPE) is not implemented: %w", path, typ, ErrUnsupported)
		}
		return foldTheta(&hc.RopeLocalBaseFreq, local.RopeTheta, keys, "rope_local_base_freq", path)
	}
	return nil
}

// foldTheta sets *dst from rope_parameters' v, over an architecture default;
// where the file sets key itself, the two must agree.
func foldTheta(dst **float64, v *float64, keys map[string]json.RawMessage, key, path string) error {
	_, inFile := keys[key]
	switch {
	case !inFile:
		*dst = v
	case **dst != *v:
		return fmt.Errorf("hf config %s: %s %g and rope_parameters' %g disagree: %w", path, key, **dst, *v, ErrMalformed)
	}
	return nil
}

func (s *hfRopeScaling) config(path string) (*RopeScaling, error) {
	if s == nil {
		return nil, nil
	}
	typ := s.RopeType
	if typ == "" {
		typ = s.Type
	}
	switch typ {
	case "default":
		return nil, nil
	case "llama3":
	case "linear":
		if s.Factor <= 0 {
			return nil, fmt.Errorf("hf config %s: linear rope_scaling needs a factor: %w", path, ErrMissingKey)
		}
		return &RopeScaling{Linear: true, Factor: float32(s.Factor)}, nil
	default:
		return nil, fmt.Errorf("hf config %s: rope_scaling type %q (want llama3 or linear): %w", path, typ, ErrUnsupported)
	}
	if s.Factor <= 0 || s.OriginalMaxPositionEmbeddings <= 0 {
		return nil, fmt.Errorf("hf config %s: llama3 rope_scaling needs factor and original_max_position_embeddings: %w", path, ErrMissingKey)
	}
	return &RopeScaling{
		Factor:          float32(s.Factor),
		LowFreqFactor:   float32(s.LowFreqFactor),
		HighFreqFactor:  float32(s.HighFreqFactor),
		OriginalContext: s.OriginalMaxPositionEmbeddings,
	}, nil
}

// gemma3 reads Gemma 3's window layout, query scale and soft-caps. Gemma ties
// its head to the embedding; its norms are stored as w for (1 + w), which the
// loader shifts (weightLoader.normShift).
func (hc *hfConfig) gemma3(cfg *Config, path string) error {
	// Gemma 2's soft-caps survive in Gemma3TextConfig, null in every
	// released checkpoint; transformers' Gemma3Attention and
	// Gemma3ForCausalLM apply a number exactly as Gemma 2 does.
	// Gemma3ForConditionalGeneration's head does not apply the final cap, so
	// which logits such a checkpoint means is ambiguous: refused.
	if hc.Architectures[0] == "Gemma3ForConditionalGeneration" && hc.FinalLogitSoftcapping != nil {
		return fmt.Errorf("hf config %s: text_config.final_logit_softcapping = %g: transformers' Gemma3ForConditionalGeneration does not apply it (Gemma3ForCausalLM does): %w",
			path, *hc.FinalLogitSoftcapping, ErrUnsupported)
	}
	if err := hc.softcaps(cfg, path); err != nil {
		return err
	}
	cfg.RopeThetaLocal = gemma3RopeThetaLocal
	if hc.RopeLocalBaseFreq != nil {
		cfg.RopeThetaLocal = float32(*hc.RopeLocalBaseFreq)
	}
	return hc.gemmaCommon(cfg, path, gemma3WindowPattern)
}

// gemma2 reads Gemma 2's soft-caps beside what it shares with Gemma 3: one
// RoPE base for every layer, every other layer (from the first) a window
// layer unless layer_types says otherwise. A null cap is none, as
// transformers skips it.
func (hc *hfConfig) gemma2(cfg *Config, path string) error {
	if err := hc.softcaps(cfg, path); err != nil {
		return err
	}
	cfg.QKNorm = false // Gemma 2 has none; a stray q_norm is not read
	cfg.RopeThetaLocal = cfg.RopeTheta
	// Gemma2Config has no sliding_window_pattern; its layer_types default
	// alternates.
	hc.SlidingWindowPattern = nil
	return hc.gemmaCommon(cfg, path, gemma2WindowPattern)
}

// softcaps reads attn_logit_softcapping and final_logit_softcapping, applied
// as s → cap·tanh(s/cap) to the attention scores (after the query scale,
// before the mask) and to the logits. A null cap is none, as transformers
// skips it.
func (hc *hfConfig) softcaps(cfg *Config, path string) error {
	for _, c := range []struct {
		key string
		v   *float64
		to  *float32
	}{{"attn_logit_softcapping", hc.AttnLogitSoftcapping, &cfg.AttnSoftcap}, {"final_logit_softcapping", hc.FinalLogitSoftcapping, &cfg.FinalSoftcap}} {
		if c.v == nil {
			continue
		}
		if !(*c.v > 0) || math.IsInf(*c.v, 0) {
			return fmt.Errorf("hf config %s: %s = %g must be positive (or null for none): %w", path, c.key, *c.v, ErrMalformed)
		}
		*c.to = float32(*c.v)
	}
	return nil
}

// gemmaCommon reads what Gemma 2 and 3 share: GELU-tanh, the tied head, the
// query scale and the window layout (pattern: every pattern-th layer global
// when config.json lists neither layer_types nor a pattern).
func (hc *hfConfig) gemmaCommon(cfg *Config, path string, pattern int) error {
	if hc.HiddenActivation != "gelu_pytorch_tanh" {
		return fmt.Errorf("hf config %s: hidden_activation %q (Gemma's feed-forward is gelu_pytorch_tanh): %w", path, hc.HiddenActivation, ErrUnsupported)
	}
	cfg.TiedEmbeddings = true
	scalar := float64(cfg.HeadDim)
	if hc.QueryPreAttnScalar != nil {
		scalar = *hc.QueryPreAttnScalar
	}
	if !(scalar > 0) || math.IsInf(scalar, 0) {
		return fmt.Errorf("hf config %s: query_pre_attn_scalar = %g must be positive: %w", path, scalar, ErrMalformed)
	}
	cfg.QueryScale = float32(1 / math.Sqrt(scalar))
	if hc.SlidingWindow == nil || *hc.SlidingWindow <= 0 {
		return nil
	}
	cfg.Window = *hc.SlidingWindow
	cfg.WindowLayers = make([]bool, cfg.Layers)
	switch {
	case hc.LayerTypes != nil:
		if len(hc.LayerTypes) != cfg.Layers {
			return fmt.Errorf("hf config %s: %d layer_types for %d layers: %w", path, len(hc.LayerTypes), cfg.Layers, ErrMalformed)
		}
		for i, t := range hc.LayerTypes {
			if t != "sliding_attention" && t != "full_attention" {
				return fmt.Errorf("hf config %s: layer_types[%d] = %q (want sliding_attention or full_attention): %w", path, i, t, ErrMalformed)
			}
			cfg.WindowLayers[i] = t == "sliding_attention"
		}
	case hc.SlidingWindowPattern != nil:
		setWindowPattern(cfg.WindowLayers, *hc.SlidingWindowPattern)
	default:
		setWindowPattern(cfg.WindowLayers, pattern)
	}
	return nil
}

// phi3 reads Phi-3's rotary embedding and window as transformers'
// Phi3Config and Phi3RotaryEmbedding do, into the fields the GGUF reader
// fills from what convert_hf_to_gguf.py writes (metaReader.phi3): the first
// int(head_dim · partial_rotary_factor) elements of each head rotate in
// NeoX pairs (q and k are not permuted, in the checkpoint or in GGUF);
// LongRoPE's short_factor and long_factor are exposed by HFDir as
// rope_factors_short.weight and rope_factors_long.weight; the attention
// factor is rope_scaling.attention_factor, else √(1 + ln s / ln original)
// for s = rope_scaling.factor or else max/original context, above 1.
func (hc *hfConfig) phi3(cfg *Config, path string) error {
	if hc.HiddenAct != "silu" {
		return fmt.Errorf("hf config %s: hidden_act %q (Phi-3's feed-forward is silu): %w", path, hc.HiddenAct, ErrUnsupported)
	}
	prf := 1.0
	if hc.PartialRotaryFactor != nil {
		prf = *hc.PartialRotaryFactor
	}
	cfg.RopeDims = int(float64(cfg.HeadDim) * prf)
	if !(prf > 0 && prf <= 1) || cfg.RopeDims <= 0 || cfg.RopeDims%2 != 0 {
		return fmt.Errorf("hf config %s: partial_rotary_factor %g of head size %d is %d rotary dims (want an even count, at least 2): %w",
			path, prf, cfg.HeadDim, cfg.RopeDims, ErrMalformed)
	}
	cfg.RopeOrigContext, cfg.RopeAttnFactor = cfg.ContextLen, 1
	window := 0
	if hc.SlidingWindow != nil {
		window = *hc.SlidingWindow
	}
	if s := hc.RopeScaling; s != nil {
		typ := s.RopeType
		if typ == "" {
			typ = s.Type
		}
		switch typ {
		case "default":
		case "longrope", "su":
			if err := hc.longRoPE(cfg, path); err != nil {
				return err
			}
		default:
			// transformers reads a Phi-3 "yarn" as LongRoPE, llama.cpp as
			// YaRN with another attention factor: no one answer to follow.
			return fmt.Errorf("hf config %s: Phi-3 rope_scaling type %q (want longrope, su or default): %w", path, typ, ErrUnsupported)
		}
	}
	phi3Derive(cfg, window)
	return nil
}

// longRoPE checks LongRoPE's factors (the tensors are HFDir's) and sets the
// original context and the attention factor.
func (hc *hfConfig) longRoPE(cfg *Config, path string) error {
	s := hc.RopeScaling
	if hc.OriginalMaxPositionEmbeddings == nil {
		return fmt.Errorf("hf config %s: LongRoPE with original_max_position_embeddings null: %w", path, ErrMissingKey)
	}
	orig := *hc.OriginalMaxPositionEmbeddings
	// transformers takes the top-level key over rope_scaling's own.
	if s.OriginalMaxPositionEmbeddings != 0 && s.OriginalMaxPositionEmbeddings != orig {
		return fmt.Errorf("hf config %s: original_max_position_embeddings %d and rope_scaling's %d disagree: %w",
			path, orig, s.OriginalMaxPositionEmbeddings, ErrUnsupported)
	}
	if orig <= 1 {
		return fmt.Errorf("hf config %s: original_max_position_embeddings %d: %w", path, orig, ErrMalformed)
	}
	for _, f := range []struct {
		key string
		v   []float64
	}{{"short_factor", s.ShortFactor}, {"long_factor", s.LongFactor}} {
		if len(f.v) != cfg.RopeDims/2 {
			return fmt.Errorf("hf config %s: rope_scaling.%s has %d factors for %d rotary dims (want %d): %w",
				path, f.key, len(f.v), cfg.RopeDims, cfg.RopeDims/2, ErrMalformed)
		}
		for i, v := range f.v {
			if !(v > 0) || math.IsInf(v, 0) || float32(v) == 0 {
				return fmt.Errorf("hf config %s: rope_scaling.%s[%d] = %g is not a positive frequency divisor: %w", path, f.key, i, v, ErrMalformed)
			}
		}
	}
	attn := 1.0
	switch scale := float64(cfg.ContextLen) / float64(orig); {
	case s.AttentionFactor != nil:
		attn = *s.AttentionFactor
	case s.Factor > 0:
		scale = s.Factor
		fallthrough
	default:
		if scale > 1 {
			attn = math.Sqrt(1 + math.Log(scale)/math.Log(float64(orig)))
		}
	}
	if !(attn > 0) || math.IsInf(attn, 0) {
		return fmt.Errorf("hf config %s: LongRoPE attention factor %g: %w", path, attn, ErrMalformed)
	}
	cfg.RopeOrigContext, cfg.RopeAttnFactor = orig, float32(attn)
	return nil
}
