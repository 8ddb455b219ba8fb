package models

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestDescribe reads tiny models of each architecture back as sluice inspect
// describes them: every line Describe gives is checked, and lines a model
// does not configure must be absent.
func TestDescribe(t *testing.T) {
	gguf := func(spec modeltest.Spec) func(t *testing.T) string {
		return func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	base := modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 5}
	gemma2, mixtral, qwen2moe, olmoe, llama3 := base, base, base, base, base
	gemma2.Gemma, gemma2.Gemma2, gemma2.Window, gemma2.AttnSoftcap = true, true, 5, 2
	mixtral.Experts, mixtral.ExpertsUsed = 4, 2
	qwen2moe.QKVBias, qwen2moe.Experts, qwen2moe.ExpertsUsed, qwen2moe.ExpertFFN, qwen2moe.SharedExpertFFN = true, 8, 2, 64, 96
	olmoe.OLMoE, olmoe.KVHeads, olmoe.FFN, olmoe.Experts, olmoe.ExpertsUsed = true, 4, 64, 8, 4
	llama3.RopeScaling = &modeltest.RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}
	phiLong := modeltest.Spec{Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 512, Seed: 9, ContextLen: 512,
		Phi3: true, RopeDims: 48, LongRoPE: &modeltest.LongRoPE{OriginalContext: 64}}
	phiShort := phiLong
	phiShort.ContextLen, phiShort.RopeDims, phiShort.Window = 64, 0, 17
	phiFull := phiLong
	phiFull.RopeDims = 0
	f := float64(modeltest.LongRoPE{OriginalContext: 64}.AttnFactor(512))
	phiScale := float32(f * f / 8)
	mistral := func(t *testing.T) string {
		dir := t.TempDir()
		spec := base
		spec.RopeTheta = 1e6
		if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
			t.Fatal(err)
		}
		editJSON(t, dir, func(c map[string]any) map[string]any {
			c["architectures"], c["model_type"], c["sliding_window"] = []string{"MistralForCausalLM"}, "mistral", 7
			return c
		})
		return dir
	}
	llama3HF := func(t *testing.T) string {
		dir := t.TempDir()
		if err := modeltest.WriteHF(dir, llama3, kernels.F32); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	const global = "global (every layer reads the whole context)"
	noQK := "false (over whole projections: false)"
	for _, tc := range []struct {
		name  string
		write func(t *testing.T) string
		want  map[string]string // "" : the line must be absent
	}{
		{"gemma2", gguf(gemma2), map[string]string{
			"rope":        "theta 10000, style halves, no scaling",
			"qk norm":     noQK,
			"attention":   "sliding window of 5 tokens on 2 of 3 layers (RoPE base 10000); global on layers 1",
			"query scale": "0.25 (1/√16, the head size)",
			"soft-caps":   "attention scores 2, final logits 30 (s → cap·tanh(s/cap))",
			"experts":     "", "rotary": "", "longrope": "",
		}},
		{"phi3-long", gguf(phiLong), map[string]string{
			"rotary":   "partial: the first 48 of 64 head elements rotate, the other 16 pass through",
			"longrope": fmt.Sprintf("long factors active (context 512 > original 64; a --context of 64 or less takes the short ones); attention factor %g", modeltest.LongRoPE{OriginalContext: 64}.AttnFactor(512)),
			// With partial rotary the attention factor is folded into the
			// rotated rows at load, not into the query scale.
			"attention": global, "query scale": "", "soft-caps": "",
		}},
		{"phi3-full-long", gguf(phiFull), map[string]string{
			"rotary": "",
			// Every element rotates: the factor's square scales q·k instead.
			"query scale": fmt.Sprintf("%.6g (%.6g × the head size's 1/√64)", phiScale, float64(phiScale)*8),
		}},
		{"phi3-short-window", gguf(phiShort), map[string]string{
			"rotary":      "",
			"longrope":    "short factors active (context 64 ≤ original 64); attention factor 1",
			"attention":   "sliding window of 17 tokens on 2 of 2 layers (RoPE base 10000); no global layers",
			"query scale": "0.125 (1/√64, the head size)",
		}},
		{"mistral-hf", mistral, map[string]string{
			"rope":      "theta 1e+06, style halves, no scaling",
			"attention": "sliding window of 7 tokens on 3 of 3 layers (RoPE base 1e+06); no global layers",
			"longrope":  "", "query scale": "", "soft-caps": "",
		}},
		{"mixtral", gguf(mixtral), map[string]string{
			"experts":       "4 per layer, 2 per token (expert ffn 128, top-k weights renormalised: true)",
			"shared expert": "", "qk norm": noQK, "attention": global,
		}},
		{"qwen2moe", gguf(qwen2moe), map[string]string{
			"experts":       "8 per layer, 2 per token (expert ffn 64, top-k weights renormalised: false)",
			"shared expert": "ffn 96, sigmoid-gated per token",
		}},
		{"olmoe", gguf(olmoe), map[string]string{
			"experts": "8 per layer, 4 per token (expert ffn 64, top-k weights renormalised: false)",
			"qk norm": "true (over whole projections: true)",
		}},
		{"llama3-scaling", gguf(llama3), map[string]string{
			"rope":      "theta 10000, style interleaved, each pair's frequency divided by rope_freqs.weight (Llama 3's scaling as GGUF stores it)",
			"attention": global, "experts": "", "rotary": "", "longrope": "", "query scale": "", "soft-caps": "",
		}},
		{"llama3-scaling-hf", llama3HF, map[string]string{
			"rope": "theta 10000, style halves, llama3 scaling ×8 from 64 tokens (low-frequency factor 1, high 4)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Open(tc.write(t))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			cfg, err := src.Config()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range Describe(cfg, src) {
				if _, dup := got[f.Key]; dup {
					t.Errorf("%q twice", f.Key)
				}
				got[f.Key] = f.Value
			}
			for k, want := range tc.want {
				if v, ok := got[k]; want == "" && ok {
					t.Errorf("%s: %q, want no such line", k, v)
				} else if want != "" && v != want {
					t.Errorf("%s:\n got %q\nwant %q", k, v, want)
				}
			}
		})
	}
}
