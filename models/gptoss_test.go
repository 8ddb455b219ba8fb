package models

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestGPTOSSConfig reads the window pattern, YaRN and the folded attention
// factor from a gpt-oss file, and refuses YaRN on an architecture whose pass
// does not apply its attention factor.
func TestGPTOSSConfig(t *testing.T) {
	var spec modeltest.Spec
	for _, m := range tinyNewestModels {
		if m.name == "gptoss-f32" {
			spec = m.spec
		}
	}
	path := filepath.Join(t.TempDir(), "oss.gguf")
	if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
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
	ms := 1 + 0.1*math.Log(4) // cos and sin scale for YaRN ×4
	if s := c.RopeScaling; s == nil || !s.YaRN || s.Factor != 4 || s.OriginalContext != 16 || s.BetaFast != 32 || s.BetaSlow != 1 ||
		!slices.Equal(c.WindowLayers, []bool{true, false, true, false}) || c.Window != 5 || !c.QKVBias || c.TiedEmbeddings ||
		math.Abs(float64(c.QueryScale)-ms*ms/4) > 1e-6 || c.Reasoning() != ReasoningHarmony {
		t.Fatalf("config %+v, scaling %+v", c, c.RopeScaling)
	}
	// ggml's correction dims for d = 16, 16 tokens, base 150000: below the
	// first every pair keeps its frequency, past the last it is divided by 4.
	f, plain := yarnFrequencies(c), ropeFrequencies(Config{HeadDim: 16, RopeTheta: 150000})
	if math.Abs(float64(f[0]-plain[0])) > 1e-7 || math.Abs(float64(f[7]-plain[7]/4)) > 1e-6*float64(plain[7]) {
		t.Errorf("YaRN frequencies %v, plain %v", f, plain)
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
		if k == "general.architecture" {
			v = "qwen2"
		}
		if len(k) > 8 && k[:8] == "gpt-oss." {
			k = "qwen2." + k[8:]
		}
		meta = append(meta, modeltest.KV{Key: k, Value: v})
	}
	q, err := parseGGUF("qwen2.gguf", encode(t, meta, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Config(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("YaRN on qwen2: %v, want ErrUnsupported", err)
	}
}
