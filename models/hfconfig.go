package models

import (
	"encoding/json"
	"fmt"
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
	TieWordEmbeddings     *bool          `json:"tie_word_embeddings"`
}

type hfRopeScaling struct {
	RopeType                      string  `json:"rope_type"`
	Type                          string  `json:"type"` // older spelling of rope_type
	Factor                        float64 `json:"factor"`
	LowFreqFactor                 float64 `json:"low_freq_factor"`
	HighFreqFactor                float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings"`
}

// hfArchs maps config.json's architectures[0] to our architecture names.
var hfArchs = map[string]string{
	"LlamaForCausalLM":   "llama",
	"MistralForCausalLM": "llama",
	"Qwen2ForCausalLM":   "qwen2",
	"Qwen3ForCausalLM":   "qwen3",
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
		return Config{}, fmt.Errorf("hf config %s: architecture %q (want LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM): %w",
			path, hc.Architectures[0], ErrUnsupported)
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
	if cfg.RopeScaling, err = hc.RopeScaling.config(path); err != nil {
		return Config{}, err
	}
	if err := checkShape(cfg); err != nil {
		return Config{}, fmt.Errorf("hf config %s: %w", path, err)
	}
	return cfg, nil
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
	default:
		return nil, fmt.Errorf("hf config %s: rope_scaling type %q (want llama3): %w", path, typ, ErrUnsupported)
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
