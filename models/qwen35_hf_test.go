package models

import (
	"fmt"
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

// loadQwen35HF writes spec as a Qwen3_5ForCausalLM checkpoint in dtype and
// loads it through Open and LoadQwen35Source, as the loader does.
func loadQwen35HF(t testing.TB, dir string, spec modeltest.Qwen35Spec, dt kernels.DType, opts Options) *Qwen35 {
	t.Helper()
	if err := modeltest.WriteQwen35HF(dir, spec, dt); err != nil {
		t.Fatal(err)
	}
	return openQwen35HF(t, dir, opts)
}

// openQwen35HF loads the checkpoint at dir through Open and LoadQwen35Source.
func openQwen35HF(t testing.TB, dir string, opts Options) *Qwen35 {
	t.Helper()
	src, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if !IsQwen35(src) {
		t.Fatalf("%s is not seen as a Qwen3.5 model", dir)
	}
	be := cpu.New(2)
	t.Cleanup(func() { be.Close() })
	m, err := LoadQwen35Source(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestQwen35HFMatchesGGUF loads the tiny Qwen3.5 (2 DeltaNet key heads over
// 4 value heads, so the grouped-to-tiled value-head order matters; 8 of 16
// head elements rotating), and the tiny qwen35moe with its experts one
// tensor each (Qwen's releases) or fused (transformers 5's saves), as GGUF
// and as the Hugging Face checkpoint of the same weights and requires the
// same shape and logits at every position:
// equal up to the float32 rounding of the checkpoint's w − 1 norms and
// ln(−a) decays, undone on load (measured worst 0 and 8.7e-8 of the logit
// range).
func TestQwen35HFMatchesGGUF(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  modeltest.Qwen35Spec
		fused bool
	}{
		{"interval3", qwen35Tiny, false},
		{"tied-kernel2", func() modeltest.Qwen35Spec {
			s := qwen35Tiny
			s.Tied, s.ConvKernel, s.Interval = true, 2, 4
			return s
		}(), false},
		{"equal-heads", func() modeltest.Qwen35Spec {
			s := qwen35Tiny
			s.KHeads = 4 // value heads in the kernels' order already: the mapped tensors as they lie
			return s
		}(), false},
		{"moe", qwen35MoETiny, false},
		{"moe-fused", qwen35MoETiny, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16}
			g := loadQwen35(t, tc.spec, kernels.F32, opts)
			dir := filepath.Join(t.TempDir(), "hf")
			write := modeltest.WriteQwen35HF
			if tc.fused {
				write = modeltest.WriteQwen35HFFused
			}
			if err := write(dir, tc.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			h := openQwen35HF(t, dir, opts)
			gc := g.cfg
			gc.fullAttentionInterval = 0 // the GGUF key layer_types replaces, read only there
			if gc.Experts > 0 {
				gc.FFN = h.cfg.FFN // a mixture has no dense width: the GGUF file's is unused, config.json has none
			}
			if !reflect.DeepEqual(gc, h.cfg) {
				t.Fatalf("configs differ:\n gguf %+v\n   hf %+v", gc, h.cfg)
			}
			want := runQwen35(t, g, qwen35Prompt, 5, 3, 16, 1)
			ref := make([][]float64, len(want))
			for p, row := range want {
				ref[p] = f64(row)
			}
			got := runQwen35(t, h, qwen35Prompt, 5, 3, 16, 1)
			if w := worstShare(got, ref); w > 1e-5 {
				t.Errorf("worst |Δ| %.3g of the logit range (tolerance 1e-5)", w)
			} else {
				t.Logf("worst |Δ| %.3g of the logit range", w)
			}
		})
	}
}

// hfReferenceQwen35 are the Qwen3.5 checkpoints of TestHFReference: the
// tiny model of TestQwen35HFMatchesGGUF (DeltaNet layers 0, 1, 3, 4 with 2
// key heads over 4 value heads, full attention at 2 and 5 with 8 of 16
// head elements rotating), run by transformers' Qwen3_5ForCausalLM.
var hfReferenceQwen35 = []struct {
	name  string
	spec  modeltest.Qwen35Spec
	fused bool
}{
	{"qwen35", modeltest.Qwen35Spec{Layers: 6, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
		RopeDims: 8, Interval: 3, KHeads: 2, VHeads: 4, StateSize: 16, Seed: 76}, false},
	// Qwen3_5MoeForCausalLM: 2 of 8 experts of 64 renormalised, a shared
	// expert of 96 behind its sigmoid gate; the experts one tensor each (as
	// Qwen releases them) or fused (as transformers 5 saves them).
	{"qwen35moe", qwen35MoERef, false},
	{"qwen35moe-fused", qwen35MoERef, true},
}

var qwen35MoERef = modeltest.Qwen35Spec{Layers: 4, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, KHeads: 2, VHeads: 4, StateSize: 16, Seed: 78, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedFFN: 96}

// testHFReferenceQwen35 is TestHFReference for the Qwen3.5 checkpoints:
// the same comparisons, on LoadQwen35Source's model, one token a step and
// prefilled in chunks of 16.
func testHFReferenceQwen35(t *testing.T) {
	for _, c := range hfReferenceQwen35 {
		t.Run(c.name, func(t *testing.T) {
			root := *hfOut
			if root == "" {
				root = t.TempDir()
			}
			dir := filepath.Join(root, c.name)
			opts := Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16}
			write := modeltest.WriteQwen35HF
			if c.fused {
				write = modeltest.WriteQwen35HFFused
			}
			if err := write(dir, c.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			if *hfOut != "" {
				return
			}
			m := openQwen35HF(t, dir, opts)
			ref := readHFReference(t, c.name)
			checkHFFiles(t, dir, c.name, ref)
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, p := range ref.Prompts {
				for _, v := range p.LastLogits {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			tol := hfRefTol * (hi - lo)
			var worst float64
			for pi, p := range ref.Prompts {
				for _, steps := range [][]int{{1}, {16}} {
					got := runQwen35(t, m, p.Tokens, steps...)
					for pos, top := range p.Top {
						for k, id := range top.IDs {
							d := math.Abs(float64(got[pos][id]) - top.Logits[k])
							worst = math.Max(worst, d)
							if d > tol {
								t.Errorf("prompt %d position %d (steps %v): token %d's logit %.5g, transformers %.5g", pi, pos, steps, id, got[pos][id], top.Logits[k])
							}
						}
						if a := argmax(got[pos]); a != top.IDs[0] && top.Logits[0]-top.Logits[1] > 2*tol {
							t.Errorf("prompt %d position %d: argmax %d, transformers %d", pi, pos, a, top.IDs[0])
						}
					}
					last := got[len(got)-1]
					for id, want := range p.LastLogits {
						d := math.Abs(float64(last[id]) - want)
						worst = math.Max(worst, d)
						if d > tol {
							t.Errorf("prompt %d (%d tokens, steps %v): last logit %d = %.5g, transformers %.5g", pi, len(p.Tokens), steps, id, last[id], want)
							break
						}
					}
				}
			}
			t.Logf("%s (%s): worst |Δlogit| %.3g over a logit range of %.3g: %.2g of it (tolerance %.0e; transformers with K/V in float16 moves %.2g)",
				c.name, ref.Class, worst, hi-lo, worst/(hi-lo), hfRefTol, ref.F16KVShift/(hi-lo))
		})
	}
}

// TestQwen35HFConditionalGeneration: a release's layout, the text model
// under model.language_model.* with its config.json keys in text_config
// beside a vision tower and MTP layers, loads as the same model as the
// Qwen3_5ForCausalLM checkpoint (bit-identical logits), the tower and MTP
// tensors not read.
func TestQwen35HFConditionalGeneration(t *testing.T) {
	opts := Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16}
	root := t.TempDir()
	plain := loadQwen35HF(t, filepath.Join(root, "causal"), qwen35Tiny, kernels.F32, opts)
	dir := filepath.Join(root, "cond")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "causal", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseSafetensors(raw)
	if err != nil {
		t.Fatal(err)
	}
	tensors := []modeltest.Tensor{
		{Name: "model.visual.blocks.0.attn.qkv.weight", DType: kernels.F32, Shape: []int{2, 2}, Data: make([]byte, 16)},
		{Name: "mtp.fc.weight", DType: kernels.F32, Shape: []int{2, 2}, Data: make([]byte, 16)},
	}
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		if rest, ok := strings.CutPrefix(name, "model."); ok {
			name = "model.language_model." + rest
		}
		tensors = append(tensors, modeltest.Tensor{Name: name, DType: kernels.F32, Shape: e.shape, Data: raw[e.begin:e.end]})
	}
	if err := modeltest.WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "causal", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "tie_word_embeddings": false,
		"vision_config": {"depth": 1}, "text_config": %s}`, text)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	be := cpu.New(2)
	defer be.Close()
	m, err := LoadQwen35Source(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	want, got := runQwen35(t, plain, qwen35Prompt, 16), runQwen35(t, m, qwen35Prompt, 16)
	for p := range want {
		if !slices.Equal(want[p], got[p]) {
			t.Fatalf("position %d: logits differ from the Qwen3_5ForCausalLM checkpoint's", p)
		}
	}
}
