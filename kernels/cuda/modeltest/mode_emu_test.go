//go:build cudaemu && !cuda

package modeltest

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
)

// testShape is the model the comparisons run: on the CPU emulator a small
// Llama (GQA, halves RoPE, tied embeddings) that still takes every kernel
// path SmolLM2's shape does.
func testShape() models.Config {
	return models.Config{Arch: "llama", Layers: 2, Hidden: 256, FFN: 512, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 512, ContextLen: 512, RMSEps: 1e-5, RopeTheta: 10000, RopeStyle: kernels.RoPEHalves, TiedEmbeddings: true}
}

// emulatedModel: the tests run on the CPU emulator, where a real model's
// steps are slow enough to run fewer of them.
const emulatedModel = true
