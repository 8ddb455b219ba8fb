package modeltest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// WriteGGUF writes spec as a GGUF file as llama.cpp's converter would: weight
// matrices (token_embd included) in dtype, norms and biases F32, Q and K rows
// permuted for interleaved RoPE when the arch is llama, Llama 3 scaling as
// rope_freqs.weight, and the tiny vocabulary. Every matrix's row length must
// be a multiple of dtype's block.
func WriteGGUF(path string, spec Spec, dtype kernels.DType) error {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return err
	}
	if !dtype.Known() {
		return fmt.Errorf("modeltest: unknown dtype %v", dtype)
	}
	weights := Weights(spec)
	hd := spec.HeadDim()
	var tensors []Tensor
	for _, ts := range tensorList(spec) {
		w := weights[ts.name]
		if a := spec.Arch(); a == "llama" || a == "smollm3" {
			switch {
			case strings.HasSuffix(ts.name, "attn_q.weight"):
				w = PermuteQK(w, spec.Heads, hd, spec.Hidden)
			case strings.HasSuffix(ts.name, "attn_k.weight"):
				w = PermuteQK(w, spec.KVHeads, hd, spec.Hidden)
			}
		}
		dt := dtype
		if spec.GPTOSS {
			dt = gptossDType(spec, ts.name, dt)
		}
		if len(ts.shape) == 1 {
			dt = kernels.F32
		}
		if spec.Gemma && isNorm(ts.name) { // as convert_hf_to_gguf stores Gemma's norms
			shifted := make([]float32, len(w))
			for i, v := range w {
				shifted[i] = 1 + v
			}
			w = shifted
		}
		if cols := ts.shape[len(ts.shape)-1]; cols%dt.BlockElems() != 0 {
			return fmt.Errorf("modeltest: %s: rows of %d are not a multiple of %v's block of %d", ts.name, cols, dt, dt.BlockElems())
		}
		// Rows are whole blocks, so quantizing the flat tensor quantizes each row.
		data, err := quant.Quantize(dt, w)
		if err != nil {
			return fmt.Errorf("modeltest: %s %v as %v: %w", ts.name, ts.shape, dt, err)
		}
		tensors = append(tensors, Tensor{Name: ts.name, DType: dt, Shape: ts.shape, Data: data})
	}
	if rs := spec.RopeScaling; rs != nil {
		data, _ := quant.Quantize(kernels.F32, RopeFactors(spec.RopeTheta, hd, *rs))
		tensors = append(tensors, Tensor{Name: "rope_freqs.weight", DType: kernels.F32, Shape: []int{hd / 2}, Data: data})
	}
	a := spec.Arch() + "."
	meta := []KV{
		{"general.architecture", spec.Arch()},
		{"general.name", "modeltest"},
		{a + "block_count", uint32(spec.Layers)},
		{a + "context_length", uint32(spec.ContextLen)},
		{a + "embedding_length", uint32(spec.Hidden)},
		{a + "feed_forward_length", uint32(spec.FFN)},
		{a + "attention.head_count", uint32(spec.Heads)},
		{a + "attention.head_count_kv", uint32(spec.KVHeads)},
		{a + "rope.freq_base", spec.RopeTheta},
		{a + "attention.layer_norm_rms_epsilon", spec.RMSEps},
		{a + "vocab_size", uint32(spec.Vocab)},
		{a + "rope.dimension_count", uint32(spec.RopeDims)},
	}
	if spec.Phi3 {
		if spec.Window > 0 {
			meta = append(meta, KV{a + "attention.sliding_window", uint32(spec.Window)})
		}
		if lr := spec.LongRoPE; lr != nil {
			meta = append(meta, KV{a + "rope.scaling.original_context_length", uint32(lr.OriginalContext)},
				KV{a + "rope.scaling.attn_factor", lr.AttnFactor(spec.ContextLen)})
		}
	}
	if spec.Gemma {
		meta = append(meta, KV{a + "attention.key_length", uint32(hd)}, KV{a + "attention.value_length", uint32(hd)})
		switch {
		case spec.Gemma2:
			// Gemma 2's default window is 4096: the key is always written.
			meta = append(meta, KV{a + "attention.sliding_window", uint32(spec.Window)},
				KV{a + "attn_logit_softcapping", spec.AttnSoftcap}, KV{a + "final_logit_softcapping", spec.FinalSoftcap})
		case spec.Window > 0:
			meta = append(meta, KV{a + "attention.sliding_window", uint32(spec.Window)},
				KV{a + "attention.sliding_window_pattern", uint32(spec.WindowPattern)})
		}
	}
	if spec.Gemma4 {
		meta = gemma4Meta(spec, meta)
	}
	if spec.GPTOSS {
		meta = gptossMeta(spec, meta)
	}
	if spec.Experts > 0 {
		meta = append(meta, KV{a + "expert_count", uint32(spec.Experts)}, KV{a + "expert_used_count", uint32(spec.ExpertsUsed)},
			KV{a + "expert_feed_forward_length", uint32(spec.ExpertFFN)})
		if spec.SharedExpertFFN > 0 {
			meta = append(meta, KV{a + "expert_shared_feed_forward_length", uint32(spec.SharedExpertFFN)})
		}
	}
	if spec.Harmony {
		meta = append(meta, harmonyVocab(spec.Vocab)...)
	} else {
		meta = append(meta, ggufVocab(spec.Vocab)...)
	}
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

