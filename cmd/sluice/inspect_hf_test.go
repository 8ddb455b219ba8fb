package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestInspectMoEHF runs the command on a Qwen2-MoE checkpoint directory (one
// tensor per expert): it shows the mixture, where the stacked expert
// tensors come from, each stacked tensor at its loaded shape with --tensors,
// and the same parameter count as the model written as GGUF.
func TestInspectMoEHF(t *testing.T) {
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Seed: 7,
		QKVBias: true, Experts: 6, ExpertsUsed: 2, ExpertFFN: 32, SharedExpertFFN: 48}
	hf, gguf := writeHFAndGGUF(t, spec)
	run := func(args ...string) string { return inspectOutput(t, args...) }
	out := run("--model", hf, "--tensors")
	for _, w := range []string{
		`architecture +qwen2moe`,
		`experts +6 per layer, 2 per token \(expert ffn 32, top-k weights renormalised: false\)`,
		`shared expert +ffn 48, sigmoid-gated per token`,
		`expert layout +blk\.N\.ffn_\{gate,up,down\}_exps: gate BF16 \[6 32 64\], up BF16 \[6 32 64\], down BF16 \[6 64 32\]; ` +
			`stacked at load from 6 tensors each \(model\.layers\.N\.mlp\.experts\.E\.\{gate_proj,up_proj,down_proj\}\.weight\), one copy per stacked tensor`,
		`  blk\.1\.ffn_down_exps\.weight +BF16 +\[6 64 32\] +24576 bytes`,
		`  blk\.1\.ffn_gate_inp_shexp\.weight +BF16 +\[64\] +128 bytes`,
	} {
		if !regexp.MustCompile("(?m)^" + w + "$").MatchString(out) {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
	params := regexp.MustCompile(`(?m)^parameters +(\d+) `)
	g := run("--model", gguf)
	if h, g := params.FindStringSubmatch(out), params.FindStringSubmatch(g); h == nil || g == nil || h[1] != g[1] {
		t.Errorf("parameters: %q from the checkpoint, %q from GGUF", h, g)
	}
	if !strings.Contains(g, "; stacked in the file\n") {
		t.Errorf("GGUF expert layout not shown as stored stacked:\n%s", g)
	}
}

// writeHFAndGGUF writes spec as a BF16 Hugging Face directory and as an F32
// GGUF file, for inspect tests that compare the two.
func writeHFAndGGUF(t *testing.T, spec modeltest.Spec) (hf, gguf string) {
	t.Helper()
	dir := t.TempDir()
	hf, gguf = filepath.Join(dir, "hf"), filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteHF(hf, spec, kernels.BF16); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(gguf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	return hf, gguf
}

// inspectOutput runs `sluice inspect` with args and returns what it printed.
func inspectOutput(t *testing.T, args ...string) string {
	t.Helper()
	var out strings.Builder
	if err := inspect(&out, args); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
