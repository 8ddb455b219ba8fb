package models

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// phi3HFSpecs are Phi-3 layouts read from safetensors: full rotary with a
// window on every layer (Phi-3 mini 4k), partial rotary with LongRoPE and a
// tied head (Phi-4-mini), and full rotary with LongRoPE (Phi-3 mini 128k,
// where the attention factor folds into the query scale).
func phi3HFSpecs() map[string]modeltest.Spec {
	base := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 81, Phi3: true}
	window, partial, full := base, base, base
	window.Window = 5
	partial.Seed, partial.KVHeads, partial.Tied, partial.RopeDims = 82, 1, true, 12
	partial.ContextLen, partial.LongRoPE = 256, &modeltest.LongRoPE{OriginalContext: 32}
	full.Seed, full.ContextLen, full.LongRoPE = 83, 512, &modeltest.LongRoPE{OriginalContext: 64}
	return map[string]modeltest.Spec{"window": window, "partial-longrope": partial, "full-longrope": full}
}

// phi3Logits loads path capped at ctx tokens (0: the model's own) and runs
// a prefill of seven tokens in chunks of three and five decode steps.
func phi3Logits(t *testing.T, path string, ctx int) (Config, [][]float32) {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, Options{MaxBatchTokens: 3, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8, ContextLen: ctx})
	if err != nil {
		t.Fatal(err)
	}
	r := newSoloRunner(m)
	out := [][]float32{slices.Clone(r.feed(t, []int32{1, 17, 42, 99, 3, 250, 7}))}
	for _, tok := range []int32{120, 64, 33, 5, 250} {
		out = append(out, slices.Clone(r.feed(t, []int32{tok})))
	}
	return m.Config(), out
}

// TestPhi3HFMatchesGGUF: each Phi-3 spec written as GGUF F32 and as a
// Phi3ForCausalLM checkpoint F32 reads as the same configuration and gives
// bit-identical logits, at the model's context (long LongRoPE factors) and
// at the original one (short factors). Neither format permutes Q and K, so
// the same bytes reach the same kernels.
func TestPhi3HFMatchesGGUF(t *testing.T) {
	for name, spec := range phi3HFSpecs() {
		t.Run(name, func(t *testing.T) {
			gguf, hf := writeBoth(t, spec, kernels.F32)
			ctxs := []int{0}
			if spec.LongRoPE != nil {
				ctxs = append(ctxs, spec.LongRoPE.OriginalContext)
			}
			var runs [][][]float32
			for _, ctx := range ctxs {
				gc, want := phi3Logits(t, gguf, ctx)
				hc, got := phi3Logits(t, hf, ctx)
				if !reflect.DeepEqual(gc, hc) {
					t.Fatalf("context %d: configs differ:\nGGUF       %+v\ncheckpoint %+v", ctx, gc, hc)
				}
				if hc.Arch != "phi3" || hc.RopeDims != cmp.Or(spec.RopeDims, spec.HeadDim()) || hc.TiedEmbeddings != spec.Tied {
					t.Fatalf("checkpoint config %+v does not say what spec %+v does", hc, spec)
				}
				for s := range want {
					for i := range want[s] {
						if got[s][i] != want[s][i] {
							t.Fatalf("context %d, call %d: logit %d is %g from the checkpoint, %g from GGUF", ctx, s, i, got[s][i], want[s][i])
						}
					}
				}
				runs = append(runs, want)
			}
			// The short factors are not the long ones: the two contexts
			// must give different logits, or the test above checked one set.
			if len(runs) == 2 && reflect.DeepEqual(runs[0], runs[1]) {
				t.Errorf("the long and short LongRoPE factors give the same logits")
			}
		})
	}
}