// hfName is the Hugging Face checkpoint name of a GGUF tensor name in spec.
func hfName(name string, spec Spec) string {
	switch name {
	case "token_embd.weight":
		return "model.embed_tokens.weight"
	case "output_norm.weight":
		return "model.norm.weight"
	case "output.weight":
		return "lm_head.weight"
	}
	var layer int
	var part string
	if _, err := fmt.Sscanf(name, "blk.%d.%s", &layer, &part); err != nil {
		return name
	}
	parts := map[string]string{
		"attn_norm.weight":   "input_layernorm.weight",
		"attn_q.weight":      "self_attn.q_proj.weight",
		"attn_k.weight":      "self_attn.k_proj.weight",
		"attn_v.weight":      "self_attn.v_proj.weight",
		"attn_q.bias":        "self_attn.q_proj.bias",
		"attn_k.bias":        "self_attn.k_proj.bias",
		"attn_v.bias":        "self_attn.v_proj.bias",
		"attn_output.weight": "self_attn.o_proj.weight",
		"attn_q_norm.weight": "self_attn.q_norm.weight",
		"attn_k_norm.weight": "self_attn.k_norm.weight",
		"ffn_norm.weight":    "post_attention_layernorm.weight",
		"ffn_gate.weight":    "mlp.gate_proj.weight",
		"ffn_up.weight":      "mlp.up_proj.weight",
		"ffn_down.weight":    "mlp.down_proj.weight",
	}
	if spec.Phi3 {
		parts["attn_qkv.weight"] = "self_attn.qkv_proj.weight"
		parts["ffn_up.weight"] = "mlp.gate_up_proj.weight"
	}
	if spec.Gemma {
		parts["post_attention_norm.weight"] = "post_attention_layernorm.weight"
		parts["ffn_norm.weight"] = "pre_feedforward_layernorm.weight"
		parts["post_ffw_norm.weight"] = "post_feedforward_layernorm.weight"
	}
	return fmt.Sprintf("model.layers.%d.%s", layer, parts[part])
}

var hfDTypes = map[kernels.DType]string{kernels.F32: "F32", kernels.F16: "F16", kernels.BF16: "BF16"}

