package models

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gemmaNoMoE is the CPU backend with the Gemma and mixture kernels a dense
// Gemma 4 and other MoE models use, but not Gemma 4's GeGLUMoEFFN: a
// backend (CUDA today) that would run the 26B-A4B's attention and dense
// FFN but not its experts.
type gemmaNoMoE struct {
	kernels.Backend
	kernels.GemmaOps
	kernels.SoftCapOps
	kernels.MoEOps
}

// TestGemma4MoERefusedWithoutKernel: a Gemma 4 file with experts on a
// backend without GeGLUMoEFFN is refused at load, naming the kernel, not
// run without its mixture; sluice inspect's description names the layout.
func TestGemma4MoERefusedWithoutKernel(t *testing.T) {
	var spec modeltest.Spec
	for _, m := range tinyNewestModels {
		if m.name == "gemma4moe-q8_0" {
			spec = m.spec
		}
	}
	path := filepath.Join(t.TempDir(), "g4moe.gguf")
	if err := modeltest.WriteGGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := cpu.New(1)
	defer c.Close()
	opts := Options{MaxBatchTokens: 4, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8, ContextLen: 32}
	_, err = Load(src, gemmaNoMoE{c, c, c, c}, opts)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "GeGLUMoEFFN") {
		t.Errorf("load without GeGLUMoEFFN: %v, want ErrUnsupported naming it", err)
	}
	if _, err := Load(src, c, opts); err != nil {
		t.Fatalf("load on the CPU backend: %v", err)
	}
	cfg, err := src.Config()
	if err != nil {
		t.Fatal(err)
	}
	var line, layout string
	for _, f := range Describe(cfg, src) {
		switch f.Key {
		case "expert ffn":
			line = f.Value
		case "expert layout":
			layout = f.Value
		}
	}
	if !strings.Contains(layout, "gate_up Q8_0 [8 128 64], down Q8_0 [8 64 64]") {
		t.Errorf("describe's expert layout %q lacks the fused experts' shapes", layout)
	}
	for _, want := range []string{"every layer", "top 2 renormalised", "ffn_down_exps.scale", "fused"} {
		if !strings.Contains(line, want) {
			t.Errorf("describe's expert ffn %q lacks %q", line, want)
		}
	}
}
