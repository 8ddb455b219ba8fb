package models

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// checkFinalCap asserts capped = c·tanh(uncapped/c), the final soft-cap,
// position by position, to float32 rounding of values up to c.
func checkFinalCap(t *testing.T, capped, uncapped [][]float32, c float64) {
	t.Helper()
	worst, moved := 0.0, 0.0
	for p := range capped {
		for i, v := range uncapped[p] {
			want := c * math.Tanh(float64(v)/c)
			worst = max(worst, math.Abs(float64(capped[p][i])-want))
			moved = max(moved, math.Abs(float64(capped[p][i]-v)))
		}
	}
	t.Logf("final cap %g: largest |logit − %g·tanh(uncapped/%g)| %.3g; the cap moved logits by up to %.3g", c, c, c, worst, moved)
	if worst > 1e-6*c {
		t.Errorf("final cap %g: logits are up to %g from c·tanh(uncapped/c)", c, worst)
	}
	if moved < 1e-2 {
		t.Errorf("final cap %g moved the logits by at most %g: the check is blind", c, moved)
	}
}

// TestGemma3HFSoftcapsAsGemma2: the tiny Gemma 2 checkpoint's config.json
// rewritten as a Gemma3ForCausalLM's with the same layout (no q_norm
// tensors, so no QK-norm; one RoPE base) runs Gemma 3's reader over Gemma 2's
// weights and caps: its logits equal the Gemma 2 model's bit for bit. With
// the final cap null the logits are c·tanh(·/c) of the capped ones' inputs,
// and with both null they move (the attention cap is applied).
func TestGemma3HFSoftcapsAsGemma2(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, gemma2Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	_, want := gemma2Logits(t, hf)
	editJSON(t, hf, func(c map[string]any) map[string]any {
		c["architectures"], c["model_type"] = []string{"Gemma3ForCausalLM"}, "gemma3_text"
		c["layer_types"] = []string{"sliding_attention", "full_attention", "sliding_attention"}
		c["rope_local_base_freq"] = c["rope_theta"]
		delete(c, "cache_implementation")
		return c
	})
	c, got := gemma2Logits(t, hf)
	if c.Arch != "gemma3" || c.AttnSoftcap != 2 || c.FinalSoftcap != 20 || c.QKNorm || c.RopeThetaLocal != 20000 || !slices.Equal(c.WindowLayers, []bool{true, false, true}) {
		t.Fatalf("Gemma 3 config %+v", c)
	}
	for p := range want {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("position %d: Gemma 3 with Gemma 2's caps differs from Gemma 2", p)
		}
	}
	editJSON(t, hf, func(c map[string]any) map[string]any { c["final_logit_softcapping"] = nil; return c })
	_, noFinal := gemma2Logits(t, hf)
	checkFinalCap(t, got, noFinal, 20)
	editJSON(t, hf, func(c map[string]any) map[string]any { c["attn_logit_softcapping"] = nil; return c })
	_, none := gemma2Logits(t, hf)
	moved := 0.0
	for p := range none {
		for i := range none[p] {
			moved = max(moved, math.Abs(float64(none[p][i]-noFinal[p][i])))
		}
	}
	if moved < 1e-2 {
		t.Errorf("dropping the attention cap of 2 moved the logits by at most %g: it was not applied", moved)
	}
}

// TestGemma3HFSoftcaps: a Gemma 3 checkpoint (QK-norm, two RoPE bases)
// with attn_logit_softcapping and final_logit_softcapping set reads both and
// applies them; the refusals name the key.
func TestGemma3HFSoftcaps(t *testing.T) {
	caps := func(attn, final any) func(map[string]any) map[string]any {
		return func(c map[string]any) map[string]any {
			c["attn_logit_softcapping"], c["final_logit_softcapping"] = attn, final
			return c
		}
	}
	logits := func(edit func(map[string]any) map[string]any) (Config, [][]float32) {
		hf := filepath.Join(t.TempDir(), "hf")
		if err := modeltest.WriteHF(hf, gemma3Tiny, kernels.F32); err != nil {
			t.Fatal(err)
		}
		editJSON(t, hf, edit)
		return gemma2Logits(t, hf)
	}
	c, capped := logits(caps(1.0, 3.0))
	if c.AttnSoftcap != 1 || c.FinalSoftcap != 3 || !c.QKNorm {
		t.Fatalf("config %+v: want caps 1 and 3 with QK-norm", c)
	}
	_, attnOnly := logits(caps(1.0, nil))
	checkFinalCap(t, capped, attnOnly, 3)
	_, none := logits(caps(nil, nil))
	moved := 0.0
	for p := range none {
		for i := range none[p] {
			moved = max(moved, math.Abs(float64(none[p][i]-attnOnly[p][i])))
		}
	}
	if moved < 1e-2 {
		t.Errorf("dropping the attention cap of 1 moved the logits by at most %g: it was not applied", moved)
	}

	conditional := func(c map[string]any) map[string]any {
		delete(c, "architectures")
		return map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}, "model_type": "gemma3", "text_config": c}
	}
	if c, err := tinyHFConfig(t, gemma3Tiny, func(c map[string]any) map[string]any { return conditional(caps(1.0, nil)(c)) }); err != nil || c.AttnSoftcap != 1 || c.FinalSoftcap != 0 {
		t.Errorf("conditional generation with an attention cap: caps %g/%g, %v; want 1 and none", c.AttnSoftcap, c.FinalSoftcap, err)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any) map[string]any
		want error
		text string
	}{
		{"negative attention cap", caps(-1.0, nil), ErrMalformed, "attn_logit_softcapping = -1"},
		{"zero final cap", caps(nil, 0.0), ErrMalformed, "final_logit_softcapping = 0"},
		{"final cap of a conditional-generation checkpoint", func(c map[string]any) map[string]any { return conditional(caps(nil, 30.0)(c)) },
			ErrUnsupported, "Gemma3ForConditionalGeneration does not apply it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tinyHFConfig(t, gemma3Tiny, tc.edit); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}