// WriteHF writes spec as a Hugging Face directory: config.json, safetensors
// (sharded over spec.HFShards files with an index when above 1), tokenizer.json
// and tokenizer_config.json. Weights are unpermuted, every tensor in dtype
// (F32, F16 or BF16).
func WriteHF(dir string, spec Spec, dtype kernels.DType) error {
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return err
	}
	if _, ok := hfDTypes[dtype]; !ok {
		return fmt.Errorf("modeltest: safetensors dtype %v (want F32, F16 or BF16)", dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	weights := Weights(spec)
	list := tensorList(spec)
	shards := max(spec.HFShards, 1)
	per := (len(list) + shards - 1) / shards
	weightMap := map[string]string{}
	var total int
	for s := range shards {
		file := "model.safetensors"
		if shards > 1 {
			file = fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, shards)
		}
		var ts []Tensor
		for _, t := range list[min(s*per, len(list)):min((s+1)*per, len(list))] {
			if strings.HasPrefix(t.name, "rope_factors_") {
				continue // Phi-3's LongRoPE factors are config.json's (phi3HFConfig)
			}
			hts, err := hfTensors(spec, t, weights[t.name], dtype)
			if err != nil {
				return err
			}
			for _, ht := range hts {
				ts = append(ts, ht)
				weightMap[ht.Name] = file
				total += len(ht.Data)
			}
		}
		if err := WriteSafetensors(filepath.Join(dir, file), ts); err != nil {
			return err
		}
	}
	files := map[string]any{
		"config.json":           hfConfig(spec, dtype),
		"tokenizer_config.json": nil,
		"tokenizer.json":        nil,
	}
	if shards > 1 {
		files["model.safetensors.index.json"] = map[string]any{
			"metadata":   map[string]any{"total_size": total},
			"weight_map": weightMap,
		}
	}
	for name, v := range files {
		var raw []byte
		var err error
		switch name {
		case "tokenizer.json":
			raw, err = tokenizerJSON(spec.Vocab)
		case "tokenizer_config.json":
			raw, err = tokenizerConfigJSON(spec.ContextLen)
		default:
			raw, err = json.MarshalIndent(v, "", "  ")
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), raw, 0o644)
		}
		if err != nil {
			return fmt.Errorf("modeltest: %s: %w", name, err)
		}
	}
	return nil
}

func hfConfig(spec Spec, dtype kernels.DType) map[string]any {
	arch, modelType := "LlamaForCausalLM", "llama"
	if spec.QKVBias {
		arch, modelType = "Qwen2ForCausalLM", "qwen2"
	}
	if spec.QKNorm {
		arch, modelType = "Qwen3ForCausalLM", "qwen3"
	}
	if spec.Gemma {
		arch, modelType = "Gemma3ForCausalLM", "gemma3_text"
	}
	if spec.Gemma2 {
		arch, modelType = "Gemma2ForCausalLM", "gemma2"
	}
	if spec.SmolLM3 {
		arch, modelType = "SmolLM3ForCausalLM", "smollm3"
	}
	torchDType := map[kernels.DType]string{kernels.F32: "float32", kernels.F16: "float16", kernels.BF16: "bfloat16"}[dtype]
	cfg := map[string]any{
		"architectures":           []string{arch},
		"model_type":              modelType,
		"hidden_size":             spec.Hidden,
		"intermediate_size":       spec.FFN,
		"num_hidden_layers":       spec.Layers,
		"num_attention_heads":     spec.Heads,
		"num_key_value_heads":     spec.KVHeads,
		"head_dim":                spec.HeadDim(),
		"vocab_size":              spec.Vocab,
		"max_position_embeddings": spec.ContextLen,
		"rms_norm_eps":            jsonFloat(spec.RMSEps),
		"rope_theta":              jsonFloat(spec.RopeTheta),
		"tie_word_embeddings":     spec.Tied,
		"hidden_act":              "silu",
		"torch_dtype":             torchDType,
		"bos_token_id":            BOSID,
		"eos_token_id":            EOSID,
		"rope_scaling":            nil,
	}
	if !spec.QKVBias {
		cfg["attention_bias"] = false
	}
	if spec.SmolLM3 {
		// transformers' SmolLM3Config spelling: 1 where a layer rotates.
		rope := make([]int, spec.Layers)
		for i := range rope {
			rope[i] = min((i+1)%4, 1)
		}
		cfg["no_rope_layers"], cfg["no_rope_layer_interval"] = rope, 4
		cfg["use_sliding_window"], cfg["sliding_window"] = false, nil
	}
	if spec.Gemma {
		cfg["hidden_activation"] = "gelu_pytorch_tanh"
		cfg["query_pre_attn_scalar"] = spec.HeadDim()
		switch {
		case spec.Gemma2:
			// Gemma2Config's keys: one RoPE base, the layers alternating
			// from a window layer, both soft-caps.
			cfg["sliding_window"] = spec.Window
			cfg["attn_logit_softcapping"] = jsonFloat(spec.AttnSoftcap)
			cfg["final_logit_softcapping"] = jsonFloat(spec.FinalSoftcap)
			cfg["cache_implementation"] = "hybrid"
		default:
			cfg["rope_local_base_freq"] = jsonFloat(10000)
			// null, not absent: transformers' Gemma3TextConfig defaults to 4096.
			cfg["sliding_window"] = nil
			if spec.Window > 0 {
				cfg["sliding_window"] = spec.Window
				cfg["sliding_window_pattern"] = spec.WindowPattern
			}
		}
	}
	if rs := spec.RopeScaling; rs != nil {
		cfg["rope_scaling"] = map[string]any{
			"rope_type":                        "llama3",
			"factor":                           jsonFloat(rs.Factor),
			"low_freq_factor":                  jsonFloat(rs.LowFreqFactor),
			"high_freq_factor":                 jsonFloat(rs.HighFreqFactor),
			"original_max_position_embeddings": rs.OriginalContext,
		}
	}
	if spec.Experts > 0 {
		moeHFConfig(spec, cfg)
	}
	if spec.Phi3 {
		phi3HFConfig(spec, cfg)
	}
	if spec.GPTOSS {
		gptossHFConfig(spec, cfg)
	}
	if spec.Gemma4 {
		gemma4HFConfig(spec, cfg)
	}
	return cfg
}

