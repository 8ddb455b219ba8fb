package models

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

func TestHFToGGUFNames(t *testing.T) {
	cases := map[string]string{
		"model.embed_tokens.weight":                      "token_embd.weight",
		"model.norm.weight":                              "output_norm.weight",
		"lm_head.weight":                                 "output.weight",
		"model.layers.0.input_layernorm.weight":          "blk.0.attn_norm.weight",
		"model.layers.12.self_attn.q_proj.weight":        "blk.12.attn_q.weight",
		"model.layers.3.self_attn.v_proj.bias":           "blk.3.attn_v.bias",
		"model.layers.3.self_attn.o_proj.weight":         "blk.3.attn_output.weight",
		"model.layers.7.post_attention_layernorm.weight": "blk.7.ffn_norm.weight",
		"model.layers.7.mlp.down_proj.weight":            "blk.7.ffn_down.weight",
		"model.layers.7.self_attn.rotary_emb.inv_freq":   "model.layers.7.self_attn.rotary_emb.inv_freq",
		"model.layers.x.mlp.up_proj.weight":              "model.layers.x.mlp.up_proj.weight",
		"transformer.h.0.attn.c_attn.weight":             "transformer.h.0.attn.c_attn.weight",
		"model.layers.1.self_attn.k_proj.weight.extra":   "model.layers.1.self_attn.k_proj.weight.extra",
		"model.layers.1.block_sparse_moe.gate.weight":    "blk.1.ffn_gate_inp.weight",
		"model.layers.4.mlp.gate.weight":                 "blk.4.ffn_gate_inp.weight",
		"model.layers.4.mlp.shared_expert_gate.weight":   "blk.4.ffn_gate_inp_shexp.weight",
		"model.layers.4.mlp.experts.3.up_proj.weight":    "model.layers.4.mlp.experts.3.up_proj.weight", // stacked by HFDir, not renamed
		"model.layers.10.mlp.gate_proj.weight":           "blk.10.ffn_gate.weight",
		"model.layers.10.self_attn.k_proj.bias":          "blk.10.attn_k.bias",
		"model.layers.2.self_attn.q_proj.bias":           "blk.2.attn_q.bias",
		"model.layers.2.self_attn.v_proj.weight":         "blk.2.attn_v.weight",
	}
	for hf, want := range cases {
		if got := hfToGGUF(hf); got != want {
			t.Errorf("hfToGGUF(%q) = %q, want %q", hf, got, want)
		}
	}
}

// stFile builds a safetensors image from a raw header value and n data bytes.
func stFile(t testing.TB, header any, n int) []byte {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(b, h...), make([]byte, n)...)
}

type stInfo struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets []int  `json:"data_offsets"`
}

func TestSafetensorsRejects(t *testing.T) {
	cases := []struct {
		name   string
		file   []byte
		want   error
		inText string
	}{
		{"header past EOF", binary.LittleEndian.AppendUint64(nil, 1<<40), ErrMalformed, "header of"},
		{"not JSON", append(binary.LittleEndian.AppendUint64(nil, 3), "{x}"...), ErrMalformed, "header"},
		{"offsets past EOF", stFile(t, map[string]stInfo{"w": {"F32", []int{4}, []int{0, 16}}}, 8), ErrMalformed, `"w": data_offsets`},
		{"reversed offsets", stFile(t, map[string]stInfo{"w": {"F32", []int{0}, []int{8, 0}}}, 8), ErrMalformed, `"w": data_offsets`},
		{"size mismatch", stFile(t, map[string]stInfo{"w": {"F16", []int{4}, []int{0, 16}}}, 16), ErrMalformed, `"w": 16 bytes`},
		{"unknown dtype", stFile(t, map[string]stInfo{"w": {"F4", []int{4}, []int{0, 2}}}, 2), ErrUnsupported, `"w": dtype "F4"`},
		{"shape overflow", stFile(t, map[string]stInfo{"w": {"F32", []int{1 << 40, 1 << 40}, []int{0, 0}}}, 0), ErrMalformed, `"w": shape`},
		{"one offset", stFile(t, map[string]stInfo{"w": {"F32", []int{1}, []int{0}}}, 4), ErrMalformed, `"w": data_offsets`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenHF(dir)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), tc.inText) {
				t.Fatalf("err = %v, want %v naming the file and %q", err, tc.want, tc.inText)
			}
		})
	}
}

