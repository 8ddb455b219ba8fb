package models

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gptossHFSpec is the tiny gpt-oss of the llama.cpp golden (tiny_newest_test.go),
// YaRN 4× from 16 tokens, a window of 5 on the even layers, 2 of 4 experts.
func gptossHFSpec(mxfp4 bool) modeltest.Spec {
	return modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 49, GPTOSS: true,
		Window: 5, Experts: 4, ExpertsUsed: 2, RopeTheta: 150000, YaRN: &modeltest.YaRN{Factor: 4, OriginalContext: 16},
		ExpertsMXFP4: mxfp4}
}

// TestGPTOSSHFMatchesGGUF loads one tiny gpt-oss as a GGUF file and as the
// Hugging Face checkpoint of the same weights, with the experts fused as
// transformers keeps them (dense gate_up_proj/down_proj) or as the release
// ships them (MXFP4 _blocks and _scales), and requires the same Config and
// bit-identical logits at every position of a prompt past the window and
// YaRN's original context: the fused experts' split, transposition and
// nibble regrouping, the norm's rename and config.json's YaRN, window and
// query scale all have to land where the GGUF reader puts them.
func TestGPTOSSHFMatchesGGUF(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44}
	for _, mxfp4 := range []bool{false, true} {
		name := map[bool]string{false: "dense", true: "mxfp4"}[mxfp4]
		t.Run(name, func(t *testing.T) {
			spec := gptossHFSpec(mxfp4)
			dir := t.TempDir()
			gguf, hf := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
			if err := modeltest.WriteGGUF(gguf, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			a, b := loadHFRef(t, gguf, 1, 0), loadHFRef(t, hf, 1, 0)
			ca, cb := a.Config(), b.Config()
			if !reflect.DeepEqual(ca, cb) {
				t.Fatalf("configs differ:\n gguf %+v\n   hf %+v", ca, cb)
			}
			if ca.RopeScaling == nil || !ca.RopeScaling.YaRN {
				t.Fatalf("no YaRN in %+v", ca)
			}
			ra, rb := newSoloRunner(a), newSoloRunner(b)
			for pos, tok := range prompt {
				la, lb := ra.feed(t, []int32{tok}), rb.feed(t, []int32{tok})
				for i := range la {
					if la[i] != lb[i] {
						t.Fatalf("position %d, token %d: GGUF logit %g, safetensors %g", pos, i, la[i], lb[i])
					}
				}
			}
		})
	}
}

// TestGPTOSSHFBF16Experts reads a BF16 checkpoint's fused experts (the
// layout transformers saves gpt-oss in once dequantized) and checks each
// split, transposed tensor holds the spec's weights rounded to BF16, and the
// interleaved biases split into F32.
func TestGPTOSSHFBF16Experts(t *testing.T) {
	spec := gptossHFSpec(false)
	spec.ExpertFFN = 32 // gate/up rows ≠ hidden, so a transposition mix-up shows in the shapes too
	dir := t.TempDir()
	if err := modeltest.WriteHF(dir, spec, kernels.BF16); err != nil {
		t.Fatal(err)
	}
	src, err := OpenHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := modeltest.Weights(spec)
	for _, name := range []string{"blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight",
		"blk.1.ffn_gate_exps.bias", "blk.1.ffn_up_exps.bias", "blk.1.ffn_down_exps.bias", "blk.1.post_attention_norm.weight", "blk.1.attn_sinks.weight"} {
		ht, err := src.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		shape := modeltest.Shapes(spec)[name]
		if !reflect.DeepEqual(ht.Shape, shape) {
			t.Fatalf("%s: shape %v, want %v", name, ht.Shape, shape)
		}
		if strings.HasSuffix(name, "_exps.bias") != (ht.DType == kernels.F32) {
			t.Errorf("%s: %v (the expert biases are read F32, the rest as stored)", name, ht.DType)
		}
		got := make([]float32, len(want[name]))
		if err := quant.Dequantize(ht.DType, ht.Data, got); err != nil {
			t.Fatal(err)
		}
		for i, w := range want[name] {
			r := make([]float32, 1)
			bf, _ := quant.Quantize(kernels.BF16, []float32{w})
			_ = quant.Dequantize(kernels.BF16, bf, r)
			if got[i] != r[0] {
				t.Fatalf("%s[%d] = %g, want %g (%g as BF16)", name, i, got[i], w, r[0])
			}
		}
	}
	if src.Has("blk.1.ffn_norm.weight") {
		t.Error("gpt-oss's post_attention_layernorm is read as ffn_norm too")
	}
}

