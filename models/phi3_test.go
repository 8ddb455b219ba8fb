package models

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

// loadTiny writes spec as GGUF and loads it on a one-thread CPU backend.
func loadTiny(t *testing.T, spec modeltest.Spec, dt kernels.DType, opts Options) *Llama {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := modeltest.WriteGGUF(path, spec, dt); err != nil {
		t.Fatal(err)
	}
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPhi3Config reads what a Phi-3 file says about its rotary embedding and
// window, and what Load derives from it.
func TestPhi3Config(t *testing.T) {
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 1,
		Phi3: true, RopeDims: 12, Window: 7, ContextLen: 512, LongRoPE: &modeltest.LongRoPE{OriginalContext: 128}}
	m := loadTiny(t, spec, kernels.F32, Options{MaxBatchTokens: 4, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
	c := m.Config()
	want := float32(math.Sqrt(1 + math.Log(4)/math.Log(128)))
	if c.Arch != "phi3" || c.RopeDims != 12 || c.RopeOrigContext != 128 || math.Abs(float64(c.RopeAttnFactor-want)) > 1e-6 ||
		c.RopeStyle != kernels.RoPEInterleaved || c.QueryScale != 0 {
		t.Errorf("config %+v: want 12 rotary dims (interleaved after the load's permutation), original context 128, attention factor %g applied to the weights", c, want)
	}
	if c.Window != 7 || !c.IsWindowLayer(0) || !c.IsWindowLayer(1) || c.RopeThetaLocal != c.RopeTheta {
		t.Errorf("window %d, layers %v, window RoPE base %g: want 7 on every layer, base %g", c.Window, c.WindowLayers, c.RopeThetaLocal, c.RopeTheta)
	}
	// Long factors at the model's own 512-token context, short ones at 128.
	for _, tc := range []struct {
		ctx    int
		factor string
	}{{0, "rope_factors_long.weight"}, {128, "rope_factors_short.weight"}} {
		m := loadTiny(t, spec, kernels.F32, Options{MaxBatchTokens: 4, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8, ContextLen: tc.ctx})
		got := make([]float32, 6)
		if err := m.be.Read(m.invFreq, got); err != nil {
			t.Fatal(err)
		}
		div := modeltest.Weights(spec)[tc.factor]
		for i := range got {
			want := math.Pow(10000, -2*float64(i)/12) / float64(div[i])
			if math.Abs(float64(got[i])-want) > 1e-6*want {
				t.Errorf("context %d: frequency %d = %g, want %g (%s)", tc.ctx, i, got[i], want, tc.factor)
			}
		}
	}
	full := spec
	full.RopeDims, full.Window = 0, 0
	c = loadTiny(t, full, kernels.F32, Options{MaxBatchTokens: 4, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8}).Config()
	if wantScale := want * want / 4; c.RopeStyle != kernels.RoPEHalves || math.Abs(float64(c.QueryScale-wantScale)) > 1e-6 || c.Window != 0 {
		t.Errorf("full rotary: style %v, query scale %g, window %d: want halves, %g (the factor squared over √16), none", c.RopeStyle, c.QueryScale, c.Window, wantScale)
	}
}

func TestPhi3ConfigErrors(t *testing.T) {
	base := []modeltest.KV{
		kv("general.architecture", "phi3"),
		kv("phi3.block_count", uint32(1)), kv("phi3.embedding_length", uint32(8)), kv("phi3.feed_forward_length", uint32(16)),
		kv("phi3.attention.head_count", uint32(2)), kv("phi3.context_length", uint32(32)),
		kv("phi3.attention.layer_norm_rms_epsilon", float32(1e-5)),
	}
	tok := modeltest.Tensor{Name: "token_embd.weight", DType: kernels.F32, Shape: []int{5, 8}, Data: make([]byte, 160)}
	for _, tc := range []struct {
		name string
		kv   modeltest.KV
		want error
		text string
	}{
		{"odd rotary dims", kv("phi3.rope.dimension_count", uint32(3)), ErrMalformed, "dimension_count 3"},
		{"rotary dims past the head", kv("phi3.rope.dimension_count", uint32(6)), ErrMalformed, "dimension_count 6"},
		{"zero attention factor", kv("phi3.rope.scaling.attn_factor", float32(0)), ErrMalformed, "attn_factor"},
		{"string window", kv("phi3.attention.sliding_window", "4"), ErrMalformed, "sliding_window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseGGUF("phi.gguf", encode(t, append(append([]modeltest.KV(nil), base...), tc.kv), []modeltest.Tensor{tok}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.Config()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

// TestPhi3Window checks that a Phi-3 window layer reads only the last W
// positions. With one layer, attention sees only relative positions, so the
// logits at position p must equal those of a fresh sequence of the W tokens
// ending at p; full attention over all p+1 tokens would differ.
func TestPhi3Window(t *testing.T) {
	const w = 5
	spec := modeltest.Spec{Layers: 1, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 3, Phi3: true, RopeDims: 12, Window: w}
	opts := Options{MaxBatchTokens: 16, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8}
	// Two copies: a soloRunner keeps position p in slot p, so the fresh
	// sequences must not share a KV store with the long one.
	m, fresh := loadTiny(t, spec, kernels.F32, opts), loadTiny(t, spec, kernels.F32, opts)
	spec.Window = 0
	checkWindowLogits(t, w, m, fresh, loadTiny(t, spec, kernels.F32, opts), loadTiny(t, spec, kernels.F32, opts))
}

// TestScaleBlocks checks that scaling a block's d (and m) scales every value
// it holds, to f16 precision, for each format partial-rotary LongRoPE can meet.
func TestScaleBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	const s = 1.4142
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_1, kernels.Q5_0,
		kernels.Q5_1, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		data, err := quant.Quantize(dt, x)
		if err != nil {
			t.Fatal(err)
		}
		before, after := make([]float32, len(x)), make([]float32, len(x))
		if err := quant.Dequantize(dt, data, before); err != nil {
			t.Fatal(err)
		}
		if err := scaleBlocks(dt, data, s); err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		if err := quant.Dequantize(dt, data, after); err != nil {
			t.Fatal(err)
		}
		// Relative to the largest value: d·q and m round apart in f16 and
		// may cancel (BF16 values keep 8 bits).
		tol, big := 1e-6, 0.0
		switch dt {
		case kernels.F32:
		case kernels.BF16:
			tol = 8e-3
		default:
			tol = 1.5e-3
		}
		for _, v := range before {
			big = math.Max(big, math.Abs(s*float64(v)))
		}
		for i := range x {
			if d := math.Abs(float64(after[i]) - s*float64(before[i])); d > tol*big {
				t.Fatalf("%v: element %d: %g after scaling %g by %g", dt, i, after[i], before[i], s)
			}
		}
	}
	if err := scaleBlocks(kernels.Q8_K, make([]byte, kernels.Q8_K.BlockBytes()), s); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Q8_K: %v, want ErrUnsupported", err)
	}
}
