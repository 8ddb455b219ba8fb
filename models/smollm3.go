package models

import "fmt"

// SmolLM3 (llama.cpp's smollm3) is the Llama block with RoPE left out of
// every fourth layer ("NoPE": layers 3, 7, 11, …, where (i+1) % 4 == 0):
// those layers attend by content alone. llama.cpp fixes the interval at 4
// (n_no_rope_layer_step) and GGUF stores no key for it; Hugging Face's
// config.json spells the same layers out as no_rope_layers (1 = RoPE),
// built from no_rope_layer_interval = 4. Q and K are permuted for
// interleaved RoPE as for llama (convert_hf_to_gguf's SmolLM3Model is a
// LlamaModel). Its chat template switches reasoning with /think and
// /no_think in the system prompt; the reasoning comes back between <think>
// and </think> (ReasoningThinkTags).
const smollm3NoRopeInterval = 4

// smollm3 marks SmolLM3's NoPE layers.
func (m *metaReader) smollm3(cfg *Config) {
	cfg.NoRope = make([]bool, cfg.Layers)
	for i := range cfg.NoRope {
		cfg.NoRope[i] = (i+1)%smollm3NoRopeInterval == 0
	}
}

// smollm3 reads SmolLM3ForCausalLM's NoPE layers: no_rope_layers when
// config.json lists them, else transformers' default from
// no_rope_layer_interval (4).
func (hc *hfConfig) smollm3(cfg *Config, path string) error {
	interval := smollm3NoRopeInterval
	if hc.NoRopeLayerInterval != nil {
		interval = *hc.NoRopeLayerInterval
	}
	if interval <= 0 {
		return fmt.Errorf("hf config %s: no_rope_layer_interval %d: %w", path, interval, ErrMalformed)
	}
	cfg.NoRope = make([]bool, max(cfg.Layers, 0))
	if hc.NoRopeLayers == nil {
		for i := range cfg.NoRope {
			cfg.NoRope[i] = (i+1)%interval == 0
		}
		return nil
	}
	if len(hc.NoRopeLayers) != cfg.Layers {
		return fmt.Errorf("hf config %s: no_rope_layers has %d entries for %d layers: %w", path, len(hc.NoRopeLayers), cfg.Layers, ErrMalformed)
	}
	for i, v := range hc.NoRopeLayers {
		if v != 0 && v != 1 {
			return fmt.Errorf("hf config %s: no_rope_layers[%d] = %d (want 1: RoPE, 0: none): %w", path, i, v, ErrMalformed)
		}
		cfg.NoRope[i] = v == 0
	}
	return nil
}
