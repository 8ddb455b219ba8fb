package modeltest

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// A dense Gemma 4 Spec as a Hugging Face checkpoint (Gemma4ForCausalLM):
// Gemma 3's names with layer_output_scale.weight as layer_scalar [1], the
// E2B/E4B per-layer inputs and the 26B-A4B's router and fused experts as
// transformers names them, and
// the global layers' RoPE divisors (rope_freqs.weight) stated as
// rope_parameters.full_attention (proportional, partial_rotary_factor).

// gemma4HFParts names a Gemma 4 layer's tensors as the checkpoint does.
var gemma4HFParts = map[string]string{
	"attn_norm.weight":           "input_layernorm.weight",
	"attn_q.weight":              "self_attn.q_proj.weight",
	"attn_k.weight":              "self_attn.k_proj.weight",
	"attn_v.weight":              "self_attn.v_proj.weight",
	"attn_output.weight":         "self_attn.o_proj.weight",
	"attn_q_norm.weight":         "self_attn.q_norm.weight",
	"attn_k_norm.weight":         "self_attn.k_norm.weight",
	"post_attention_norm.weight": "post_attention_layernorm.weight",
	"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
	"ffn_gate.weight":            "mlp.gate_proj.weight",
	"ffn_up.weight":              "mlp.up_proj.weight",
	"ffn_down.weight":            "mlp.down_proj.weight",
	"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
	"layer_output_scale.weight":  "layer_scalar",
	"inp_gate.weight":            "per_layer_input_gate.weight",
	"proj.weight":                "per_layer_projection.weight",
	"post_norm.weight":           "post_per_layer_input_norm.weight",
	"ffn_gate_inp.weight":        "router.proj.weight",
	"ffn_gate_inp.scale":         "router.scale",
	"ffn_down_exps.scale":        "router.per_expert_scale",
	"ffn_gate_up_exps.weight":    "experts.gate_up_proj",
	"ffn_down_exps.weight":       "experts.down_proj",
	"pre_ffw_norm_2.weight":      "pre_feedforward_layernorm_2.weight",
	"post_ffw_norm_1.weight":     "post_feedforward_layernorm_1.weight",
	"post_ffw_norm_2.weight":     "post_feedforward_layernorm_2.weight",
}

// gemma4HFTop names the per-layer inputs' model-level tensors.
var gemma4HFTop = map[string]string{
	"per_layer_token_embd.weight": "model.embed_tokens_per_layer.weight",
	"per_layer_model_proj.weight": "model.per_layer_model_projection.weight",
	"per_layer_proj_norm.weight":  "model.per_layer_projection_norm.weight",
}

// gemma4HFTensors is hfTensors for a Gemma 4 spec.
func gemma4HFTensors(spec Spec, t tensorShape, w []float32, dtype kernels.DType) ([]Tensor, error) {
	switch {
	case spec.KVHeadsFull != spec.KVHeads && !spec.KEqV:
		// Gemma4TextConfig has no other way to give the global layers their own count.
		return nil, fmt.Errorf("modeltest: Gemma4TextConfig sets the global layers' KV heads (%d, window %d) only with attention_k_eq_v", spec.KVHeadsFull, spec.KVHeads)
	case spec.gemma4WindowLayer(spec.Layers - 1):
		return nil, fmt.Errorf("modeltest: transformers forces Gemma 4's last layer global; layer %d is a window layer", spec.Layers-1)
	}
	name := hfName(t.name, spec)
	var layer int
	var part string
	switch _, err := fmt.Sscanf(t.name, "blk.%d.%s", &layer, &part); {
	case t.name == "rope_freqs.weight":
		return nil, nil // config.json's rope_parameters (gemma4HFConfig)
	case gemma4HFTop[t.name] != "":
		name = gemma4HFTop[t.name]
	case err == nil && part == "ffn_up_exps.weight":
		return nil, nil // in experts.gate_up_proj with the gate's
	case err == nil && part == "ffn_gate_exps.weight":
		// transformers keeps each expert's gate rows then its up rows in one tensor.
		up := Weights(spec)[fmt.Sprintf("blk.%d.ffn_up_exps.weight", layer)]
		per := len(w) / spec.Experts
		var gu []float32
		for e := range spec.Experts {
			gu = append(append(gu, w[e*per:(e+1)*per]...), up[e*per:(e+1)*per]...)
		}
		w, name = gu, fmt.Sprintf("model.layers.%d.experts.gate_up_proj", layer)
		t.shape = []int{spec.Experts, 2 * t.shape[1], t.shape[2]}
	case err == nil:
		hf, ok := gemma4HFParts[part]
		if !ok {
			return nil, fmt.Errorf("modeltest: gemma4 tensor %s has no Hugging Face name", t.name)
		}
		name = fmt.Sprintf("model.layers.%d.%s", layer, hf)
	}
	data, err := quant.Quantize(dtype, w)
	if err != nil {
		return nil, fmt.Errorf("modeltest: %s: %w", t.name, err)
	}
	return []Tensor{{Name: name, DType: dtype, Shape: t.shape, Data: data}}, nil
}

// gemma4HFConfig sets a Gemma 4 spec's config.json keys as transformers'
// Gemma4TextConfig spells them (gemma4HFTensors refuses the specs it cannot
// state).
func gemma4HFConfig(spec Spec, cfg map[string]any) {
	types := make([]string, spec.Layers)
	for l := range types {
		types[l] = "full_attention"
		if spec.gemma4WindowLayer(l) {
			types[l] = "sliding_attention"
		}
	}
	prf := float32(1)
	if spec.PartialRotaryFull > 0 {
		prf = spec.PartialRotaryFull
	}
	delete(cfg, "rope_theta")
	delete(cfg, "rope_scaling")
	delete(cfg, "hidden_act")
	delete(cfg, "attention_bias")
	cfg["architectures"], cfg["model_type"] = []string{"Gemma4ForCausalLM"}, "gemma4_text"
	cfg["hidden_activation"] = "gelu_pytorch_tanh"
	cfg["head_dim"], cfg["global_head_dim"] = spec.HeadDim(), spec.HeadDimFull
	cfg["num_key_value_heads"] = spec.KVHeads
	cfg["attention_k_eq_v"] = spec.KEqV
	if spec.KEqV {
		cfg["num_global_key_value_heads"] = spec.KVHeadsFull
	}
	cfg["sliding_window"], cfg["layer_types"] = spec.Window, types
	cfg["rope_parameters"] = map[string]any{
		"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": jsonFloat(10000)},
		"full_attention": map[string]any{"rope_type": "proportional", "partial_rotary_factor": jsonFloat(prf),
			"rope_theta": jsonFloat(spec.RopeTheta)},
	}
	cfg["final_logit_softcapping"] = nil
	if spec.FinalSoftcap > 0 {
		cfg["final_logit_softcapping"] = jsonFloat(spec.FinalSoftcap)
	}
	cfg["hidden_size_per_layer_input"], cfg["vocab_size_per_layer_input"] = spec.PerLayerEmbd, spec.Vocab
	cfg["num_kv_shared_layers"], cfg["use_double_wide_mlp"] = spec.SharedKVLayers, spec.DoubleWideMLP
	cfg["enable_moe_block"] = spec.Experts > 0
	delete(cfg, "num_experts_per_tok") // Gemma4TextConfig's is top_k_experts
	if spec.Experts > 0 {
		cfg["num_experts"], cfg["top_k_experts"], cfg["moe_intermediate_size"] = spec.Experts, spec.ExpertsUsed, spec.ExpertFFN
	}
	cfg["tie_word_embeddings"] = true
}
