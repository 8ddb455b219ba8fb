package modeltest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// AssistantSpec is a tiny Gemma 4 assistant drafter (GGUF architecture
// gemma4-assistant) for a Gemma 4 Spec: Layers layers of width Hidden,
// each a window layer or a global one as Window says, with Heads query
// heads at the target's head size of that kind and feed-forward FFN.
type AssistantSpec struct {
	Hidden, Layers, Heads, FFN int
	Window                     []bool // [Layers]
	Seed                       uint64
	// DType is the matrices' type (the zero value F32); norms, the layer
	// scales and the RoPE divisors are F32 whatever it is, as the
	// converter writes them.
	DType kernels.DType
}

// WriteGemma4Assistant writes a for target as convert_hf_to_gguf.py's
// Gemma4AssistantModel would: random weights (matrices in a.DType), plain
// norms (Gemma 4's converter adds no 1), embedding_length_out = the
// target's hidden size,
// the target's KV head counts per layer kind, proportional RoPE divisors
// turning the first quarter of the global heads' pairs, and the tiny
// vocabulary.
func WriteGemma4Assistant(path string, a AssistantSpec, target Spec) error {
	t := target.withDefaults()
	tensors, err := assistantTensors(a, t)
	if err != nil {
		return err
	}
	hdSWA, hd := t.HeadDim(), t.HeadDimFull
	kvHeads := make([]int32, a.Layers)
	for l := range a.Layers {
		kvHeads[l] = int32(t.KVHeadsFull)
		if a.Window[l] {
			kvHeads[l] = int32(t.KVHeads)
		}
	}
	divs := make([]float32, hd/2) // proportional RoPE: the first quarter of the pairs turn
	for i := range divs {
		divs[i] = 1
		if i >= hd/8 {
			divs[i] = 1e30
		}
	}
	data, _ := quant.Quantize(kernels.F32, divs)
	tensors = append(tensors, Tensor{Name: "rope_freqs.weight", DType: kernels.F32, Shape: []int{hd / 2}, Data: data})
	p := "gemma4-assistant."
	meta := []KV{
		{"general.architecture", "gemma4-assistant"},
		{"general.name", "modeltest-assistant"},
		{p + "block_count", uint32(a.Layers)},
		{p + "nextn_predict_layers", uint32(a.Layers)},
		{p + "context_length", uint32(t.ContextLen)},
		{p + "embedding_length", uint32(a.Hidden)},
		{p + "embedding_length_out", uint32(t.Hidden)},
		{p + "feed_forward_length", uint32(a.FFN)},
		{p + "attention.head_count", uint32(a.Heads)},
		{p + "attention.head_count_kv", kvHeads},
		{p + "attention.key_length", uint32(hd)},
		{p + "attention.value_length", uint32(hd)},
		{p + "attention.key_length_swa", uint32(hdSWA)},
		{p + "attention.value_length_swa", uint32(hdSWA)},
		{p + "rope.dimension_count", uint32(hd)},
		{p + "rope.dimension_count_swa", uint32(hdSWA)},
		{p + "rope.freq_base", t.RopeTheta},
		{p + "rope.freq_base_swa", float32(10000)},
		{p + "attention.sliding_window", uint32(t.Window)},
		{p + "attention.sliding_window_pattern", a.Window},
		{p + "attention.layer_norm_rms_epsilon", t.RMSEps},
	}
	meta = append(meta, ggufVocab(t.Vocab)...)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	if err := EncodeGGUF(f, meta, tensors, 0); err != nil {
		f.Close()
		return fmt.Errorf("modeltest: write %s: %w", path, err)
	}
	return f.Close()
}

// assistantTensors are a's weights under their GGUF names, drawn in one
// order for both formats (the RoPE divisors are not among them: GGUF
// stores them, a checkpoint's config.json says them).
func assistantTensors(a AssistantSpec, t Spec) ([]Tensor, error) {
	if !t.Gemma4 || len(a.Window) != a.Layers || a.Layers <= 0 {
		return nil, fmt.Errorf("modeltest: assistant of %d layers (%d kinds) for a target that is not Gemma 4 (%v)", a.Layers, len(a.Window), t.Gemma4)
	}
	r := rand.New(rand.NewPCG(a.Seed, a.Seed^0x5eed))
	hdSWA, hd := t.HeadDim(), t.HeadDimFull
	var tensors []Tensor
	var err error
	add := func(name string, dt kernels.DType, scale, base float32, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = base + scale*float32(r.NormFloat64())
		}
		data, qerr := quant.Quantize(dt, v)
		if err == nil && qerr != nil {
			err = fmt.Errorf("modeltest: %s %v as %v: %w", name, shape, dt, qerr)
		}
		tensors = append(tensors, Tensor{Name: name, DType: dt, Shape: shape, Data: data})
	}
	mat := func(name string, rows, cols int) {
		add(name, a.DType, float32(1/math.Sqrt(float64(cols))), 0, rows, cols)
	}
	norm := func(name string, n int) { add(name, kernels.F32, 0.1, 1, n) }
	mat("token_embd.weight", t.Vocab, a.Hidden)
	norm("output_norm.weight", a.Hidden)
	mat("nextn.pre_projection.weight", a.Hidden, 2*t.Hidden)
	mat("nextn.post_projection.weight", t.Hidden, a.Hidden)
	for l := range a.Layers {
		p, h := fmt.Sprintf("blk.%d.", l), hd
		if a.Window[l] {
			h = hdSWA
		}
		norm(p+"attn_norm.weight", a.Hidden)
		mat(p+"attn_q.weight", a.Heads*h, a.Hidden)
		norm(p+"attn_q_norm.weight", h)
		mat(p+"attn_output.weight", a.Hidden, a.Heads*h)
		norm(p+"post_attention_norm.weight", a.Hidden)
		norm(p+"ffn_norm.weight", a.Hidden)
		mat(p+"ffn_gate.weight", a.FFN, a.Hidden)
		mat(p+"ffn_up.weight", a.FFN, a.Hidden)
		mat(p+"ffn_down.weight", a.Hidden, a.FFN)
		norm(p+"post_ffw_norm.weight", a.Hidden)
		add(p+"layer_output_scale.weight", kernels.F32, 0.1, 0.8, 1)
	}
	return tensors, err
}

