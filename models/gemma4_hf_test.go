package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gemma4HFSpecs are dense Gemma 4 shapes both formats state: the llama.cpp
// golden's gemma4-f32 (window layers of 5 with heads of 16 over 2 KV heads,
// global layers 2 and 5 with heads of 32 over 1 KV head whose V is K's,
// proportional RoPE over a quarter of the pairs, layer scales, soft-cap 30)
// and one whose global layers keep V, every pair turning, no scales, cap 20.
// (A GGUF file without final_logit_softcapping means llama.cpp's 30, a
// config.json with it null none: no one spec writes both.)
var gemma4HFSpecs = []struct {
	name string
	spec modeltest.Spec
}{
	{"keqv-scales", modeltest.Spec{Layers: 6, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 44, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
		LayerScale: true, FinalSoftcap: 30, RopeTheta: 1e6}},
	{"plain", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 45, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 2, RopeTheta: 1e6, FinalSoftcap: 20}},
	// E2B/E4B's additions (the llama.cpp golden's gemma4e-f32): per-layer
	// inputs 32 wide, layers 3–5 reading the K/V of layers 1 (window) and
	// 2 (global) with twice the feed-forward width.
	{"e2b", gemma4ESpec},
	// The 26B-A4B's mixture beside the dense FFN (the llama.cpp golden's
	// gemma4moe shape): 8 experts of 64, top 2, router and per-expert
	// scales, the GGUF file's experts fused as the checkpoint's are.
	{"moe", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 51, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
		FinalSoftcap: 30, RopeTheta: 1e6, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, FusedGateUpExps: true}},
}

var gemma4ESpec = modeltest.Spec{Layers: 6, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 46, RMSEps: 1e-6,
	Gemma4: true, Window: 5, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 2, PartialRotaryFull: 0.25, RopeTheta: 1e6,
	PerLayerEmbd: 32, SharedKVLayers: 3, DoubleWideMLP: true, FinalSoftcap: 30}

// TestGemma4HFMatchesGGUF loads each dense Gemma 4 as GGUF and as the
// Gemma4ForCausalLM checkpoint of the same weights and requires the same
// Config and bit-identical logits at every position of a prompt past the
// window: head shapes per layer kind, K-as-V, the proportional RoPE's
// divisors, layer_scalar, the RoPE bases and the soft-cap all have to land
// where the GGUF reader puts them.
func TestGemma4HFMatchesGGUF(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44}
	for _, c := range gemma4HFSpecs {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			gguf, hf := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
			if err := modeltest.WriteGGUF(gguf, c.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			if err := modeltest.WriteHF(hf, c.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			a, b := loadHFRef(t, gguf, 1, 0), loadHFRef(t, hf, 1, 0)
			if ca, cb := a.Config(), b.Config(); !reflect.DeepEqual(ca, cb) {
				t.Fatalf("configs differ:\n gguf %+v\n   hf %+v", ca, cb)
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

// TestGemma4HFConditionalGeneration: the release layout, the text model
// under model.language_model.* and text_config beside a vision tower, is
// the same model as the Gemma4ForCausalLM checkpoint (bit-identical
// logits); a mixture without experts, a double-wide MLP without shared
// layers and a per-layer table of another vocabulary are refused by name.
func TestGemma4HFConditionalGeneration(t *testing.T) {
	spec := gemma4HFSpecs[0].spec
	root := t.TempDir()
	causal, cond := filepath.Join(root, "causal"), filepath.Join(root, "cond")
	if err := modeltest.WriteHF(causal, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(causal, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseSafetensors(raw)
	if err != nil {
		t.Fatal(err)
	}
	tensors := []modeltest.Tensor{{Name: "model.vision_tower.encoder.layers.0.mlp.fc1.weight", DType: kernels.F32, Shape: []int{2, 2}, Data: make([]byte, 16)}}
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		if rest, ok := strings.CutPrefix(name, "model."); ok {
			name = "model.language_model." + rest
		}
		tensors = append(tensors, modeltest.Tensor{Name: name, DType: kernels.F32, Shape: e.shape, Data: raw[e.begin:e.end]})
	}
	if err := os.MkdirAll(cond, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteSafetensors(filepath.Join(cond, "model.safetensors"), tensors); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(causal, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeCond := func(text []byte) {
		t.Helper()
		cfg := fmt.Sprintf(`{"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "vision_config": {"hidden_size": 8}, "text_config": %s}`, text)
		if err := os.WriteFile(filepath.Join(cond, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCond(text)
	a, b := loadHFRef(t, causal, 16, 0), loadHFRef(t, cond, 16, 0)
	prompt := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199}
	if la, lb := newSoloRunner(a).feed(t, prompt), newSoloRunner(b).feed(t, prompt); !slices.Equal(la, lb) {
		t.Fatal("Gemma4ForConditionalGeneration's logits differ from Gemma4ForCausalLM's")
	}
	var keys map[string]any
	if err := json.Unmarshal(text, &keys); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		over map[string]any
	}{
		{"enable_moe_block", map[string]any{"enable_moe_block": true, "num_experts": 0}},
		{"use_double_wide_mlp", map[string]any{"use_double_wide_mlp": true}},
		{"vocab_size_per_layer_input", map[string]any{"hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 512}},
	} {
		bad := maps.Clone(keys)
		maps.Copy(bad, c.over)
		key, v := c.key, c.over
		out, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		writeCond(out)
		src, err := Open(cond)
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.Config()
		src.Close()
		if !(errors.Is(err, ErrUnsupported) || errors.Is(err, ErrMalformed)) || !strings.Contains(fmt.Sprint(err), key) {
			t.Errorf("%s = %v: error %v, want unsupported naming it", key, v, err)
		}
	}
}