// TestSafetensorsLazyDType: a tensor of a dtype Sluice cannot compute with
// does not stop the directory from opening, only that tensor from loading.
func TestSafetensorsLazyDType(t *testing.T) {
	dir := t.TempDir()
	file := stFile(t, map[string]stInfo{
		"model.norm.weight": {"F32", []int{2}, []int{0, 8}},
		"lm_head.weight":    {"I64", []int{1}, []int{8, 16}},
	}, 16)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if ht, err := h.Tensor("output_norm.weight"); err != nil || ht.DType != kernels.F32 || len(ht.Data) != 8 {
		t.Errorf("output_norm.weight: %+v, %v", ht, err)
	}
	if _, err := h.Tensor("output.weight"); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"lm_head.weight": dtype I64`) {
		t.Errorf("I64 tensor: %v", err)
	}
	if ts := h.Tensors(); len(ts) != 1 || ts[0].Name != "output_norm.weight" || ts[0].Size != 8 {
		t.Errorf("Tensors() = %+v, want only the F32 output_norm.weight", ts)
	}
	if _, err := h.Tensor("blk.0.attn_q.weight"); !errors.Is(err, ErrNoTensor) {
		t.Errorf("absent tensor: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tensor("output_norm.weight"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestHFDirectoryErrors(t *testing.T) {
	spec := modeltest.Spec{Layers: 1, Hidden: 8, Heads: 2, FFN: 8, Vocab: 259, Seed: 5, HFShards: 2}
	edits := []struct {
		name   string
		edit   func(dir string) error
		open   bool // the error comes from Config, not OpenHF
		want   error
		inText string
	}{
		{"no weights", func(dir string) error { return os.Remove(filepath.Join(dir, "model.safetensors.index.json")) }, false, os.ErrNotExist, "model.safetensors.index.json"},
		{"shard outside the directory", rewriteIndex(`"../evil.safetensors"`), false, ErrMalformed, "evil"},
		{"index names a missing tensor", addToIndex(`"model.layers.0.mlp.gate_proj.bias": "model-00001-of-00002.safetensors"`), false, ErrNoTensor, "gate_proj.bias"},
		{"unknown architecture", editConfig("LlamaForCausalLM", "GemmaForCausalLM"), true, ErrUnsupported, "GemmaForCausalLM"},
		{"yarn rope scaling", editConfig(`"rope_scaling": null`, `"rope_scaling": {"type": "yarn", "factor": 2}`), true, ErrUnsupported, "yarn"},
		{"linear rope scaling without factor", editConfig(`"rope_scaling": null`, `"rope_scaling": {"type": "linear"}`), true, ErrMissingKey, "factor"},
		{"llama3 without factor", editConfig(`"rope_scaling": null`, `"rope_scaling": {"rope_type": "llama3"}`), true, ErrMissingKey, "factor"},
		{"rope_parameters of an unknown attention type", editConfig(`"rope_scaling": null`, `"rope_scaling": null, "rope_parameters": {"linear_attention": {"rope_type": "default", "rope_theta": 1e6}}`), true, ErrUnsupported, "rope_parameters"},
		{"rope_parameters disagreeing with rope_theta", editConfig(`"rope_scaling": null`, `"rope_scaling": null, "rope_parameters": {"rope_type": "default", "rope_theta": 500000}`), true, ErrMalformed, "disagree"},
		{"yarn in rope_parameters", editConfig(`"rope_scaling": null`, `"rope_scaling": null, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000, "factor": 2}`), true, ErrUnsupported, "yarn"},
		{"zero layers", editConfig(`"num_hidden_layers": 1`, `"num_hidden_layers": 0`), true, ErrMalformed, "zero dimension"},
		{"bad JSON", editConfig(`{`, `[`), true, ErrMalformed, "config.json"},
	}
	for _, tc := range edits {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			if err := tc.edit(dir); err != nil {
				t.Fatal(err)
			}
			h, err := OpenHF(dir)
			if tc.open {
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				_, err = h.Config()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.inText) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.inText)
			}
		})
	}
}

func rewriteIndex(shard string) func(string) error {
	return func(dir string) error {
		p := filepath.Join(dir, "model.safetensors.index.json")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := strings.Replace(string(b), `"model-00002-of-00002.safetensors"`, shard, 1)
		return os.WriteFile(p, []byte(s), 0o644)
	}
}

func addToIndex(entry string) func(string) error {
	return func(dir string) error {
		p := filepath.Join(dir, "model.safetensors.index.json")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := strings.Replace(string(b), `"weight_map": {`, `"weight_map": {`+entry+",", 1)
		return os.WriteFile(p, []byte(s), 0o644)
	}
}

func editConfig(old, new string) func(string) error {
	return func(dir string) error {
		p := filepath.Join(dir, "config.json")
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), old) {
			return errors.New("config.json has no " + old)
		}
		return os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
	}
}

// FuzzSafetensorsHeader: no header may panic the parser, and every entry it
// accepts must lie inside the file with the size its shape implies.
func FuzzSafetensorsHeader(f *testing.F) {
	dir := f.TempDir()
	if err := modeltest.WriteHF(dir, modeltest.Spec{Layers: 1, Hidden: 8, Heads: 2, FFN: 8, Vocab: 259, Seed: 1}, kernels.BF16); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(stFile(f, map[string]stInfo{"w": {"F32", []int{2, 2}, []int{0, 16}}}, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseSafetensors(data)
		if err != nil {
			return
		}
		for name, e := range entries {
			n := stElemSize[e.dtype]
			for _, d := range e.shape {
				n *= uint64(d)
			}
			if e.begin > e.end || e.end > uint64(len(data)) || e.end-e.begin != n {
				t.Fatalf("%q: [%d, %d) in %d bytes for %v %s", name, e.begin, e.end, len(data), e.shape, e.dtype)
			}
		}
	})
}

// TestHFRopeParameters: transformers 5's rope_parameters (base and scaling in
// one object) gives the Config that rope_theta and rope_scaling give, and
// Gemma's per-attention-type form sets both bases over the defaults.
func TestHFRopeParameters(t *testing.T) {
	spec := modeltest.Spec{Layers: 1, Hidden: 8, Heads: 2, FFN: 8, Vocab: 259, Seed: 5}
	scaling := map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
	config := func(t *testing.T, edit func(map[string]any)) Config {
		dir := t.TempDir()
		if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "config.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		edit(c)
		if raw, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := OpenHF(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		cfg, err := h.Config()
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	old := config(t, func(c map[string]any) { c["rope_theta"], c["rope_scaling"] = 500000.0, scaling })
	params := maps.Clone(scaling)
	params["rope_theta"] = 500000.0
	newer := config(t, func(c map[string]any) {
		delete(c, "rope_theta")
		delete(c, "rope_scaling")
		c["rope_parameters"] = params
	})
	if old.RopeTheta != 500000 || old.RopeScaling == nil {
		t.Fatalf("rope_theta/rope_scaling read as base %v, scaling %+v", old.RopeTheta, old.RopeScaling)
	}
	if !reflect.DeepEqual(old, newer) {
		t.Fatalf("rope_parameters gives %+v (scaling %+v), rope_theta/rope_scaling %+v (scaling %+v)", newer, newer.RopeScaling, old, old.RopeScaling)
	}
	// Gemma's per-attention-type form, over Gemma 3's defaults (base 1e6,
	// local 10000): both bases come from the file.
	spec = gemma3Tiny
	byType := config(t, func(c map[string]any) {
		delete(c, "rope_theta")
		delete(c, "rope_local_base_freq")
		c["rope_parameters"] = map[string]any{
			"full_attention":    map[string]any{"rope_type": "default", "rope_theta": 250000.0},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 5000.0},
		}
	})
	if byType.RopeTheta != 250000 || byType.RopeThetaLocal != 5000 {
		t.Fatalf("per-attention-type rope_parameters: bases %v and %v, want 250000 and 5000", byType.RopeTheta, byType.RopeThetaLocal)
	}
}