// TestGPTOSSHFRefusals: what the forward pass cannot run is refused by name.
func TestGPTOSSHFRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := modeltest.WriteHF(dir, gptossHFSpec(false), kernels.F32); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		keys map[string]any
		want string
	}{
		{map[string]any{"swiglu_limit": 8.0}, "swiglu_limit"},
		{map[string]any{"attention_bias": false}, "attention_bias"},
		{map[string]any{"rope_scaling": map[string]any{"rope_type": "longrope", "factor": 4.0}}, "longrope"},
		{map[string]any{"layer_types": []string{"sliding_attention"}}, "layer_types"},
		{map[string]any{"quantization_config": map[string]any{"quant_method": "gptq"}}, "quant_method"},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		setConfigKeys(t, dir, c.keys)
		src, err := OpenHF(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.Config()
		src.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || !(errors.Is(err, ErrUnsupported) || errors.Is(err, ErrMalformed)) {
			t.Errorf("%v: error %v, want one naming %s", c.keys, err, c.want)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGPTOSSHFReleaseConfig reads openai/gpt-oss-20b's config.json as
// released (its keys and values, the quantization_config included) into
// the Config the GGUF reader makes of the converted file, but for YaRN's
// truncate false: 24 layers of 64 heads of 64 over 8 KV heads, 32 experts
// 2880 wide, top 4, a window of 128 on the even layers, YaRN 32x from 4096
// with the attention factor 1 + 0.1 ln 32 folded into the query scale.
func TestGPTOSSHFReleaseConfig(t *testing.T) {
	dir := t.TempDir()
	types := make([]string, 24)
	for i := range types {
		types[i] = map[bool]string{true: "sliding_attention", false: "full_attention"}[i%2 == 0]
	}
	cfg := map[string]any{
		"architectures": []string{"GptOssForCausalLM"}, "attention_bias": true, "attention_dropout": 0.0, "eos_token_id": 200002,
		"experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
		"initializer_range": 0.02, "intermediate_size": 2880, "layer_types": types, "max_position_embeddings": 131072,
		"model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
		"num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 199999,
		"quantization_config": map[string]any{"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router",
			"model.embed_tokens", "lm_head"}, "quant_method": "mxfp4"},
		"rms_norm_eps": 1e-05, "rope_scaling": map[string]any{"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
			"original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
		"rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
		"tie_word_embeddings": false, "transformers_version": "4.55.0.dev0", "use_cache": true, "vocab_size": 201088,
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := readHFConfig(path, func(name string) bool { return name == "output.weight" || name == "blk.0.attn_q.bias" })
	if err != nil {
		t.Fatal(err)
	}
	ms := float32(1 + 0.1*math.Log(32))
	want := Config{Arch: "gpt-oss", Layers: 24, Hidden: 2880, FFN: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, Vocab: 201088,
		ContextLen: 131072, RMSEps: 1e-5, RopeTheta: 150000, RopeStyle: kernels.RoPEHalves, QKVBias: true,
		Experts: 32, ExpertsUsed: 4, ExpertFFN: 2880, ExpertNorm: true, Window: 128, WindowLayers: make([]bool, 24), RopeThetaLocal: 150000,
		RopeScaling: &RopeScaling{YaRN: true, Factor: 32, OriginalContext: 4096, BetaFast: 32, BetaSlow: 1, YaRNUntruncated: true}}
	for i := range want.WindowLayers {
		want.WindowLayers[i] = i%2 == 0
	}
	if d := math.Abs(float64(c.QueryScale/(ms*ms/8)) - 1); d > 1e-6 {
		t.Errorf("query scale %g, want %g", c.QueryScale, ms*ms/8)
	}
	c.QueryScale = 0
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n got %+v\nwant %+v", c, want)
	}
}
