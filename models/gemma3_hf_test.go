package models

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

// renameSafetensors rewrites a safetensors file's header with every tensor
// renamed by rename; the data (offsets are relative to its start) is kept.
func renameSafetensors(t *testing.T, path string, rename func(string) string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for name, v := range header {
		if name != "__metadata__" {
			name = rename(name)
		}
		out[name] = v
	}
	h, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	buf = append(append(buf, h...), raw[8+n:]...)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editJSON rewrites dir/config.json through edit.
func editJSON(t *testing.T, dir string, edit func(map[string]any) map[string]any) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if raw, err = json.Marshal(edit(cfg)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// asConditional makes a Gemma3ForCausalLM directory the multimodal
// checkpoint's shape: the text model's config under text_config, its tensors
// under prefix.
func asConditional(t *testing.T, dir, prefix string) {
	t.Helper()
	editJSON(t, dir, func(c map[string]any) map[string]any {
		delete(c, "architectures")
		c["model_type"] = "gemma3_text"
		return map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}, "model_type": "gemma3", "text_config": c}
	})
	renameSafetensors(t, filepath.Join(dir, "model.safetensors"), func(name string) string {
		if name == "lm_head.weight" && prefix == "language_model." {
			return prefix + name
		}
		return strings.Replace(name, "model.", prefix, 1)
	})
}

// TestGemma3HFVariants loads the tiny Gemma 3 as the shapes its Hugging Face
// checkpoints come in and checks each gives the GGUF file's logits.
func TestGemma3HFVariants(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "g.gguf")
	if err := modeltest.WriteGGUF(gguf, gemma3Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		name string
		edit func(t *testing.T, dir string)
	}{
		{"causal lm", func(*testing.T, string) {}},
		{"conditional generation, transformers ≥ 4.52 names", func(t *testing.T, d string) { asConditional(t, d, "model.language_model.") }},
		{"conditional generation, older names", func(t *testing.T, d string) { asConditional(t, d, "language_model.model.") }},
		{"layer_types instead of the pattern", func(t *testing.T, d string) {
			editJSON(t, d, func(c map[string]any) map[string]any {
				delete(c, "sliding_window_pattern")
				c["layer_types"] = []string{"sliding_attention", "sliding_attention", "full_attention"}
				return c
			})
		}},
	}
	want := tinyLogits(t, gguf)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			hf := filepath.Join(t.TempDir(), "hf")
			if err := modeltest.WriteHF(hf, gemma3Tiny, kernels.F32); err != nil {
				t.Fatal(err)
			}
			v.edit(t, hf)
			got := tinyLogits(t, hf)
			for p := range want {
				for i := range want[p] {
					if d := math.Abs(float64(got[p][i] - want[p][i])); d > 1e-4 {
						t.Fatalf("position %d: logit %d is %g from the checkpoint, %g from GGUF", p, i, got[p][i], want[p][i])
					}
				}
			}
		})
	}
}

// tinyLogits runs gemma3Tiny from path over a fixed sequence, one token a step.
func tinyLogits(t *testing.T, path string) [][]float32 {
	t.Helper()
	m := loadTinyAt(t, path)
	if c := m.Config(); c.Window != 5 || !slices.Equal(c.WindowLayers, []bool{true, true, false}) || c.QueryScale != 0.25 {
		t.Fatalf("%s: config %+v", path, c)
	}
	r := newSoloRunner(m)
	var out [][]float32
	for _, tok := range []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5} {
		out = append(out, slices.Clone(r.feed(t, []int32{tok})))
	}
	return out
}

