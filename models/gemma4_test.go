package models

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gemma4Meta writes the tiny Gemma 4 golden model's file and returns its
// metadata in order, for TestGemma4Config to vary.
func gemma4Meta(t *testing.T) []modeltest.KV {
	t.Helper()
	path := filepath.Join(t.TempDir(), "g4.gguf")
	var spec modeltest.Spec
	for _, m := range tinyNewestModels {
		if m.name == "gemma4-f32" {
			spec = m.spec
		}
	}
	if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseGGUF(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	var meta []modeltest.KV
	for _, k := range g.Keys() {
		v, _ := g.Meta(k)
		meta = append(meta, modeltest.KV{Key: k, Value: v})
	}
	return meta
}

func withKV(meta []modeltest.KV, key string, v any) []modeltest.KV {
	out := slices.Clone(meta)
	for i := range out {
		if out[i].Key == key {
			out[i].Value = v
			return out
		}
	}
	return append(out, modeltest.KV{Key: key, Value: v})
}

// TestGemma4Config reads the per-kind head shapes, the window pattern and
// the unscaled attention from gemma4.* keys, the E2B/E4B shapes (per-layer
// widths, shared K/V), the 26B-A4B's experts, and refuses what the forward
// pass does not run or a file cannot mean.
func TestGemma4Config(t *testing.T) {
	meta := gemma4Meta(t)
	g, err := parseGGUF("g4.gguf", encode(t, meta, nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Config()
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, true, true, false}
	if c.HeadDim != 32 || c.KVHeads != 1 || c.HeadDimSWA != 16 || c.KVHeadsSWA != 2 || !slices.Equal(c.WindowLayers, want) ||
		c.Window != 5 || c.QueryScale != 1 || c.FinalSoftcap != 30 || c.RopeThetaLocal != 10000 || c.RopeTheta != 1e6 {
		t.Errorf("config %+v", c)
	}
	if c.LayerHeadDim(0) != 16 || c.LayerHeadDim(2) != 32 || c.LayerKVHeads(1) != 2 || c.LayerKVHeads(5) != 1 {
		t.Errorf("per-layer shapes: %d %d %d %d", c.LayerHeadDim(0), c.LayerHeadDim(2), c.LayerKVHeads(1), c.LayerKVHeads(5))
	}
	// Per layer: 4 window layers of 2×16, 2 global of 1×32; K and V, F16.
	if got := c.KVBytesPerToken(); got != 2*2*(4*2*16+2*32) {
		t.Errorf("KV bytes per token %d", got)
	}
	if g, err := parseGGUF("g4.gguf", encode(t, slices.DeleteFunc(slices.Clone(meta), func(kv modeltest.KV) bool {
		return kv.Key == "gemma4.final_logit_softcapping"
	}), nil)); err != nil {
		t.Fatal(err)
	} else if c, err := g.Config(); err != nil || c.FinalSoftcap != 30 {
		t.Errorf("without final_logit_softcapping: cap %g (%v), want llama.cpp's default 30", c.FinalSoftcap, err)
	}
	small := withKV(withKV(withKV(meta, "gemma4.attention.shared_kv_layers", uint32(3)),
		"gemma4.feed_forward_length", []int32{128, 128, 128, 256, 256, 256}), "gemma4.embedding_length_per_layer_input", uint32(32))
	if g, err := parseGGUF("g4.gguf", encode(t, small, nil)); err != nil {
		t.Fatal(err)
	} else if c, err := g.Config(); err != nil {
		t.Errorf("E2B-like keys: %v", err)
	} else {
		var src []int
		for i := range c.Layers {
			src = append(src, c.KVSource(i))
		}
		// Layers 3 and 4 (window) read layer 1, layer 5 (global) layer 2;
		// the shared ones keep no K/V: 3 window layers of 2×16 and 1 global of 1×32.
		if !slices.Equal(src, []int{0, 1, 2, 1, 1, 2}) || c.FFN != 256 || c.LayerFFNWidth(2) != 128 || c.LayerFFNWidth(3) != 256 ||
			c.PerLayerEmbd != 32 || c.KVBytesPerToken() != 2*2*(2*2*16+32) {
			t.Errorf("E2B-like config: sources %v, ffn %d %v, per-layer %d, KV bytes %d", src, c.FFN, c.LayerFFN, c.PerLayerEmbd, c.KVBytesPerToken())
		}
	}
	moe := withKV(withKV(withKV(meta, "gemma4.expert_count", uint32(128)), "gemma4.expert_used_count", uint32(8)),
		"gemma4.expert_feed_forward_length", uint32(704))
	if g, err := parseGGUF("g4.gguf", encode(t, moe, nil)); err != nil {
		t.Fatal(err)
	} else if c, err := g.Config(); err != nil {
		t.Errorf("26B-A4B-like keys: %v", err)
	} else if c.Experts != 128 || c.ExpertsUsed != 8 || c.ExpertFFN != 704 || !c.ExpertNorm || c.FFN != 128 {
		t.Errorf("26B-A4B-like config: %d experts, top %d, expert ffn %d, renormalised %v, dense ffn %d", c.Experts, c.ExpertsUsed, c.ExpertFFN, c.ExpertNorm, c.FFN)
	}
	if c.Reasoning() != ReasoningGemma4Channel {
		t.Errorf("reasoning %q", c.Reasoning())
	}
	for _, tc := range []struct {
		name string
		meta []modeltest.KV
		want error
	}{
		{"experts without top k", withKV(meta, "gemma4.expert_count", uint32(8)), ErrMalformed},
		// Shared K/V needs a window then a global layer before the shared ones.
		{"shared kv after a global", withKV(meta, "gemma4.attention.shared_kv_layers", uint32(2)), ErrMalformed},
		{"shared kv all", withKV(meta, "gemma4.attention.shared_kv_layers", uint32(5)), ErrMalformed},
		{"ffn per layer short", withKV(meta, "gemma4.feed_forward_length", []int32{128, 256}), ErrMalformed},
		{"ffn per layer zero", withKV(meta, "gemma4.feed_forward_length", []int32{128, 128, 0, 256, 256, 256}), ErrMalformed},
		{"partial rotary swa", withKV(meta, "gemma4.rope.dimension_count_swa", uint32(8)), ErrUnsupported},
		{"pattern length", withKV(meta, "gemma4.attention.sliding_window_pattern", []bool{true, false}), ErrMalformed},
		{"pattern missing", withKV(meta, "gemma4.attention.sliding_window_pattern", uint32(6)), ErrMalformed},
		{"kv heads mixed", withKV(meta, "gemma4.attention.head_count_kv", []int32{2, 1, 1, 2, 2, 1}), ErrMalformed},
		{"kv heads short", withKV(meta, "gemma4.attention.head_count_kv", []int32{2, 2}), ErrMalformed},
		{"value length", withKV(meta, "gemma4.attention.value_length", uint32(16)), ErrMalformed},
		{"no window", withKV(meta, "gemma4.attention.sliding_window", uint32(0)), ErrMalformed},
	} {
		g, err := parseGGUF("g4.gguf", encode(t, tc.meta, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Config(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
