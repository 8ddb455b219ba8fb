package main

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/models/modeltest"
)

// TestInspectPhi3HF runs the command on a Phi-4-mini-style checkpoint
// directory (partial rotary, LongRoPE factors in config.json): it shows the
// fused tensors under GGUF's names, the factors as the F32 tensors the GGUF
// file stores, the rotary and LongRoPE lines the GGUF file gives, and the
// same parameter count.
func TestInspectPhi3HF(t *testing.T) {
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 8,
		Phi3: true, RopeDims: 12, Tied: true, ContextLen: 256, LongRoPE: &modeltest.LongRoPE{OriginalContext: 32}}
	hf, gguf := writeHFAndGGUF(t, spec)
	run := func(args ...string) string { return inspectOutput(t, args...) }
	out := run("--model", hf, "--tensors")
	rotary := `rotary +partial: the first 12 of 16 head elements rotate, the other 4 pass through`
	longrope := fmt.Sprintf(`longrope +long factors active \(context 256 > original 32; a --context of 32 or less takes the short ones\); attention factor %g`,
		modeltest.LongRoPE{OriginalContext: 32}.AttnFactor(256))
	for _, w := range []string{
		`architecture +phi3`,
		rotary,
		longrope,
		`  blk\.1\.attn_qkv\.weight +BF16 +\[128 64\] +16384 bytes`,
		`  blk\.0\.ffn_up\.weight +BF16 +\[256 64\] +32768 bytes`,
		`  rope_factors_long\.weight +F32 +\[6\] +24 bytes`,
		`  rope_factors_short\.weight +F32 +\[6\] +24 bytes`,
	} {
		if !regexp.MustCompile("(?m)^" + w + "$").MatchString(out) {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
	g := run("--model", gguf)
	for _, w := range []string{rotary, longrope} {
		if !regexp.MustCompile("(?m)^" + w + "$").MatchString(g) {
			t.Errorf("GGUF: no line %q in:\n%s", w, g)
		}
	}
	params := regexp.MustCompile(`(?m)^parameters +(\d+) `)
	if h, g := params.FindStringSubmatch(out), params.FindStringSubmatch(g); h == nil || g == nil || h[1] != g[1] {
		t.Errorf("parameters: %q from the checkpoint, %q from GGUF", h, g)
	}
}
