package modeltest

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// A gpt-oss Spec as a Hugging Face checkpoint (GptOssForCausalLM), laid out
// as openai/gpt-oss-20b and transformers' GptOssExperts have it: each
// layer's experts fused into four tensors,
//
//	mlp.experts.gate_up_proj       [experts, hidden, 2·ffn]  gate in the even columns, up in the odd
//	mlp.experts.gate_up_proj_bias  [experts, 2·ffn]          likewise interleaved
//	mlp.experts.down_proj          [experts, ffn, hidden]    (GGUF's ffn_down_exps transposed)
//	mlp.experts.down_proj_bias     [experts, hidden]
//
// or, with ExpertsMXFP4, the release's MXFP4 form of both matrices, as the
// rows a Linear would hold (gate and up rows interleaved, down untransposed):
//
//	mlp.experts.gate_up_proj_blocks [experts, 2·ffn, hidden/32, 16] U8, _scales [experts, 2·ffn, hidden/32] U8
//	mlp.experts.down_proj_blocks    [experts, hidden, ffn/32, 16] U8,   _scales [experts, hidden, ffn/32] U8
//
// each block's byte k holding elements 2k (low nibble) and 2k+1 (high), the
// scale byte an E8M0 exponent; the values are the ones WriteGGUF's MXFP4
// experts hold, so both files carry the same model.

// u8 is a safetensors-only element type: raw bytes (MXFP4 blocks and scales).
const u8 = kernels.DType(1<<31 | 8)

func init() { hfDTypes[u8] = "U8" }

// gptossHFParts names a gpt-oss layer's unfused tensors as the checkpoint does.
var gptossHFParts = map[string]string{
	"attn_norm.weight":           "input_layernorm.weight",
	"attn_q.weight":              "self_attn.q_proj.weight",
	"attn_q.bias":                "self_attn.q_proj.bias",
	"attn_k.weight":              "self_attn.k_proj.weight",
	"attn_k.bias":                "self_attn.k_proj.bias",
	"attn_v.weight":              "self_attn.v_proj.weight",
	"attn_v.bias":                "self_attn.v_proj.bias",
	"attn_output.weight":         "self_attn.o_proj.weight",
	"attn_output.bias":           "self_attn.o_proj.bias",
	"attn_sinks.weight":          "self_attn.sinks",
	"post_attention_norm.weight": "post_attention_layernorm.weight",
	"ffn_gate_inp.weight":        "mlp.router.weight",
	"ffn_gate_inp.bias":          "mlp.router.bias",
}

// gptossHFTensors is hfTensors for a gpt-oss spec: the gate tensors carry
// the fused gate_up ones, the up tensors none.
func gptossHFTensors(spec Spec, t tensorShape, w []float32, dtype kernels.DType) ([]Tensor, error) {
	one := func(name string, shape []int, w []float32, dt kernels.DType) ([]Tensor, error) {
		data, err := quant.Quantize(dt, w)
		if err != nil {
			return nil, fmt.Errorf("modeltest: %s: %w", t.name, err)
		}
		return []Tensor{{Name: name, DType: dt, Shape: shape, Data: data}}, nil
	}
	var layer int
	var part string
	if _, err := fmt.Sscanf(t.name, "blk.%d.%s", &layer, &part); err != nil {
		return one(hfName(t.name, spec), t.shape, w, dtype)
	}
	p := fmt.Sprintf("model.layers.%d.", layer)
	if hf, ok := gptossHFParts[part]; ok {
		return one(p+hf, t.shape, w, dtype)
	}
	e, f, hidden := spec.Experts, spec.ExpertFFN, spec.Hidden
	up := func() []float32 { return Weights(spec)[strings.Replace(t.name, "ffn_gate_exps", "ffn_up_exps", 1)] }
	x := p + "mlp.experts."
	switch part {
	case "ffn_up_exps.weight", "ffn_up_exps.bias":
		return nil, nil // in gate_up_proj
	case "ffn_gate_exps.bias":
		return one(x+"gate_up_proj_bias", []int{e, 2 * f}, interleaveRows(w, up(), e*f, 1), dtype)
	case "ffn_down_exps.bias":
		return one(x+"down_proj_bias", []int{e, hidden}, w, dtype)
	case "ffn_gate_exps.weight":
		rows := interleaveRows(w, up(), e*f, hidden) // [e, 2f, hidden]: a Linear's rows
		if spec.ExpertsMXFP4 {
			return mxfp4HF(x+"gate_up_proj", rows, []int{e, 2 * f, hidden})
		}
		return one(x+"gate_up_proj", []int{e, hidden, 2 * f}, transposeLast(rows, e, 2*f, hidden), dtype)
	case "ffn_down_exps.weight":
		if spec.ExpertsMXFP4 {
			return mxfp4HF(x+"down_proj", w, []int{e, hidden, f})
		}
		return one(x+"down_proj", []int{e, f, hidden}, transposeLast(w, e, hidden, f), dtype)
	}
	return nil, fmt.Errorf("modeltest: gpt-oss tensor %s has no Hugging Face name", t.name)
}

