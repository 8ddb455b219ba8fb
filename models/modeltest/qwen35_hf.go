package modeltest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// WriteQwen35HF writes spec as a Hugging Face Qwen3_5ForCausalLM directory
// (config.json, model.safetensors, tokenizer files), every tensor in dtype
// (F32, F16 or BF16): the model WriteQwen35GGUF writes, undone as llama.cpp's
// convert_hf_to_gguf does it: the zero-centred norms as w − 1 (the gated
// norm as is), ssm_a as A_log = ln(−a), the convolution [C, 1, K], and the
// value heads in transformers' grouped order (GGUF head j·Hk + k is
// checkpoint head k·(Hv/Hk) + j). A mixture (Qwen3_5MoeForCausalLM) is
// written one tensor per expert, as Qwen's releases are, with
// FusedExperts as transformers 5 saves it (mlp.experts.gate_up_proj
// [E, 2·ffn, hidden], gate rows first, and down_proj [E, hidden, ffn]).
// The MTP block (spec.MTP) is written as Qwen's mtp.*: its layer as
// mtp.layers.0.*, nextn.eh_proj as mtp.fc, enorm and hnorm as
// mtp.pre_fc_norm_embedding and _hidden, shared_head_norm as mtp.norm, and
// config.json's mtp_num_hidden_layers.
func WriteQwen35HF(dir string, spec Qwen35Spec, dtype kernels.DType) error {
	return writeQwen35HF(dir, spec, dtype, false)
}

// WriteQwen35HFFused is WriteQwen35HF with a mixture's experts fused.
func WriteQwen35HFFused(dir string, spec Qwen35Spec, dtype kernels.DType) error {
	return writeQwen35HF(dir, spec, dtype, true)
}

