package loader

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Both model layouts load into a running engine: a GGUF file carries its own
// vocabulary, a Hugging Face directory its tokenizer.json. The same weights
// must give the same greedy tokens either way.
func TestLoadGGUFAndHFDirectory(t *testing.T) {
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 3}
	dir := t.TempDir()
	gguf := filepath.Join(dir, "tiny.gguf")
	hf := filepath.Join(dir, "tiny-hf")
	if err := modeltest.WriteGGUF(gguf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	var outs [][]int32
	for _, path := range []string{gguf, hf} {
		m, err := Load(path, Options{Threads: 1, KVBlocks: 16, MaxSeqs: 2})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids, err := m.Backend().Tokenizer.Encode("hello world", true)
		if err != nil || len(ids) == 0 {
			t.Fatalf("%s: encode: %v %v", path, ids, err)
		}
		seq, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		for tok := range seq.Tokens() {
			got = append(got, tok.ID)
		}
		outs = append(outs, append(ids, got...))
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Fatalf("GGUF gave %v, HF directory %v", outs[0], outs[1])
	}
}
