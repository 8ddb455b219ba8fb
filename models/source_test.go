package models

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Relative RMS error each storage type may add to N(0,σ) weights: F32 is
// exact; the others allow ~1.5× the error measured with kernels/quant's
// reference quantizers on these specs (Q4 0.087, Q5 0.044, Q6_K 0.018,
// Q8_0 0.0055, BF16 0.0019, F16 0.00026), so a wrong block layout or a
// mis-scaled codec fails while quantization noise does not.
var quantTol = map[kernels.DType]float64{
	kernels.F32: 0, kernels.F16: 5e-4, kernels.BF16: 3e-3, kernels.Q8_0: 0.008,
	kernels.Q6_K: 0.025, kernels.Q5_0: 0.065, kernels.Q5_1: 0.065, kernels.Q5_K: 0.065,
	kernels.Q4_0: 0.13, kernels.Q4_1: 0.13, kernels.Q4_K: 0.13,
}

var (
	tinyLlama = modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 320, Seed: 1, Tied: true}
	tinyQwen  = modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 96, Vocab: 300, Seed: 2, QKVBias: true, RopeTheta: 1e6, RMSEps: 1e-6}
	// K-quants need rows of 256.
	tinyK      = modeltest.Spec{Layers: 1, Hidden: 256, Heads: 4, KVHeads: 4, FFN: 512, Vocab: 260, Seed: 3}
	tinyScaled = modeltest.Spec{Layers: 1, Hidden: 64, Heads: 2, KVHeads: 1, FFN: 64, Vocab: 259, Seed: 4, ContextLen: 1024,
		RopeScaling: &modeltest.RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}}
)

// wantConfig is the Config a reader should report for spec.
func wantConfig(s modeltest.Spec, hf bool) Config {
	c := Config{
		Arch: s.Arch(), Layers: s.Layers, Hidden: s.Hidden, FFN: s.FFN, Heads: s.Heads, KVHeads: s.KVHeads,
		HeadDim: s.HeadDim(), Vocab: s.Vocab, ContextLen: 256, RMSEps: 1e-5, RopeTheta: 10000,
		RopeStyle: kernels.RoPEHalves, TiedEmbeddings: s.Tied, QKVBias: s.QKVBias,
	}
	if s.ContextLen != 0 {
		c.ContextLen = s.ContextLen
	}
	if s.RMSEps != 0 {
		c.RMSEps = s.RMSEps
	}
	if s.RopeTheta != 0 {
		c.RopeTheta = s.RopeTheta
	}
	if s.Arch() == "llama" && !hf {
		c.RopeStyle = kernels.RoPEInterleaved
	}
	// GGUF carries Llama 3 scaling as rope_freqs.weight, not as metadata.
	if rs := s.RopeScaling; rs != nil && hf {
		c.RopeScaling = &RopeScaling{Factor: rs.Factor, LowFreqFactor: rs.LowFreqFactor, HighFreqFactor: rs.HighFreqFactor, OriginalContext: rs.OriginalContext}
	}
	return c
}

// checkWeights compares every tensor of src with the f32 reference within
// dtype's quantization error, undoing the GGUF Q/K permutation for llama.
func checkWeights(t *testing.T, src WeightSource, spec modeltest.Spec, dtype kernels.DType, permuted bool) {
	t.Helper()
	shapes := modeltest.Shapes(spec)
	var worst float64
	defer func() { t.Logf("%v: worst relative RMS error %.4g", dtype, worst) }()
	for name, want := range modeltest.Weights(spec) {
		ht, err := src.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ht.Shape) != fmt.Sprint(shapes[name]) {
			t.Fatalf("%s: shape %v, want %v", name, ht.Shape, shapes[name])
		}
		got := make([]float32, len(want))
		if err := quant.Dequantize(ht.DType, ht.Data, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if permuted {
			hd := spec.HeadDim()
			switch {
			case strings.HasSuffix(name, "attn_q.weight"):
				want = modeltest.PermuteQK(want, spec.Heads, hd, spec.Hidden)
			case strings.HasSuffix(name, "attn_k.weight"):
				want = modeltest.PermuteQK(want, max(spec.KVHeads, 1), hd, spec.Hidden)
			}
		}
		tol := quantTol[dtype]
		if len(ht.Shape) == 1 && dtype != kernels.F16 && dtype != kernels.BF16 {
			tol = 0 // GGUF keeps norms and biases in F32
		}
		e := relRMS(got, want)
		worst = max(worst, e)
		if e > tol {
			t.Errorf("%s (%v): relative RMS error %.4g > %.4g", name, ht.DType, e, tol)
		}
	}
}