// phi3HFConfig sets a Phi-3 spec's config.json keys as transformers'
// Phi3Config spells them: partial_rotary_factor as Phi-4-mini writes it,
// the window on every layer, and LongRoPE as rope_scaling with the factors
// WriteGGUF stores as rope_factors_{short,long}.weight, each spelled as the
// float64 of its float32 so that both formats hold the same values. The
// attention factor is left to the reader to derive from the two contexts, as
// released checkpoints leave it.
func phi3HFConfig(spec Spec, cfg map[string]any) {
	cfg["architectures"], cfg["model_type"] = []string{"Phi3ForCausalLM"}, "phi3"
	// Phi3Config's default pad id, 32000, is past the tiny vocabulary.
	cfg["pad_token_id"] = nil
	delete(cfg, "attention_bias")
	cfg["original_max_position_embeddings"] = spec.ContextLen
	cfg["sliding_window"] = nil
	if spec.Window > 0 {
		cfg["sliding_window"] = spec.Window
	}
	if spec.RopeDims != spec.HeadDim() {
		cfg["partial_rotary_factor"] = jsonFloat(float32(spec.RopeDims) / float32(spec.HeadDim()))
	}
	lr := spec.LongRoPE
	if lr == nil {
		return
	}
	cfg["original_max_position_embeddings"] = lr.OriginalContext
	w := Weights(spec)
	exact := func(f []float32) []json.Number {
		out := make([]json.Number, len(f))
		for i, v := range f {
			out[i] = json.Number(strconv.FormatFloat(float64(v), 'g', -1, 64))
		}
		return out
	}
	cfg["rope_scaling"] = map[string]any{
		"type":         "longrope",
		"short_factor": exact(w["rope_factors_short.weight"]),
		"long_factor":  exact(w["rope_factors_long.weight"]),
	}
}

// jsonFloat spells v as a JSON float even when it is whole (30.0, not 30),
// as Python's json writes a float: transformers 5's config classes check
// types strictly and refuse an int where a float field is declared
// (final_logit_softcapping = 30 fails to load).
func jsonFloat(v float32) json.Number {
	s := strconv.FormatFloat(float64(v), 'g', -1, 32)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.Number(s)
}

// WriteSafetensors writes tensors (F32, F16 or BF16, each in its own) as one
// safetensors file; the header is padded with spaces to 8 bytes, as the
// Python library does, so tensor data stays aligned.
func WriteSafetensors(path string, tensors []Tensor) error {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int
	for _, t := range tensors {
		dtName, ok := hfDTypes[t.DType]
		if !ok {
			return fmt.Errorf("modeltest: %s: safetensors dtype %v (want F32, F16 or BF16)", t.Name, t.DType)
		}
		header[t.Name] = map[string]any{"dtype": dtName, "shape": t.Shape, "data_offsets": []int{off, off + len(t.Data)}}
		off += len(t.Data)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("modeltest: %s: %w", path, err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	buf := make([]byte, 8, 8+len(h)+off)
	for i := range 8 {
		buf[i] = byte(uint64(len(h)) >> (8 * i))
	}
	buf = append(buf, h...)
	for _, t := range tensors {
		buf = append(buf, t.Data...)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	return nil
}