// TestGemma3HFConfig checks transformers' defaults for what a Gemma 3
// config.json leaves out, and the refusals.
func TestGemma3HFConfig(t *testing.T) {
	write := func(t *testing.T, edit func(map[string]any) map[string]any) (Config, error) {
		return tinyHFConfig(t, gemma3Tiny, edit)
	}
	// Gemma3TextConfig's defaults: query_pre_attn_scalar 256 (not the head
	// size), local RoPE base 10k, a 4096 window on five of every six layers.
	c, err := write(t, func(c map[string]any) map[string]any {
		for _, k := range []string{"query_pre_attn_scalar", "rope_local_base_freq", "sliding_window", "sliding_window_pattern", "hidden_activation"} {
			delete(c, k)
		}
		return c
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.QueryScale != 1.0/16 || c.RopeThetaLocal != 10000 || c.Window != 4096 || !slices.Equal(c.WindowLayers, []bool{true, true, true}) {
		t.Errorf("defaults: query scale %g, local base %g, window %d over %v; want 1/16, 10000, 4096 over the first five of six layers",
			c.QueryScale, c.RopeThetaLocal, c.Window, c.WindowLayers)
	}
	if c, err = write(t, func(c map[string]any) map[string]any { c["sliding_window"] = nil; return c }); err != nil || c.Window != 0 {
		t.Errorf("sliding_window null: window %d, %v; want none", c.Window, err)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any) map[string]any
		want error
		text string
	}{
		{"exact GELU", func(c map[string]any) map[string]any { c["hidden_activation"] = "gelu"; return c }, ErrUnsupported, "gelu"},
		{"unknown layer type", func(c map[string]any) map[string]any {
			c["layer_types"] = []string{"sliding_attention", "chunked_attention", "full_attention"}
			return c
		}, ErrMalformed, "chunked_attention"},
		{"conditional without text_config", func(c map[string]any) map[string]any {
			c["architectures"] = []string{"Gemma3ForConditionalGeneration"}
			return c
		}, ErrMissingKey, "text_config"},
		{"text_config not an object", func(c map[string]any) map[string]any {
			return map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}, "text_config": 3}
		}, ErrMalformed, "text_config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := write(t, tc.edit); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

// gemmaHFNames is how a Gemma 3 checkpoint names each GGUF layer tensor,
// written out here rather than inverted from the loader's table.
var gemmaHFNames = map[string]string{
	"attn_norm.weight":           "input_layernorm.weight",
	"attn_q.weight":              "self_attn.q_proj.weight",
	"attn_k.weight":              "self_attn.k_proj.weight",
	"attn_v.weight":              "self_attn.v_proj.weight",
	"attn_output.weight":         "self_attn.o_proj.weight",
	"attn_q_norm.weight":         "self_attn.q_norm.weight",
	"attn_k_norm.weight":         "self_attn.k_norm.weight",
	"post_attention_norm.weight": "post_attention_layernorm.weight",
	"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
	"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
	"ffn_gate.weight":            "mlp.gate_proj.weight",
	"ffn_up.weight":              "mlp.up_proj.weight",
	"ffn_down.weight":            "mlp.down_proj.weight",
}

// writeGemmaHF writes the Gemma 3 GGUF at src as a Hugging Face checkpoint:
// every tensor dequantized (F32; the embedding F16, to keep the file at
// 0.7 GB), norms shifted back from 1 + w to w, and a config.json from the
// GGUF's metadata.
func writeGemmaHF(t *testing.T, src *GGUFFile, dir string) {
	t.Helper()
	cfg, err := src.Config()
	if err != nil {
		t.Fatal(err)
	}
	var ts []modeltest.Tensor
	for _, info := range src.Tensors() {
		ht, err := src.Tensor(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		for _, d := range ht.Shape {
			n *= d
		}
		vals := make([]float32, n)
		if err := quant.Dequantize(ht.DType, ht.Data, vals); err != nil {
			t.Fatal(err)
		}
		var name string
		switch {
		case info.Name == "token_embd.weight":
			name = "model.embed_tokens.weight"
		case info.Name == "output_norm.weight":
			name = "model.norm.weight"
		default:
			var layer int
			var part string
			if _, err := fmt.Sscanf(info.Name, "blk.%d.%s", &layer, &part); err != nil || gemmaHFNames[part] == "" {
				t.Fatalf("no Hugging Face name for %s", info.Name)
			}
			name = fmt.Sprintf("model.layers.%d.%s", layer, gemmaHFNames[part])
		}
		if strings.HasSuffix(info.Name, "norm.weight") {
			for i := range vals {
				vals[i]--
			}
		}
		dt := kernels.F32
		if info.Name == "token_embd.weight" {
			dt = kernels.F16
		}
		data, err := quant.Quantize(dt, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, modeltest.Tensor{Name: name, DType: dt, Shape: ht.Shape, Data: data})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteSafetensors(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
	layerTypes := make([]string, cfg.Layers)
	for i := range layerTypes {
		layerTypes[i] = "full_attention"
		if cfg.IsWindowLayer(i) {
			layerTypes[i] = "sliding_attention"
		}
	}
	config := map[string]any{
		"architectures": []string{"Gemma3ForCausalLM"}, "model_type": "gemma3_text",
		"hidden_size": cfg.Hidden, "intermediate_size": cfg.FFN, "num_hidden_layers": cfg.Layers,
		"num_attention_heads": cfg.Heads, "num_key_value_heads": cfg.KVHeads, "head_dim": cfg.HeadDim,
		"vocab_size": cfg.Vocab, "max_position_embeddings": cfg.ContextLen, "rms_norm_eps": cfg.RMSEps,
		"rope_theta": cfg.RopeTheta, "rope_local_base_freq": cfg.RopeThetaLocal, "rope_scaling": nil,
		"query_pre_attn_scalar": 256, "sliding_window": cfg.Window, "layer_types": layerTypes,
		"hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": nil, "attn_logit_softcapping": nil,
		"tie_word_embeddings": true,
	}
	raw, err := json.Marshal(config)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestGemma3RealHFMatchesGGUF writes Gemma 3 270M's weights out as a Hugging
// Face checkpoint and checks that loading it gives the GGUF file's config and,
// for a few golden prompts and their greedy continuations, its logits. The
// two differ by the quantized dots alone: the GGUF path rounds activations to
// 8 bits per block before its Q4_K/Q6_K dots, the checkpoint's F32 weights
// meet F32 activations.
func TestGemma3RealHFMatchesGGUF(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 0.7 GB checkpoint")
	}
	if _, err := os.Stat(gemma3Path); err != nil {
		t.Skipf("model absent (%v): run `make gemma-model`", err)
	}
	raw, err := os.ReadFile(gemma3GoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var golden goldenFile
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	g, err := OpenGGUF(gemma3Path)
	if err != nil {
		t.Fatal(err)
	}
	writeGemmaHF(t, g, dir)
	g.Close()
	opts := Options{MaxBatchTokens: 64, MaxSeqs: 1, BlockSize: 16, KVBlocks: 8}
	ggufModel := loadGemma3(t, 2, opts)
	hf := loadModel(t, dir, "", 2, opts)
	a, b := ggufModel.Config(), hf.Config()
	b.RopeStyle = a.RopeStyle
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("configs differ:\n gguf %+v\n hf   %+v", a, b)
	}
	worst, scale, sq, n, steps := 0.0, 0.0, 0.0, 0, 0
	for _, c := range golden.Cases[:3] {
		rg, rh := newSoloRunner(ggufModel), newSoloRunner(hf)
		lg, lh := rg.feed(t, c.PromptIDs), rh.feed(t, c.PromptIDs)
		for step := range 5 {
			for i := range lg {
				d := math.Abs(float64(lg[i] - lh[i]))
				worst, sq, n = math.Max(worst, d), sq+d*d, n+1
				scale = math.Max(scale, math.Abs(float64(lg[i])))
			}
			if x, y := argmax(lg), argmax(lh); x != y && top2Margin(lg) > 0.5 {
				t.Errorf("%s step %d: GGUF picks %d, the checkpoint %d (margin %.2f)", c.Name, step, x, y, top2Margin(lg))
			}
			steps++
			next := argmax(lg)
			lg, lh = rg.feed(t, []int32{next}), rh.feed(t, []int32{next})
		}
	}
	rms := math.Sqrt(sq / float64(n))
	t.Logf("%d steps × %d logits: worst |Δ| %.3g, RMS %.3g (logits up to %.3g)", steps, hf.VocabSize(), worst, rms, scale)
	// Measured over all 262,144 logits of 3 prompts × 5 steps: worst 1.17,
	// RMS 0.245; about twice that is allowed.
	if worst > 2.5 || rms > 0.5 {
		t.Errorf("|Δlogit| worst %.3g, RMS %.3g: want at most 2.5 and 0.5", worst, rms)
	}
}

// tinyHFConfig writes spec as an F32 HF checkpoint, edits its config.json, and
// returns the Config OpenHF reads from it (or its refusal).
func tinyHFConfig(t *testing.T, spec modeltest.Spec, edit func(map[string]any) map[string]any) (Config, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	editJSON(t, dir, edit)
	h, err := OpenHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	return h.Config()
}

// loadTinyAt loads the tiny checkpoint at path (GGUF or HF) on one CPU
// thread, with room for one sequence past the tiny models' window of 5;
// model and backend close when the test ends.
func loadTinyAt(t *testing.T, path string) *Llama {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, Options{MaxBatchTokens: 3, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