func relRMS(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

func TestGGUFRoundTrip(t *testing.T) {
	cases := []struct {
		spec  modeltest.Spec
		dtype kernels.DType
	}{
		{tinyLlama, kernels.F32}, {tinyLlama, kernels.F16}, {tinyLlama, kernels.BF16},
		{tinyLlama, kernels.Q8_0}, {tinyLlama, kernels.Q4_0}, {tinyLlama, kernels.Q4_1},
		{tinyLlama, kernels.Q5_0}, {tinyLlama, kernels.Q5_1},
		{tinyQwen, kernels.F32}, {tinyQwen, kernels.Q8_0},
		{tinyK, kernels.Q4_K}, {tinyK, kernels.Q5_K}, {tinyK, kernels.Q6_K},
		{tinyScaled, kernels.F32},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-L%d-%v", tc.spec.Arch(), tc.spec.Hidden, tc.dtype), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := modeltest.WriteGGUF(path, tc.spec, tc.dtype); err != nil {
				t.Fatal(err)
			}
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			cfg, err := src.Config()
			if err != nil {
				t.Fatal(err)
			}
			if want := wantConfig(tc.spec, false); !reflect.DeepEqual(cfg, want) {
				t.Errorf("config\n got %+v\nwant %+v", cfg, want)
			}
			checkWeights(t, src, tc.spec, tc.dtype, tc.spec.Arch() == "llama")
			if rs := tc.spec.RopeScaling; rs != nil {
				ht, err := src.Tensor("rope_freqs.weight")
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, tc.spec.HeadDim()/2)
				if err := quant.Dequantize(ht.DType, ht.Data, got); err != nil {
					t.Fatal(err)
				}
				if got[0] != 1 || got[len(got)-1] != rs.Factor {
					t.Errorf("rope_freqs %v: want 1 for the highest frequency and %g for the lowest", got, rs.Factor)
				}
			}
		})
	}
}

func TestGGUFVocab(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, tinyLlama, kernels.F32); err != nil {
		t.Fatal(err)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	v, err := src.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	tokens, merges := modeltest.Vocabulary(tinyLlama.Vocab)
	switch {
	case v.Model != "gpt2" || v.Pre != "smollm":
		t.Errorf("model %q pre %q", v.Model, v.Pre)
	case len(v.Tokens) != tinyLlama.Vocab || strings.Join(v.Tokens, "\x00") != strings.Join(tokens, "\x00"):
		t.Errorf("%d tokens, want %d as written", len(v.Tokens), tinyLlama.Vocab)
	case len(v.Merges) == 0 || strings.Join(v.Merges, "\x00") != strings.Join(merges, "\x00"):
		t.Errorf("%d merges, want %d as written", len(v.Merges), len(merges))
	case v.BOS != modeltest.BOSID || v.EOS != modeltest.EOSID || v.Unknown != modeltest.UnknownID || v.Pad != modeltest.EOSID:
		t.Errorf("ids bos %d eos %d unk %d pad %d", v.BOS, v.EOS, v.Unknown, v.Pad)
	case v.EOT != -1 || v.EOM != -1:
		t.Errorf("absent ids eot %d eom %d, want -1", v.EOT, v.EOM)
	case v.AddBOS || v.AddSpacePrefix || v.ChatTemplate != modeltest.ChatTemplate:
		t.Errorf("add_bos %v add_space_prefix %v template %q", v.AddBOS, v.AddSpacePrefix, v.ChatTemplate)
	case len(v.TokenTypes) != len(v.Tokens) || v.TokenTypes[1] != 3 || v.TokenTypes[100] != 1 || v.Scores != nil:
		t.Errorf("token types %v..., scores %v", v.TokenTypes[:5], v.Scores)
	}
}

const defaultModel = "SmolLM2-135M-Instruct.Q4_1.gguf"