// TestPhi3HFTensors: the fused projections are renamed to GGUF's, and the
// LongRoPE factors of config.json are F32 tensors holding the GGUF file's
// bytes, listed by Tensors and gone with Close.
func TestPhi3HFTensors(t *testing.T) {
	for hfn, want := range map[string]string{
		"model.layers.3.self_attn.qkv_proj.weight": "blk.3.attn_qkv.weight",
		"model.layers.0.mlp.gate_up_proj.weight":   "blk.0.ffn_up.weight",
	} {
		if got := hfToGGUF(hfn); got != want {
			t.Errorf("hfToGGUF(%q) = %q, want %q", hfn, got, want)
		}
	}
	spec := phi3HFSpecs()["partial-longrope"]
	gguf, hf := writeBoth(t, spec, kernels.F32)
	g, err := Open(gguf)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := OpenHF(hf)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]TensorInfo{}
	for _, ti := range h.Tensors() {
		listed[ti.Name] = ti
	}
	for name := range modeltest.Shapes(spec) {
		gt, err1 := g.Tensor(name)
		ht, err2 := h.Tensor(name)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(gt.Data, ht.Data) || !slices.Equal(gt.Shape, ht.Shape) || ht.DType != kernels.F32 {
			t.Errorf("%s: checkpoint %v %v differs from GGUF %v %v", name, ht.DType, ht.Shape, gt.DType, gt.Shape)
		}
		if ti, ok := listed[name]; !ok || ti.Size != uint64(len(ht.Data)) {
			t.Errorf("%s listed as %+v (present %v), want %d bytes", name, ti, ok, len(ht.Data))
		}
	}
	if len(listed) != len(modeltest.Shapes(spec)) {
		t.Errorf("Tensors lists %d, the spec has %d", len(listed), len(modeltest.Shapes(spec)))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Tensor("rope_factors_long.weight"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// editHFConfig rewrites dir/config.json through edit, numbers kept as written.
func editHFConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPhi3HFConfig: what config.json leaves out takes Phi3Config's
// defaults, the attention factor follows transformers' precedence
// (attention_factor, then factor, then the two contexts), and what Sluice
// cannot follow is refused with the key named.
func TestPhi3HFConfig(t *testing.T) {
	spec := phi3HFSpecs()["partial-longrope"]
	derived := float32(math.Sqrt(1 + math.Log(256.0/32)/math.Log(32)))
	scaling := func(cfg map[string]any) map[string]any { return cfg["rope_scaling"].(map[string]any) }
	for _, tc := range []struct {
		name  string
		edit  func(map[string]any)
		check func(Config) bool
		err   error
		text  string
	}{
		{"as written", func(map[string]any) {}, func(c Config) bool {
			return c.RopeDims == 12 && c.RopeOrigContext == 32 && c.RopeAttnFactor == derived && c.RopeStyle == kernels.RoPEInterleaved && c.QueryScale == 0
		}, nil, ""},
		{"defaults", func(c map[string]any) { delete(c, "rms_norm_eps"); delete(c, "rope_theta") }, func(c Config) bool {
			return c.RMSEps == 1e-5 && c.RopeTheta == 10000
		}, nil, ""},
		{"su", func(c map[string]any) { scaling(c)["type"] = "su" }, func(c Config) bool { return c.RopeAttnFactor == derived }, nil, ""},
		{"attention_factor", func(c map[string]any) { scaling(c)["attention_factor"] = 1.5; scaling(c)["factor"] = 2.0 }, func(c Config) bool {
			return c.RopeAttnFactor == 1.5
		}, nil, ""},
		{"factor", func(c map[string]any) { scaling(c)["factor"] = 2.0 }, func(c Config) bool {
			return c.RopeAttnFactor == float32(math.Sqrt(1+math.Log(2)/math.Log(32)))
		}, nil, ""},
		{"no scaling", func(c map[string]any) { c["rope_scaling"] = nil }, func(c Config) bool {
			return c.RopeAttnFactor == 1 && c.RopeOrigContext == c.ContextLen
		}, nil, ""},
		{"default with factors", func(c map[string]any) { scaling(c)["type"] = "default" }, func(c Config) bool {
			return c.RopeAttnFactor == 1 && c.RopeOrigContext == c.ContextLen
		}, nil, ""},
		{"yarn", func(c map[string]any) { scaling(c)["type"] = "yarn" }, nil, ErrUnsupported, `type "yarn"`},
		{"short factor count", func(c map[string]any) { scaling(c)["short_factor"] = []float64{1, 2} }, nil, ErrMalformed, "short_factor has 2 factors"},
		{"negative factor", func(c map[string]any) { scaling(c)["long_factor"].([]any)[3] = -1.0 }, nil, ErrMalformed, "long_factor[3]"},
		{"odd rotary dims", func(c map[string]any) { c["partial_rotary_factor"] = 0.5625 }, nil, ErrMalformed, "9 rotary dims"},
		{"two originals", func(c map[string]any) { scaling(c)["original_max_position_embeddings"] = 64 }, nil, ErrUnsupported, "disagree"},
		{"no original", func(c map[string]any) { c["original_max_position_embeddings"] = nil }, nil, ErrMissingKey, "original_max_position_embeddings"},
		{"gelu", func(c map[string]any) { c["hidden_act"] = "gelu" }, nil, ErrUnsupported, `hidden_act "gelu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hf")
			if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			editHFConfig(t, dir, tc.edit)
			h, err := OpenHF(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			c, err := h.Config()
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("err = %v, want %v mentioning %q", err, tc.err, tc.text)
				}
				return
			}
			if err != nil || !tc.check(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
			if long := h.Has("rope_factors_long.weight"); long != (c.RopeAttnFactor != 1) {
				t.Errorf("rope_factors_long.weight present: %v, with attention factor %g", long, c.RopeAttnFactor)
			}
		})
	}
}
