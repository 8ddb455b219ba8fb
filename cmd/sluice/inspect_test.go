package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestInspect runs the command on a tiny Gemma 2 and a Qwen2-MoE: the lines
// models.Describe gives reach the table between the shapes and the KV cache,
// and the weight totals follow.
func TestInspect(t *testing.T) {
	gemma2 := modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 5,
		Gemma: true, Gemma2: true, Window: 5, AttnSoftcap: 2}
	moe := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 6,
		QKVBias: true, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedExpertFFN: 96}
	for _, tc := range []struct {
		name string
		spec modeltest.Spec
		want []string // regular expressions, each matching a whole line, in order
	}{
		{"gemma2", gemma2, []string{
			`architecture +gemma2`,
			`rope +theta 10000, style halves, no scaling`,
			`attention +sliding window of 5 tokens on 2 of 3 layers \(RoPE base 10000\); global on layers 1`,
			`query scale +0\.25 \(1/√16, the head size\)`,
			`soft-caps +attention scores 2, final logits 30 \(s → cap·tanh\(s/cap\)\)`,
			`kv cache +384 bytes/token .*`,
			`parameters +\d+ \(\d+M\)`,
		}},
		{"qwen2moe", moe, []string{
			`architecture +qwen2moe`,
			`experts +8 per layer, 2 per token \(expert ffn 64, top-k weights renormalised: false\)`,
			`shared expert +ffn 96, sigmoid-gated per token`,
			`attention +global \(every layer reads the whole context\)`,
			`kv cache +256 bytes/token \(F16, all layers\)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name+".gguf")
			if err := modeltest.WriteGGUF(path, tc.spec, kernels.Q8_0); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := inspect(&out, []string{"--model", path}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(out.String(), "\n")
			at := 0
			for _, w := range tc.want {
				re := regexp.MustCompile("^" + w + "$")
				for at < len(lines) && !re.MatchString(lines[at]) {
					at++
				}
				if at == len(lines) {
					t.Fatalf("no line %q after the ones before it in:\n%s", w, out.String())
				}
			}
			if tc.spec.Gemma2 {
				return
			}
			if strings.Contains(out.String(), "soft-caps") || strings.Contains(out.String(), "query scale") {
				t.Errorf("a Qwen2-MoE shows Gemma's lines:\n%s", out.String())
			}
		})
	}
}