// WriteGemma4AssistantHF writes a for target as a Hugging Face checkpoint
// (Gemma4AssistantForCausalLM: config.json with the text model's config in
// text_config and backbone_hidden_size, model.safetensors, the tiny
// tokenizer), with the weights WriteGemma4Assistant writes: the same
// values, under transformers' names; the global layers' RoPE is
// rope_parameters' proportional quarter.
func WriteGemma4AssistantHF(dir string, a AssistantSpec, target Spec) error {
	t := target.withDefaults()
	if _, ok := hfDTypes[a.DType]; !ok {
		return fmt.Errorf("modeltest: safetensors dtype %v (want F32, F16 or BF16)", a.DType)
	}
	if a.Layers > 0 && len(a.Window) == a.Layers && a.Window[a.Layers-1] {
		return fmt.Errorf("modeltest: a checkpoint's last layer is global (transformers forces it), not a window layer")
	}
	tensors, err := assistantTensors(a, t)
	if err != nil {
		return err
	}
	for i := range tensors {
		tensors[i].Name = assistantHFName(tensors[i].Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors); err != nil {
		return err
	}
	types := make([]string, a.Layers)
	for l, w := range a.Window {
		types[l] = "full_attention"
		if w {
			types[l] = "sliding_attention"
		}
	}
	cfg := map[string]any{
		"architectures":          []string{"Gemma4AssistantForCausalLM"},
		"model_type":             "gemma4_assistant",
		"backbone_hidden_size":   t.Hidden,
		"use_ordered_embeddings": false,
		"tie_word_embeddings":    true,
		"text_config": map[string]any{
			"model_type":                  "gemma4_text",
			"hidden_size":                 a.Hidden,
			"intermediate_size":           a.FFN,
			"num_hidden_layers":           a.Layers,
			"num_attention_heads":         a.Heads,
			"num_key_value_heads":         t.KVHeads,
			"num_global_key_value_heads":  t.KVHeadsFull,
			"attention_k_eq_v":            t.KEqV,
			"head_dim":                    t.HeadDim(),
			"global_head_dim":             t.HeadDimFull,
			"vocab_size":                  t.Vocab,
			"max_position_embeddings":     t.ContextLen,
			"rms_norm_eps":                jsonFloat(t.RMSEps),
			"sliding_window":              t.Window,
			"layer_types":                 types,
			"hidden_activation":           "gelu_pytorch_tanh",
			"hidden_size_per_layer_input": 0,
			"num_kv_shared_layers":        a.Layers,
			"tie_word_embeddings":         true,
			"rope_parameters": map[string]any{
				"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000},
				"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": jsonFloat(t.RopeTheta)},
			},
		},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	}
	if err == nil {
		raw, err = tokenizerJSON(t.Vocab)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer.json"), raw, 0o644)
	}
	if err == nil {
		raw, err = tokenizerConfigJSON(t.ContextLen)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644)
	}
	if err != nil {
		return fmt.Errorf("modeltest: %s: %w", dir, err)
	}
	return nil
}

// assistantHFName is a GGUF assistant tensor's transformers name.
func assistantHFName(name string) string {
	top := map[string]string{
		"token_embd.weight":            "model.embed_tokens.weight",
		"output_norm.weight":           "model.norm.weight",
		"nextn.pre_projection.weight":  "pre_projection.weight",
		"nextn.post_projection.weight": "post_projection.weight",
	}
	if n, ok := top[name]; ok {
		return n
	}
	parts := map[string]string{
		"attn_norm.weight":           "input_layernorm.weight",
		"attn_q.weight":              "self_attn.q_proj.weight",
		"attn_q_norm.weight":         "self_attn.q_norm.weight",
		"attn_output.weight":         "self_attn.o_proj.weight",
		"post_attention_norm.weight": "post_attention_layernorm.weight",
		"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
		"ffn_gate.weight":            "mlp.gate_proj.weight",
		"ffn_up.weight":              "mlp.up_proj.weight",
		"ffn_down.weight":            "mlp.down_proj.weight",
		"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
		"layer_output_scale.weight":  "layer_scalar",
	}
	var l int
	var part string
	if _, err := fmt.Sscanf(name, "blk.%d.%s", &l, &part); err == nil {
		if p, ok := parts[part]; ok {
			return fmt.Sprintf("model.layers.%d.%s", l, p)
		}
	}
	return name
}
