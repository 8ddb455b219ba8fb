package models

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

var tinySpec = modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 7}

// relErr is ‖a−b‖/‖b‖ over a logit vector.
func relErr(a []float32, b []float64) float64 {
	var num, den float64
	for i := range b {
		d := float64(a[i]) - b[i]
		num += d * d
		den += b[i] * b[i]
	}
	return math.Sqrt(num / den)
}

// TestForwardMatchesReference loads tiny random models written in each format
// and storage type and checks every step's logits against the float64
// reference. F32 files must agree to float32 rounding; quantized ones within
// what their weight (and, as in llama.cpp, activation) quantization costs.
func TestForwardMatchesReference(t *testing.T) {
	scaled := tinySpec
	scaled.RopeScaling = &modeltest.RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}
	qwen := tinySpec
	qwen.QKVBias = true
	qwen3 := tinySpec
	qwen3.QKNorm = true
	// 8 experts, 2 per token: over 20 tokens every expert gets rows, and a
	// prefill chunk of 6 rows routes several rows to one expert.
	qwen3moe := qwen3
	qwen3moe.Experts, qwen3moe.ExpertsUsed, qwen3moe.ExpertFFN = 8, 2, 64
	mixtral := tinySpec
	mixtral.Experts, mixtral.ExpertsUsed = 4, 2
	// Qwen2-MoE: biases, 4 routed experts of 64 and a shared one of 96;
	// OLMoE: QK-norm over whole projections, GQA, 8 experts of 128, top 2.
	qwen2moe := qwen
	qwen2moe.Experts, qwen2moe.ExpertsUsed, qwen2moe.ExpertFFN, qwen2moe.SharedExpertFFN = 4, 2, 64, 96
	olmoe := tinySpec
	olmoe.OLMoE, olmoe.Experts, olmoe.ExpertsUsed = true, 8, 2
	tied := tinySpec
	tied.Tied = true
	tied.HFShards = 3
	// K-quant blocks span 256 elements, so their rows must be that long.
	wide := modeltest.Spec{Layers: 1, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 300, Seed: 11}
	// The reference computes with the file's own (dequantized) weights and
	// rounds K/V to F16 as the cache does, so what remains is the kernels'
	// rounding. Tolerances: F32/F16/BF16 weights dot in float32 (≈3e-6
	// relative, up to 2e-5 when float32 noise flips a K/V value's F16
	// rounding); quantized weights meet activations quantized to 8 bits per
	// block as llama.cpp does (≈1.5% relative after a few layers).
	cases := []struct {
		name   string
		spec   modeltest.Spec
		format string
		dtype  kernels.DType
		tol    float64
	}{
		{"gguf-f32", tinySpec, "gguf", kernels.F32, 1e-4},
		{"hf-f32", tinySpec, "hf", kernels.F32, 1e-4},
		{"hf-f32-tied-sharded", tied, "hf", kernels.F32, 1e-4},
		{"gguf-f32-tied", tied, "gguf", kernels.F32, 1e-4},
		{"gguf-f32-llama3-scaling", scaled, "gguf", kernels.F32, 1e-4},
		{"hf-f32-llama3-scaling", scaled, "hf", kernels.F32, 1e-4},
		{"gguf-f32-qwen2", qwen, "gguf", kernels.F32, 1e-4},
		{"hf-f32-qwen2", qwen, "hf", kernels.F32, 1e-4},
		{"gguf-f32-qwen3", qwen3, "gguf", kernels.F32, 1e-4},
		{"hf-f32-qwen3", qwen3, "hf", kernels.F32, 1e-4},
		{"gguf-q8_0-qwen3", qwen3, "gguf", kernels.Q8_0, 0.02},
		{"gguf-f32-qwen3moe", qwen3moe, "gguf", kernels.F32, 1e-4},
		{"gguf-q8_0-qwen3moe", qwen3moe, "gguf", kernels.Q8_0, 0.02},
		{"gguf-f32-mixtral", mixtral, "gguf", kernels.F32, 1e-4},
		{"gguf-q4_0-mixtral", mixtral, "gguf", kernels.Q4_0, 0.02},
		{"gguf-f32-qwen2moe", qwen2moe, "gguf", kernels.F32, 1e-4},
		{"gguf-q8_0-qwen2moe", qwen2moe, "gguf", kernels.Q8_0, 0.02},
		{"gguf-f32-olmoe", olmoe, "gguf", kernels.F32, 1e-4},
		{"gguf-q8_0-olmoe", olmoe, "gguf", kernels.Q8_0, 0.02},
		{"hf-bf16", tinySpec, "hf", kernels.BF16, 1e-4},
		{"hf-f16", tinySpec, "hf", kernels.F16, 1e-4},
		{"gguf-f16", tinySpec, "gguf", kernels.F16, 1e-4},
		{"gguf-q8_0", tinySpec, "gguf", kernels.Q8_0, 0.02},
		{"gguf-q4_0", tinySpec, "gguf", kernels.Q4_0, 0.02},
		{"gguf-q4_1", tinySpec, "gguf", kernels.Q4_1, 0.02},
		{"gguf-q5_0", tinySpec, "gguf", kernels.Q5_0, 0.02},
		{"gguf-q5_1", tinySpec, "gguf", kernels.Q5_1, 0.02},
		{"gguf-q4_k", wide, "gguf", kernels.Q4_K, 0.02},
		{"gguf-q5_k", wide, "gguf", kernels.Q5_K, 0.02},
		{"gguf-q6_k", wide, "gguf", kernels.Q6_K, 0.02},
		{"gguf-bf16", wide, "gguf", kernels.BF16, 1e-4},
	}
	tokens := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m")
			var err error
			if tc.format == "gguf" {
				path += ".gguf"
				err = modeltest.WriteGGUF(path, tc.spec, tc.dtype)
			} else {
				err = modeltest.WriteHF(path, tc.spec, tc.dtype)
			}
			if err != nil {
				t.Fatal(err)
			}
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			// A batch limit of 6 rows splits the prompt into chunks and mixes
			// cache reads across block boundaries (block size 4).
			be := cpu.New(2)
			defer be.Close()
			m, err := Load(src, be, Options{MaxBatchTokens: 6, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
			if err != nil {
				t.Fatal(err)
			}
			cfg := m.Config()
			if rs := tc.spec.RopeScaling; rs != nil {
				cfg.RopeScaling = &RopeScaling{Factor: rs.Factor, LowFreqFactor: rs.LowFreqFactor, HighFreqFactor: rs.HighFreqFactor, OriginalContext: rs.OriginalContext}
			}
			if s := tc.spec; s.Experts > 0 {
				// From the spec, not the loader: Mixtral's and Qwen3-MoE's
				// reference code renormalise the top-k weights, Qwen2-MoE's
				// and OLMoE's do not.
				norm := s.SharedExpertFFN == 0 && !s.OLMoE
				cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN, cfg.ExpertNorm = s.Experts, s.ExpertsUsed, s.ExpertFFN, norm
				if s.ExpertFFN == 0 {
					cfg.ExpertFFN = s.FFN
				}
			}
			ref := newRefLlama(cfg, fileWeights(t, src, tc.spec, tc.format == "gguf" && tc.spec.Arch() == "llama"))
			run := newSoloRunner(m)
			worst := 0.0
			for i, tok := range tokens {
				want := ref.step(tok)
				got := run.feed(t, []int32{tok})
				e := relErr(got, want)
				worst = max(worst, e)
				if e > tc.tol {
					t.Fatalf("step %d: logits off by %.3g (relative), tolerance %.3g", i, e, tc.tol)
				}
			}
			t.Logf("worst relative error %.3g", worst)
		})
	}
}

