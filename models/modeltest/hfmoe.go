package modeltest

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// A mixture-of-experts Spec as a Hugging Face checkpoint: GGUF's stacked
// ffn_{gate,up,down}_exps [experts, …] become one tensor per expert, named
// as transformers names them,
//
//	Mixtral (arch llama):        model.layers.N.block_sparse_moe.{gate, experts.E.w1 (gate), .w3 (up), .w2 (down)}.weight
//	Qwen2/3-MoE, OLMoE:          model.layers.N.mlp.{gate, experts.E.gate_proj, .up_proj, .down_proj}.weight
//	Qwen2-MoE's shared expert:   model.layers.N.mlp.shared_expert.{gate,up,down}_proj.weight, mlp.shared_expert_gate.weight [1, hidden]
//
// and config.json says what GGUF's metadata says: the top-k weights
// renormalised where llama.cpp renormalises (Mixtral always, Qwen3-MoE by
// norm_topk_prob true; Qwen2-MoE and OLMoE false).

// hfTensors is the checkpoint's tensors for the GGUF tensor t of spec, each
// in dtype: one tensor, or a stacked expert tensor's experts.
func hfTensors(spec Spec, t tensorShape, w []float32, dtype kernels.DType) ([]Tensor, error) {
	one := func(name string, shape []int, w []float32) (Tensor, error) {
		data, err := quant.Quantize(dtype, w)
		if err != nil {
			return Tensor{}, fmt.Errorf("modeltest: %s: %w", t.name, err)
		}
		return Tensor{Name: name, DType: dtype, Shape: shape, Data: data}, nil
	}
	if spec.GPTOSS {
		return gptossHFTensors(spec, t, w, dtype)
	}
	if spec.Gemma4 {
		return gemma4HFTensors(spec, t, w, dtype)
	}
	var layer int
	var part string
	if _, err := fmt.Sscanf(t.name, "blk.%d.%s", &layer, &part); err != nil || spec.Experts == 0 || !strings.HasPrefix(part, "ffn_") {
		h, err := one(hfName(t.name, spec), t.shape, w)
		return []Tensor{h}, err
	}
	block, projs := "mlp", map[string]string{"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
	if spec.Arch() == "llama" {
		block, projs = "block_sparse_moe", map[string]string{"gate": "w1", "up": "w3", "down": "w2"}
	}
	p := fmt.Sprintf("model.layers.%d.%s.", layer, block)
	kind, _, _ := strings.Cut(strings.TrimPrefix(part, "ffn_"), "_")
	switch {
	case part == "ffn_gate_inp.weight":
		h, err := one(p+"gate.weight", t.shape, w)
		return []Tensor{h}, err
	case part == "ffn_gate_inp_shexp.weight":
		h, err := one(p+"shared_expert_gate.weight", []int{1, t.shape[0]}, w)
		return []Tensor{h}, err
	case strings.HasSuffix(part, "_shexp.weight"):
		h, err := one(p+"shared_expert."+kind+"_proj.weight", t.shape, w)
		return []Tensor{h}, err
	case strings.HasSuffix(part, "_exps.weight"):
		experts, shape := t.shape[0], t.shape[1:]
		per := len(w) / experts
		out := make([]Tensor, experts)
		for e := range experts {
			var err error
			if out[e], err = one(fmt.Sprintf("%sexperts.%d.%s.weight", p, e, projs[kind]), shape, w[e*per:(e+1)*per]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	h, err := one(hfName(t.name, spec), t.shape, w)
	return []Tensor{h}, err
}

// moeHFConfig adds a mixture's config.json keys to cfg (hfConfig's dense
// ones) as transformers' MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig and
// OlmoeConfig spell them.
func moeHFConfig(spec Spec, cfg map[string]any) {
	cfg["num_experts_per_tok"] = spec.ExpertsUsed
	qwen := func(arch, modelType string, norm bool) {
		cfg["architectures"], cfg["model_type"] = []string{arch}, modelType
		cfg["num_experts"] = spec.Experts
		cfg["moe_intermediate_size"] = spec.ExpertFFN
		cfg["norm_topk_prob"] = norm
		cfg["decoder_sparse_step"] = 1
		cfg["mlp_only_layers"] = []int{}
		cfg["use_sliding_window"] = false
	}
	switch spec.Arch() {
	case "llama":
		cfg["architectures"], cfg["model_type"] = []string{"MixtralForCausalLM"}, "mixtral"
		cfg["num_local_experts"] = spec.Experts
		cfg["intermediate_size"] = spec.ExpertFFN // Mixtral's layers are all experts, this wide
		cfg["sliding_window"] = nil
	case "qwen2moe":
		qwen("Qwen2MoeForCausalLM", "qwen2_moe", false)
		cfg["shared_expert_intermediate_size"] = spec.SharedExpertFFN
	case "qwen3moe":
		qwen("Qwen3MoeForCausalLM", "qwen3_moe", true)
	case "olmoe":
		cfg["architectures"], cfg["model_type"] = []string{"OlmoeForCausalLM"}, "olmoe"
		cfg["num_experts"] = spec.Experts
		cfg["intermediate_size"] = spec.ExpertFFN
		cfg["norm_topk_prob"] = false
		cfg["clip_qkv"] = nil
	}
}
