package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

var tinyOut = flag.String("tiny-out", "", "write the tiny golden models' GGUF files here (for scripts/golden/make_tiny_golden.py) and stop")

// tinyGoldenModels are random-weight models of the architectures no real
// model file here covers (and a Gemma 3 whose window is 5 tokens), run by llama.cpp for reference logits (make
// golden-tiny). Rows of 64 are whole Q8_0/Q4_0 blocks.
var tinyGoldenModels = []struct {
	name  string
	spec  modeltest.Spec
	dtype kernels.DType
}{
	{"llama-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 21}, kernels.Q8_0},
	{"qwen3-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 22, QKNorm: true}, kernels.Q8_0},
	{"qwen3moe-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 23, QKNorm: true,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64}, kernels.F32},
	{"qwen3moe-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 24, QKNorm: true,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64}, kernels.Q8_0},
	{"mixtral-q4_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 25,
		Experts: 4, ExpertsUsed: 2}, kernels.Q4_0},
	// Qwen2-MoE: Q/K/V biases, softmax weights not renormalised, a shared
	// expert of 96 behind its sigmoid gate; OLMoE: QK-norm over the whole
	// projections, softmax weights not renormalised (llama.cpp's OLMoE takes
	// attn_k_norm as wide as the embedding: KV heads = heads, as OLMoE-1B-7B
	// has; the reference test covers fewer).
	{"qwen2moe-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 29, QKVBias: true,
		Experts: 4, ExpertsUsed: 2, ExpertFFN: 64, SharedExpertFFN: 96}, kernels.F32},
	{"qwen2moe-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 30, QKVBias: true,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedExpertFFN: 128}, kernels.Q8_0},
	{"olmoe-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 4, FFN: 64, Vocab: 300, Seed: 31, OLMoE: true,
		Experts: 8, ExpertsUsed: 2}, kernels.F32},
	{"olmoe-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 4, FFN: 64, Vocab: 300, Seed: 32, OLMoE: true,
		Experts: 8, ExpertsUsed: 4}, kernels.Q8_0},
	{"gemma3-f32", gemma3Tiny, kernels.F32},
	// Gemma 2: window layers 0 and 2 of 5 tokens, layer 1 global; the F32
	// model's attention cap of 2 bends most scores (about N(0, 1) here), and
	// both final caps bend logits that reach ~70 uncapped.
	{"gemma2-f32", modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 33,
		Gemma: true, Gemma2: true, Window: 5, AttnSoftcap: 2, FinalSoftcap: 20, RMSEps: 1e-6}, kernels.F32},
	{"gemma2-q8_0", modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 34,
		Gemma: true, Gemma2: true, Window: 5, RMSEps: 1e-6}, kernels.Q8_0},
	// Phi-3: partial rotary (12 or 8 of 16 head elements, as Phi-4-mini
	// rotates 3/4) and LongRoPE with the long factors (the 256-token context
	// exceeds the original 32 or 16; attention factor 1.26 and 1.41), which
	// scales the rotated Q rows, quantized ones too; full rotary with the short
	// factors (256 ≤ 256), its factor of 1.06 folded into the query scale.
	{"phi3-f32", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 26,
		Phi3: true, RopeDims: 12, LongRoPE: &modeltest.LongRoPE{OriginalContext: 32}}, kernels.F32},
	{"phi3-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 27,
		Phi3: true, ContextLen: 512, LongRoPE: &modeltest.LongRoPE{OriginalContext: 256}}, kernels.Q8_0},
	{"phi3-q4_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 4, FFN: 128, Vocab: 300, Seed: 28,
		Phi3: true, RopeDims: 8, Tied: true, LongRoPE: &modeltest.LongRoPE{OriginalContext: 16}}, kernels.Q4_0},
}

// tinyGolden is what make_tiny_golden.py writes per model: llama.cpp's
// logits after every position of Tokens, fed as one batch.
type tinyGolden struct {
	ModelSHA256 string      `json:"model_sha256"`
	Tokens      []int32     `json:"tokens"`
	Logits      [][]float64 `json:"logits"` // [position][vocab]
}

// TestTinyLlamaCpp compares every logit of every position with llama.cpp's
// on each tiny model. The file written here must be byte for byte the one
// llama.cpp ran (its sha256 is in the golden file): modeltest is
// deterministic, and a change to it asks for `make golden-tiny`.
func TestTinyLlamaCpp(t *testing.T) {
	dir := *tinyOut
	if dir == "" {
		dir = t.TempDir()
	}
	for _, tm := range tinyGoldenModels {
		t.Run(tm.name, func(t *testing.T) {
			path := filepath.Join(dir, tm.name+".gguf")
			if err := modeltest.WriteGGUF(path, tm.spec, tm.dtype); err != nil {
				t.Fatal(err)
			}
			if *tinyOut != "" {
				return
			}
			raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "tiny", tm.name+".json"))
			if err != nil {
				t.Skipf("no golden data (%v): make golden-tiny", err)
			}
			var g tinyGolden
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(file); hex.EncodeToString(sum[:]) != g.ModelSHA256 {
				t.Fatalf("modeltest now writes a different %s than llama.cpp ran: run make golden-tiny", tm.name)
			}
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			be := cpu.New(1)
			defer be.Close()
			// ContextLen is llama.cpp's context (make_tiny_golden.py's n_ctx of 64,
			// padded to 256): LongRoPE picks its factors by it.
			m, err := Load(src, be, Options{MaxBatchTokens: 5, MaxSeqs: 1, BlockSize: 4, KVBlocks: 16, ContextLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			scale := 0.0
			for _, row := range g.Logits {
				for _, v := range row {
					scale = math.Max(scale, math.Abs(v))
				}
			}
			tol := tinyQuantTol * scale
			if tm.dtype == kernels.F32 {
				tol = tinyF32Tol * scale
			}
			r := newSoloRunner(m)
			worst := 0.0
			for p, tok := range g.Tokens {
				got := r.feed(t, []int32{tok})
				for i, want := range g.Logits[p] {
					worst = math.Max(worst, math.Abs(float64(got[i])-want))
					scale = math.Max(scale, math.Abs(want))
				}
				if a, b := argmax(got), argmaxF64(g.Logits[p]); a != b && top2MarginF64(g.Logits[p]) > 2*tol {
					t.Errorf("position %d: argmax %d, llama.cpp %d", p, a, b)
				}
			}
			t.Logf("%d positions × %d logits: worst |Δ| %.2g (logits up to %.2g)", len(g.Tokens), len(g.Logits[0]), worst, scale)
			if worst > tol {
				t.Errorf("worst |Δlogit| %.3g exceeds %.2g", worst, tol)
			}
		})
	}
}

// Tolerances, relative to the model's largest |logit| (about 4, or 74 for
// Gemma, whose embeddings are scaled by √hidden). With F32 weights the
// engines differ only in summation order and llama.cpp's F16 rounding inside
// attention: measured worst 2.3e-4 (qwen3moe-f32: 0.00093 of 4.1). Quantized
// weights meet activations quantized to 8 bits per block, as in llama.cpp:
// position 0 agrees exactly, but from position 1 a 1e-4 difference in an
// attention output can move an activation across a rounding step, and that
// step (1/127 of its block's largest value) is what reaches the logits:
// measured worst 1.3e-2 (0.049 of 3.9). Both tolerances are about twice
// what was measured; an argmax may differ only where llama.cpp's top-2
// margin is below twice the tolerance.
const (
	tinyF32Tol   = 5e-4
	tinyQuantTol = 0.025
)

func argmaxF64(v []float64) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

func top2MarginF64(v []float64) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, x := range v {
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}