// TestChunkedPrefillMatchesStepwise: feeding a prompt in one chunk, in uneven
// chunks or token by token must give the same logits (the cache is the same).
func TestChunkedPrefillMatchesStepwise(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := modeltest.WriteGGUF(path, tinySpec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tokens := []int32{1, 5, 9, 200, 31, 31, 31, 8, 77, 150, 2, 90, 13}
	var results [][]float32
	for _, chunk := range []int{1, 5, 13} {
		m, err := Load(src, cpu.New(1), Options{MaxBatchTokens: chunk, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, newSoloRunner(m).feed(t, tokens))
	}
	for i := 1; i < len(results); i++ {
		for j := range results[0] {
			if d := math.Abs(float64(results[i][j] - results[0][j])); d > 1e-4 {
				t.Fatalf("chunking %d: logit %d differs by %g", i, j, d)
			}
		}
	}
}

// TestLoadErrors: what a user gets for a model Sluice cannot run names the file
// and the tensor, and never panics.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := modeltest.WriteGGUF(good, tinySpec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	src, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// A source that lies about one tensor's shape, and one that lacks a tensor.
	for _, tc := range []struct {
		name string
		src  WeightSource
		want string
	}{
		{"missing tensor", hideTensor{src, "blk.1.ffn_up.weight"}, "blk.1.ffn_up.weight"},
		{"wrong shape", reshape{src, "blk.0.attn_k.weight"}, "blk.0.attn_k.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.src, cpu.New(1), Options{MaxBatchTokens: 4, MaxSeqs: 1, KVBlocks: 4})
			if err == nil || !contains(err.Error(), tc.want) || !contains(err.Error(), good) {
				t.Fatalf("error %v should name %s and the file", err, tc.want)
			}
		})
	}
}

type hideTensor struct {
	WeightSource
	name string
}

func (h hideTensor) Tensor(name string) (kernels.HostTensor, error) {
	if name == h.name {
		return kernels.HostTensor{}, fmt.Errorf("tensor %s: %w", name, ErrNoTensor)
	}
	return h.WeightSource.Tensor(name)
}

type reshape struct {
	WeightSource
	name string
}

func (r reshape) Tensor(name string) (kernels.HostTensor, error) {
	t, err := r.WeightSource.Tensor(name)
	if name == r.name && err == nil {
		t.Shape = []int{t.Shape[1], t.Shape[0]}
	}
	return t, err
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// fileWeights reads back what a model file holds, dequantized and in Hugging
// Face layout (GGUF llama Q/K rows un-permuted), so the reference computes with
// exactly the weights the backend sees and only the kernels' own rounding
// (activation quantization, float32 accumulation) remains.
func fileWeights(t *testing.T, src WeightSource, spec modeltest.Spec, ggufLlama bool) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for name, shape := range modeltest.Shapes(spec) {
		ht, err := src.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		w := make([]float32, n)
		if err := quant.Dequantize(ht.DType, ht.Data, w); err != nil {
			t.Fatal(err)
		}
		if ggufLlama && (strings.HasSuffix(name, "attn_q.weight") || strings.HasSuffix(name, "attn_k.weight")) {
			w = unpermuteQK(w, shape[0]/spec.HeadDim(), spec.HeadDim(), shape[1])
		}
		out[name] = w
	}
	return out
}

// unpermuteQK inverts llama.cpp's convert-time permutation: per head, rows
// [x0 y0 x1 y1 ...] → [x0..x(d/2-1) | y0..y(d/2-1)].
func unpermuteQK(w []float32, heads, headDim, cols int) []float32 {
	out := make([]float32, len(w))
	half := headDim / 2
	for h := range heads {
		for j := range half {
			for k := range 2 {
				src := (h*headDim + 2*j + k) * cols
				dst := (h*headDim + k*half + j) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}
