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

// smollm3Tiny has NoPE layers 3 and 7.
var smollm3Tiny = modeltest.Spec{Layers: 8, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 46, SmolLM3: true, RopeTheta: 5e6}

func smollm3Logits(t *testing.T, path string) (Config, [][]float32) {
	t.Helper()
	m := loadTinyAt(t, path)
	r := newSoloRunner(m)
	var out [][]float32
	for _, tok := range []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64} {
		out = append(out, slices.Clone(r.feed(t, []int32{tok})))
	}
	return m.Config(), out
}

// TestSmolLM3HFMatchesGGUF: the same weights as GGUF (Q and K permuted,
// interleaved RoPE, NoPE layers implied by the arch) and as a
// SmolLM3ForCausalLM checkpoint (unpermuted, halves RoPE, no_rope_layers in
// config.json) read as the same NoPE layers and give the same logits; with
// no_rope_layers saying every layer rotates they differ, so the list is
// read, not defaulted; a list of the wrong length is refused.
func TestSmolLM3HFMatchesGGUF(t *testing.T) {
	gguf := filepath.Join(t.TempDir(), "s3.gguf")
	if err := modeltest.WriteGGUF(gguf, smollm3Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, smollm3Tiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	gc, want := smollm3Logits(t, gguf)
	hc, got := smollm3Logits(t, hf)
	if hc.Arch != "smollm3" || !slices.Equal(hc.NoRope, gc.NoRope) || !hc.IsNoRopeLayer(3) || !hc.IsNoRopeLayer(7) || hc.IsNoRopeLayer(4) {
		t.Fatalf("NoPE layers %v from the checkpoint, %v from GGUF", hc.NoRope, gc.NoRope)
	}
	// The two layouts sum each q·k in another order (pairs interleaved or in
	// halves), which eight layers carry to ~5e-5 of the logits' scale.
	worst, scale := 0.0, 0.0
	for p := range want {
		for i := range want[p] {
			worst = max(worst, math.Abs(float64(got[p][i]-want[p][i])))
			scale = max(scale, math.Abs(float64(want[p][i])))
		}
	}
	t.Logf("largest |checkpoint − GGUF| logit difference over %d steps: %.3g (logits up to %.3g)", len(want), worst, scale)
	if worst > 1e-4*scale {
		t.Errorf("logits differ by up to %g (of %g) between the checkpoint and GGUF", worst, scale)
	}

	editJSON(t, hf, func(c map[string]any) map[string]any {
		c["no_rope_layers"] = []int{1, 1, 1, 1, 1, 1, 1, 1}
		return c
	})
	rc, rotated := smollm3Logits(t, hf)
	if len(slices.DeleteFunc(slices.Clone(rc.NoRope), func(b bool) bool { return !b })) != 0 {
		t.Fatalf("no_rope_layers all 1: NoPE layers %v", rc.NoRope)
	}
	var moved float64
	for i, v := range rotated[len(rotated)-1] {
		moved = max(moved, math.Abs(float64(v-want[len(want)-1][i])))
	}
	if moved < 1e-2 {
		t.Errorf("rotating every layer moved the last logits by only %g", moved)
	}

	editJSON(t, hf, func(c map[string]any) map[string]any { c["no_rope_layers"] = []int{1, 0}; return c })
	src, err := Open(hf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Config(); !errors.Is(err, ErrMalformed) {
		t.Errorf("no_rope_layers of 2 for 8 layers: %v, want ErrMalformed", err)
	}
}

// TestSmolLM3NoRopeLayers: every fourth layer skips RoPE, as llama.cpp's
// n_no_rope_layer_step = 4 makes it.
func TestSmolLM3NoRopeLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s3.gguf")
	if err := modeltest.WriteGGUF(path, modeltest.Spec{Layers: 9, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, SmolLM3: true}, kernels.F32); err != nil {
		t.Fatal(err)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, err := src.Config()
	if err != nil {
		t.Fatal(err)
	}
	var nope []int
	for i := range c.Layers {
		if c.IsNoRopeLayer(i) {
			nope = append(nope, i)
		}
	}
	if !slices.Equal(nope, []int{3, 7}) || c.RopeStyle != kernels.RoPEInterleaved || c.Reasoning() != ReasoningThinkTags {
		t.Errorf("NoPE layers %v, rope %v, reasoning %q", nope, c.RopeStyle, c.Reasoning())
	}
}
