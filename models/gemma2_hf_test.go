package models

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gemma2Tiny has caps low enough to bend its scores and logits, window
// layers 0 and 2 of 5 tokens around a global layer 1, and a RoPE base that is
// not Gemma 3's window-layer default.
var gemma2Tiny = modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 44,
	Gemma: true, Gemma2: true, Window: 5, AttnSoftcap: 2, FinalSoftcap: 20, RMSEps: 1e-6, RopeTheta: 20000}

// gemma2Logits runs the model at path over 12 tokens, one a step (past the
// window), and returns its config and each step's logits.
func gemma2Logits(t *testing.T, path string) (Config, [][]float32) {
	t.Helper()
	m := loadTinyAt(t, path)
	r := newSoloRunner(m)
	var out [][]float32
	for _, tok := range []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5} {
		out = append(out, slices.Clone(r.feed(t, []int32{tok})))
	}
	return m.Config(), out
}

// TestGemma2HFMatchesGGUF: the same Gemma 2 weights as GGUF (norms stored as
// 1 + w) and as a Gemma2ForCausalLM checkpoint (w, the loader adds 1) read as
// the same configuration and give the same logits; with the checkpoint's
// final soft-cap null (none, as transformers reads it) they differ, so the
// cap is read from config.json, not defaulted.
func TestGemma2HFMatchesGGUF(t *testing.T) {
	gguf := filepath.Join(t.TempDir(), "g2.gguf")
	if err := modeltest.WriteGGUF(gguf, gemma2Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, gemma2Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	gc, want := gemma2Logits(t, gguf)
	hc, got := gemma2Logits(t, hf)
	if hc.Arch != "gemma2" || hc.Window != 5 || !slices.Equal(hc.WindowLayers, []bool{true, false, true}) ||
		hc.AttnSoftcap != 2 || hc.FinalSoftcap != 20 || hc.QueryScale != 0.25 || hc.RopeThetaLocal != 20000 || hc.QKNorm || !hc.TiedEmbeddings {
		t.Fatalf("checkpoint config %+v", hc)
	}
	for _, c := range []struct {
		name     string
		hf, gguf any
	}{{"window", hc.Window, gc.Window}, {"window layers", hc.WindowLayers, gc.WindowLayers}, {"attention cap", hc.AttnSoftcap, gc.AttnSoftcap},
		{"final cap", hc.FinalSoftcap, gc.FinalSoftcap}, {"query scale", hc.QueryScale, gc.QueryScale}, {"local base", hc.RopeThetaLocal, gc.RopeThetaLocal}} {
		if !equalAny(c.hf, c.gguf) {
			t.Errorf("%s: %v from the checkpoint, %v from GGUF", c.name, c.hf, c.gguf)
		}
	}
	worst := 0.0
	for p := range want {
		for i := range want[p] {
			worst = max(worst, math.Abs(float64(got[p][i]-want[p][i])))
		}
	}
	t.Logf("largest |checkpoint − GGUF| logit difference over 12 steps: %.3g", worst)
	if worst > 1e-4 {
		t.Errorf("logits differ by up to %g between the checkpoint and GGUF", worst)
	}

	editJSON(t, hf, func(c map[string]any) map[string]any { c["final_logit_softcapping"] = nil; return c })
	nc, uncapped := gemma2Logits(t, hf)
	if nc.FinalSoftcap != 0 || nc.AttnSoftcap != 2 {
		t.Fatalf("final_logit_softcapping null: caps %g (attention) and %g (final), want 2 and none", nc.AttnSoftcap, nc.FinalSoftcap)
	}
	var over float64
	for i, v := range uncapped[len(uncapped)-1] {
		over = max(over, math.Abs(float64(v-want[len(want)-1][i])))
	}
	if over < 1e-3 {
		t.Errorf("without the final cap the logits moved by at most %g: the cap changes nothing this test can see", over)
	}
}

func equalAny(a, b any) bool {
	if x, ok := a.([]bool); ok {
		return slices.Equal(x, b.([]bool))
	}
	return a == b
}

// TestGemma2HFConfig checks transformers' Gemma2Config defaults for what a
// config.json leaves out, layer_types, the 27B's query_pre_attn_scalar, and
// the refusals.
func TestGemma2HFConfig(t *testing.T) {
	write := func(t *testing.T, edit func(map[string]any) map[string]any) (Config, error) {
		return tinyHFConfig(t, gemma2Tiny, edit)
	}
	c, err := write(t, func(c map[string]any) map[string]any {
		for _, k := range []string{"attn_logit_softcapping", "final_logit_softcapping", "sliding_window", "query_pre_attn_scalar", "hidden_activation", "rope_theta"} {
			delete(c, k)
		}
		return c
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.Window != 4096 || c.QueryScale != 1.0/16 || c.RopeTheta != 10000 || c.RopeThetaLocal != 10000 ||
		!slices.Equal(c.WindowLayers, []bool{true, false, true}) {
		t.Errorf("defaults: caps %g/%g, window %d over %v, query scale %g, bases %g/%g; want 50/30, 4096 over even layers, 1/16, 10000/10000",
			c.AttnSoftcap, c.FinalSoftcap, c.Window, c.WindowLayers, c.QueryScale, c.RopeTheta, c.RopeThetaLocal)
	}
	c, err = write(t, func(c map[string]any) map[string]any {
		c["layer_types"] = []string{"full_attention", "sliding_attention", "sliding_attention"}
		c["query_pre_attn_scalar"] = 144
		c["attn_logit_softcapping"] = nil
		return c
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.WindowLayers, []bool{false, true, true}) || c.QueryScale != 1.0/12 || c.AttnSoftcap != 0 || c.FinalSoftcap != 20 {
		t.Errorf("layer_types, scalar 144, attention cap null: layers %v, query scale %g, caps %g/%g", c.WindowLayers, c.QueryScale, c.AttnSoftcap, c.FinalSoftcap)
	}
	if c, err = write(t, func(c map[string]any) map[string]any { c["sliding_window"] = nil; return c }); err != nil || c.Window != 0 || c.WindowLayers != nil {
		t.Errorf("sliding_window null: window %d over %v, %v; want none", c.Window, c.WindowLayers, err)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any) map[string]any
		want error
	}{
		{"zero attention cap", func(c map[string]any) map[string]any { c["attn_logit_softcapping"] = 0; return c }, ErrMalformed},
		{"negative final cap", func(c map[string]any) map[string]any { c["final_logit_softcapping"] = -30; return c }, ErrMalformed},
		{"zero query scalar", func(c map[string]any) map[string]any { c["query_pre_attn_scalar"] = 0; return c }, ErrMalformed},
		{"gelu, not tanh", func(c map[string]any) map[string]any { c["hidden_activation"] = "gelu"; return c }, ErrUnsupported},
		{"layer_types of the wrong length", func(c map[string]any) map[string]any {
			c["layer_types"] = []string{"sliding_attention", "full_attention"}
			return c
		}, ErrMalformed},
	} {
		if _, err := write(t, tc.edit); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}
