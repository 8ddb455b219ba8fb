package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestCut: the cut file is the source's first layers byte for byte, its
// other tensors and metadata kept, block_count lowered, the embedding in
// the asked type; layer counts it cannot cut to are refused.
func TestCut(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.gguf"), filepath.Join(dir, "dst.gguf")
	spec := modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Tied: true, Seed: 7}
	if err := modeltest.WriteGGUF(src, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	if _, err := cut(src, dst, 1, kernels.Q4_1); err != nil {
		t.Fatal(err)
	}
	a, err := models.OpenGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := models.OpenGGUF(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg, err := b.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Layers != 1 || cfg.Hidden != 64 || cfg.Vocab != 300 {
		t.Errorf("cut config: %d layers, hidden %d, vocab %d; want 1, 64, 300", cfg.Layers, cfg.Hidden, cfg.Vocab)
	}
	for _, ti := range a.Tensors() {
		l, inBlock := block(ti.Name)
		switch {
		case inBlock && l >= 1:
			if b.Has(ti.Name) {
				t.Errorf("%s kept", ti.Name)
			}
		case ti.Name == "token_embd.weight":
			e, err := b.Tensor(ti.Name)
			if err != nil || e.DType != kernels.Q4_1 {
				t.Errorf("embedding: %v, type %v; want Q4_1", err, e.DType)
			}
		default:
			x, _ := a.Tensor(ti.Name)
			y, err := b.Tensor(ti.Name)
			if err != nil || !bytes.Equal(x.Data, y.Data) || x.DType != y.DType {
				t.Errorf("%s not kept as it was (%v)", ti.Name, err)
			}
		}
	}
	if len(b.Keys()) != len(a.Keys()) {
		t.Errorf("%d metadata keys, source has %d", len(b.Keys()), len(a.Keys()))
	}
	if _, err := b.Vocab(); err != nil {
		t.Errorf("the cut file's vocabulary: %v", err)
	}
	for _, n := range []int{0, 4} {
		if _, err := cut(src, dst, n, kernels.Q4_1); err == nil {
			t.Errorf("cut to %d of 3 layers: no error", n)
		}
	}
}