// interleaveRows puts a's row i at 2i and b's at 2i+1 (rows of cols).
func interleaveRows(a, b []float32, rows, cols int) []float32 {
	out := make([]float32, 2*rows*cols)
	for i := range rows {
		copy(out[(2*i)*cols:], a[i*cols:(i+1)*cols])
		copy(out[(2*i+1)*cols:], b[i*cols:(i+1)*cols])
	}
	return out
}

// transposeLast transposes each of n [r, c] matrices to [c, r].
func transposeLast(w []float32, n, r, c int) []float32 {
	out := make([]float32, len(w))
	for m := range n {
		for i := range r {
			for j := range c {
				out[m*r*c+j*r+i] = w[m*r*c+i*c+j]
			}
		}
	}
	return out
}

// mxfp4HF writes rows [experts, rows, cols] as the release's _blocks and
// _scales: ggml's MXFP4 quantization of the rows (what WriteGGUF stores),
// each 32-element block's codes regrouped from ggml's order (byte j: elements
// j and j+16) to the checkpoint's (byte k: elements 2k and 2k+1).
func mxfp4HF(name string, w []float32, shape []int) ([]Tensor, error) {
	cols := shape[2]
	if cols%32 != 0 {
		return nil, fmt.Errorf("modeltest: %s: rows of %d are not whole MXFP4 blocks", name, cols)
	}
	q, err := quant.Quantize(kernels.MXFP4, w)
	if err != nil {
		return nil, fmt.Errorf("modeltest: %s: %w", name, err)
	}
	nb := len(q) / quant.MXFP4BlockBytes
	blocks, scales := make([]byte, 16*nb), make([]byte, nb)
	for b := range nb {
		blk := q[b*quant.MXFP4BlockBytes : (b+1)*quant.MXFP4BlockBytes]
		scales[b] = blk[0]
		var codes [32]byte
		for j := range 16 {
			codes[j], codes[j+16] = blk[1+j]&0xf, blk[1+j]>>4
		}
		for k := range 16 {
			blocks[16*b+k] = codes[2*k] | codes[2*k+1]<<4
		}
	}
	g := cols / 32
	return []Tensor{
		{Name: name + "_blocks", DType: u8, Shape: []int{shape[0], shape[1], g, 16}, Data: blocks},
		{Name: name + "_scales", DType: u8, Shape: []int{shape[0], shape[1], g}, Data: scales},
	}, nil
}

// gptossHFConfig sets a gpt-oss spec's config.json keys as transformers'
// GptOssConfig spells them. YaRN is written with transformers' default
// truncate (true: the correction range's ends rounded out, as GGUF's YaRN
// does); without YaRN the RoPE is stated as default, since GptOssConfig's
// own default is YaRN.
func gptossHFConfig(spec Spec, cfg map[string]any) {
	cfg["architectures"], cfg["model_type"] = []string{"GptOssForCausalLM"}, "gpt_oss"
	cfg["num_local_experts"] = spec.Experts
	cfg["intermediate_size"] = spec.ExpertFFN
	cfg["sliding_window"] = spec.Window
	cfg["attention_bias"] = true
	cfg["swiglu_limit"] = jsonFloat(7)
	cfg["router_aux_loss_coef"] = jsonFloat(0.9)
	cfg["output_router_logits"] = false
	types := make([]string, spec.Layers)
	for i := range types {
		types[i] = "full_attention"
		if i%2 == 0 {
			types[i] = "sliding_attention"
		}
	}
	cfg["layer_types"] = types
	if y := spec.YaRN; y != nil {
		cfg["rope_scaling"] = map[string]any{
			"rope_type": "yarn", "factor": jsonFloat(y.Factor), "beta_fast": jsonFloat(32), "beta_slow": jsonFloat(1),
			"original_max_position_embeddings": y.OriginalContext,
		}
	} else {
		delete(cfg, "rope_scaling")
		delete(cfg, "rope_theta")
		cfg["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": jsonFloat(spec.RopeTheta)}
	}
	if spec.ExpertsMXFP4 {
		cfg["quantization_config"] = map[string]any{
			"quant_method":           "mxfp4",
			"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"},
		}
	}
}