func writeQwen35HF(dir string, spec Qwen35Spec, dtype kernels.DType, fused bool) error {
	s := spec.withDefaults()
	if _, ok := hfDTypes[dtype]; !ok || dtype == u8 {
		return fmt.Errorf("modeltest: safetensors dtype %v (want F32, F16 or BF16)", dtype)
	}
	hk, hv, S := s.KHeads, s.VHeads, s.StateSize
	if hk <= 0 || hv%hk != 0 {
		return fmt.Errorf("modeltest: invalid qwen35 spec %+v", s)
	}
	// grouped[g] is the GGUF head that checkpoint head g holds.
	grouped := make([]int, hv)
	for t := range hv {
		grouped[(t%hk)*(hv/hk)+t/hk] = t
	}
	// heads reorders n blocks of unit floats after lead floats.
	heads := func(w []float32, lead, unit int) []float32 {
		out := append([]float32(nil), w...)
		for g, t := range grouped {
			copy(out[lead+g*unit:lead+(g+1)*unit], w[lead+t*unit:lead+(t+1)*unit])
		}
		return out
	}
	names := map[string]string{
		"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
		"attn_qkv.weight": "linear_attn.in_proj_qkv.weight", "attn_gate.weight": "linear_attn.in_proj_z.weight",
		"ssm_conv1d.weight": "linear_attn.conv1d.weight", "ssm_dt.bias": "linear_attn.dt_bias", "ssm_a": "linear_attn.A_log",
		"ssm_beta.weight": "linear_attn.in_proj_b.weight", "ssm_alpha.weight": "linear_attn.in_proj_a.weight",
		"ssm_norm.weight": "linear_attn.norm.weight", "ssm_out.weight": "linear_attn.out_proj.weight",
		"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
		"attn_output.weight": "self_attn.o_proj.weight", "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
		"ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
		"ffn_gate_inp.weight": "mlp.gate.weight", "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
		"ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight", "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
		"ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
	}
	var tensors []Tensor
	add := func(name string, shape []int, w []float32) error {
		data, err := quant.Quantize(dtype, w)
		if err != nil {
			return fmt.Errorf("modeltest: %s: %w", name, err)
		}
		tensors = append(tensors, Tensor{Name: name, DType: dtype, Shape: shape, Data: data})
		return nil
	}
	for _, ts := range qwen35Tensors(s) {
		w, shape := qwen35Weight(s, ts), ts.shape
		if kind, ok := strings.CutSuffix(ts.name, "_exps.weight"); ok {
			var layer int
			var proj string
			if _, err := fmt.Sscanf(kind, "blk.%d.ffn_%s", &layer, &proj); err != nil {
				return fmt.Errorf("modeltest: %s: %w", ts.name, err)
			}
			p := fmt.Sprintf("model.layers.%d.mlp.experts.", layer)
			if layer == s.Layers {
				p = "mtp.layers.0.mlp.experts."
			}
			switch {
			case fused && proj == "gate":
				up := qwen35Weight(s, tensorShape{strings.Replace(ts.name, "gate_exps", "up_exps", 1), ts.shape})
				per := len(w) / s.Experts
				var gu []float32
				for e := range s.Experts {
					gu = append(append(gu, w[e*per:(e+1)*per]...), up[e*per:(e+1)*per]...)
				}
				if err := add(p+"gate_up_proj", []int{s.Experts, 2 * ts.shape[1], ts.shape[2]}, gu); err != nil {
					return err
				}
			case fused && proj == "down":
				if err := add(p+"down_proj", ts.shape, w); err != nil {
					return err
				}
			case !fused:
				per := len(w) / s.Experts
				for e := range s.Experts {
					if err := add(fmt.Sprintf("%s%d.%s_proj.weight", p, e, proj), ts.shape[1:], w[e*per:(e+1)*per]); err != nil {
						return err
					}
				}
			}
			continue
		}
		if strings.HasSuffix(ts.name, "ffn_gate_inp_shexp.weight") {
			shape = []int{1, ts.shape[0]} // a Linear(hidden, 1)
		}
		var name string
		switch ts.name {
		case "token_embd.weight":
			name = "model.embed_tokens.weight"
		case "output_norm.weight":
			name = "model.norm.weight"
		case "output.weight":
			name = "lm_head.weight"
		default:
			var layer int
			var part string
			mtp := map[string]string{"nextn.eh_proj.weight": "mtp.fc.weight", "nextn.enorm.weight": "mtp.pre_fc_norm_embedding.weight",
				"nextn.hnorm.weight": "mtp.pre_fc_norm_hidden.weight", "nextn.shared_head_norm.weight": "mtp.norm.weight"}
			if _, err := fmt.Sscanf(ts.name, "blk.%d.%s", &layer, &part); err != nil || names[part] == "" && mtp[part] == "" {
				return fmt.Errorf("modeltest: qwen35 tensor %s has no Hugging Face name", ts.name)
			}
			name = fmt.Sprintf("model.layers.%d.%s", layer, names[part])
			if layer == s.Layers {
				name = cmp.Or(mtp[part], "mtp.layers.0."+names[part])
			}
			cols := ts.shape[len(ts.shape)-1]
			switch part {
			case "attn_qkv.weight":
				w = heads(w, 2*hk*S*cols, S*cols)
			case "attn_gate.weight":
				w = heads(w, 0, S*cols)
			case "ssm_beta.weight", "ssm_alpha.weight":
				w = heads(w, 0, cols)
			case "ssm_dt.bias":
				w = heads(w, 0, 1)
			case "ssm_a":
				w = heads(w, 0, 1)
				for i, a := range w {
					w[i] = float32(math.Log(float64(-a)))
				}
			case "ssm_conv1d.weight":
				w = heads(w, 2*hk*S*cols, S*cols)
				shape = []int{ts.shape[0], 1, cols}
			case "ssm_out.weight":
				out := make([]float32, 0, len(w))
				for r := range ts.shape[0] {
					out = append(out, heads(w[r*cols:(r+1)*cols], 0, S)...)
				}
				w = out
			}
		}
		if strings.HasSuffix(ts.name, "norm.weight") && !strings.HasSuffix(ts.name, "ssm_norm.weight") {
			shifted := make([]float32, len(w))
			for i, v := range w {
				shifted[i] = v - 1
			}
			w = shifted
		}
		if err := add(name, shape, w); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors); err != nil {
		return err
	}
	types := make([]string, s.Layers)
	for i := range types {
		types[i] = "full_attention"
		if s.Recurrent(i) {
			types[i] = "linear_attention"
		}
	}
	r := s.RopeDims / 2
	cfg := map[string]any{
		"architectures": []string{"Qwen3_5ForCausalLM"}, "model_type": "qwen3_5_text",
		"vocab_size": s.Vocab, "hidden_size": s.Hidden, "intermediate_size": s.FFN, "num_hidden_layers": s.Layers,
		"num_attention_heads": s.Heads, "num_key_value_heads": s.KVHeads, "head_dim": s.HeadDim,
		"max_position_embeddings": s.ContextLen, "rms_norm_eps": jsonFloat(s.RMSEps), "hidden_act": "silu",
		"tie_word_embeddings": s.Tied, "attention_bias": false, "layer_types": types,
		"linear_conv_kernel_dim": s.ConvKernel, "linear_key_head_dim": S, "linear_value_head_dim": S,
		"linear_num_key_heads": hk, "linear_num_value_heads": hv,
		"rope_parameters": map[string]any{
			"rope_type": "default", "rope_theta": jsonFloat(s.RopeTheta),
			"partial_rotary_factor": jsonFloat(float32(s.RopeDims) / float32(s.HeadDim)),
			"mrope_section":         []int{r - 2*(r/3), r / 3, r / 3}, "mrope_interleaved": true,
		},
		"torch_dtype":  map[kernels.DType]string{kernels.F32: "float32", kernels.F16: "float16", kernels.BF16: "bfloat16"}[dtype],
		"bos_token_id": BOSID, "eos_token_id": EOSID,
	}
	if s.MTP {
		cfg["mtp_num_hidden_layers"] = 1
	}
	if s.Experts > 0 {
		delete(cfg, "intermediate_size")
		cfg["architectures"], cfg["model_type"] = []string{"Qwen3_5MoeForCausalLM"}, "qwen3_5_moe_text"
		cfg["num_experts"], cfg["num_experts_per_tok"] = s.Experts, s.ExpertsUsed
		cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"] = s.ExpertFFN, s.SharedFFN
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("modeltest: config.json: %w", err)
	}
	tok, err := tokenizerJSON(s.Vocab)
	if err != nil {
		return err
	}
	tokCfg, err := tokenizerConfigJSON(s.ContextLen)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"config.json": raw, "tokenizer.json": tok, "tokenizer_config.json": tokCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("modeltest: %s: %w", name, err)
		}
	}
	return nil
}