func TestDefaultModelOpens(t *testing.T) {
	src, err := OpenGGUF(defaultModel)
	if err != nil {
		t.Skipf("default model not available (make model): %v", err)
	}
	defer src.Close()
	cfg, err := src.Config()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Arch: "llama", Layers: 30, Hidden: 576, FFN: 1536, Heads: 9, KVHeads: 3, HeadDim: 64,
		Vocab: 49152, ContextLen: 8192, RMSEps: 1e-5, RopeTheta: 100000, RopeStyle: kernels.RoPEInterleaved, TiedEmbeddings: true}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config\n got %+v\nwant %+v", cfg, want)
	}
	if n := len(src.Tensors()); n != 272 {
		t.Errorf("%d tensors, want 272", n)
	}
	types := map[string]kernels.DType{"token_embd.weight": kernels.Q8_0, "blk.0.attn_q.weight": kernels.Q4_1,
		"blk.29.ffn_down.weight": kernels.Q4_1, "output_norm.weight": kernels.F32}
	for name, dt := range types {
		ht, err := src.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := 1, ht.Shape[len(ht.Shape)-1]
		for _, d := range ht.Shape[:len(ht.Shape)-1] {
			rows *= d
		}
		if ht.DType != dt || len(ht.Data) != rows*dt.RowBytes(cols) {
			t.Errorf("%s: %v with %d bytes for %v, want %v", name, ht.DType, len(ht.Data), ht.Shape, dt)
		}
	}
	v, err := src.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != 49152 || v.Model != "gpt2" || v.Pre != "smollm" || v.BOS != 1 || v.EOS != 2 || len(v.Merges) == 0 {
		t.Errorf("vocab: %d tokens, model %q pre %q bos %d eos %d, %d merges", len(v.Tokens), v.Model, v.Pre, v.BOS, v.EOS, len(v.Merges))
	}
}

func TestHFRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		spec   modeltest.Spec
		dtype  kernels.DType
		shards int
	}{
		{"llama-f32", tinyLlama, kernels.F32, 1},
		{"llama-f16-sharded", tinyLlama, kernels.F16, 3},
		{"qwen2-bf16", tinyQwen, kernels.BF16, 1},
		{"untied-f32-sharded", tinyK, kernels.F32, 2},
		{"llama3-scaling", tinyScaled, kernels.F32, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := tc.spec
			spec.HFShards = tc.shards
			if err := modeltest.WriteHF(dir, spec, tc.dtype); err != nil {
				t.Fatal(err)
			}
			src, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			cfg, err := src.Config()
			if err != nil {
				t.Fatal(err)
			}
			if want := wantConfig(spec, true); !reflect.DeepEqual(cfg, want) {
				t.Errorf("config\n got %+v %+v\nwant %+v %+v", cfg, cfg.RopeScaling, want, want.RopeScaling)
			}
			checkWeights(t, src, spec, tc.dtype, false)
			if v, err := src.Vocab(); v != nil || err != nil {
				t.Errorf("Vocab() = %v, %v; want nil, nil for a Hugging Face directory", v, err)
			}
		})
	}
}

// TestFormatsAgree: the same spec in F32 gives bit-identical weights from
// both readers once the GGUF Q/K permutation is undone.
func TestFormatsAgree(t *testing.T) {
	dir := t.TempDir()
	gpath := filepath.Join(dir, "m.gguf")
	if err := modeltest.WriteGGUF(gpath, tinyLlama, kernels.F32); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(filepath.Join(dir, "hf"), tinyLlama, kernels.F32); err != nil {
		t.Fatal(err)
	}
	g, err := Open(gpath)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := Open(filepath.Join(dir, "hf"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hd := tinyLlama.HeadDim()
	for name, shape := range modeltest.Shapes(tinyLlama) {
		gt, err1 := g.Tensor(name)
		ht, err2 := h.Tensor(name)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		gw := make([]float32, len(ht.Data)/4)
		hw := make([]float32, len(ht.Data)/4)
		if err := quant.Dequantize(kernels.F32, gt.Data, gw); err != nil {
			t.Fatal(err)
		}
		if err := quant.Dequantize(kernels.F32, ht.Data, hw); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, "attn_q.weight"):
			hw = modeltest.PermuteQK(hw, tinyLlama.Heads, hd, shape[1])
		case strings.HasSuffix(name, "attn_k.weight"):
			hw = modeltest.PermuteQK(hw, tinyLlama.KVHeads, hd, shape[1])
		}
		if relRMS(gw, hw) != 0 {
			t.Errorf("%s differs between GGUF and safetensors", name)
		}
	}
}
