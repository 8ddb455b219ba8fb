package models

import (
	"bytes"
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

var hfOut = flag.String("hf-out", "", "write the Hugging Face reference checkpoints here (for scripts/golden/hf_logits.py) and stop")

// hfReferenceModels are tiny F32 checkpoints of every architecture Sluice
// reads from safetensors, run by Hugging Face transformers for reference
// logits (make golden-hf; models/testdata/hf/README.md has the figures).
// config holds config.json keys set over what modeltest.WriteHF writes:
// Mistral is a Llama checkpoint under another name with a window, and
// query_pre_attn_scalar is 24, not the head size of 16, so that a reader
// that dropped it and scaled by 1/√16 would be seen.
var hfReferenceModels = []struct {
	name   string
	spec   modeltest.Spec
	config map[string]any
}{
	{"llama", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 61}, nil},
	// Llama 3's frequency-dependent RoPE scaling: with head size 16, base
	// 500000 and an original context of 32, the pairs' wavelengths fall on
	// all three sides of it (kept, smoothed, divided by 8).
	{"llama3", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 300, Seed: 62, Tied: true, RopeTheta: 500000,
		RopeScaling: &modeltest.RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}, nil},
	{"qwen2", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 63, QKVBias: true, Tied: true, RopeTheta: 1e6, RMSEps: 1e-6}, nil},
	{"qwen3", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 64, QKNorm: true, RopeTheta: 1e6, RMSEps: 1e-6}, nil},
	{"mistral", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 65},
		map[string]any{"architectures": []string{"MistralForCausalLM"}, "model_type": "mistral", "sliding_window": 6}},
	// Gemma 2: window layers 0 and 2 of 5 tokens around global layer 1; an
	// attention cap of 2 bends most scores, the final cap of 20 the logits.
	{"gemma2", modeltest.Spec{Layers: 3, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 66,
		Gemma: true, Gemma2: true, Window: 5, AttnSoftcap: 2, FinalSoftcap: 20, RMSEps: 1e-6, RopeTheta: 20000},
		map[string]any{"query_pre_attn_scalar": 24}},
	// Gemma 3: layers 0, 1 and 3 read the last 5 tokens with RoPE base
	// 20000, layer 2 (every third) everything with base 400000 (neither is
	// the reader's default, so neither key can be dropped unseen); QK-norm,
	// one KV head.
	{"gemma3", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 300, Seed: 67,
		Gemma: true, Window: 5, WindowPattern: 3, RMSEps: 1e-6, RopeTheta: 4e5},
		map[string]any{"query_pre_attn_scalar": 24, "rope_local_base_freq": json.Number("20000.0")}},
	// Mixtures, each routing to 2 of 6 experts so a wrong choice or weight
	// shows: Mixtral (top-k then softmax, here with a 6-token window on
	// every layer), Qwen3-MoE (normalised top-k), Qwen2-MoE (softmax weights
	// not renormalised, a shared expert behind its sigmoid gate, Q/K/V
	// biases) and OLMoE (not renormalised, QK-norm over the whole
	// projections).
	{"mixtral", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 68, Experts: 6, ExpertsUsed: 2},
		map[string]any{"sliding_window": 6}},
	{"qwen3moe", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Seed: 69, Experts: 6, ExpertsUsed: 2, ExpertFFN: 32,
		QKNorm: true, RMSEps: 1e-6}, nil},
	{"qwen2moe", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Seed: 70, Experts: 6, ExpertsUsed: 2, ExpertFFN: 32,
		SharedExpertFFN: 48, QKVBias: true, RMSEps: 1e-6}, nil},
	{"olmoe", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 71, Experts: 6, ExpertsUsed: 2, OLMoE: true}, nil},
	// Phi-3: fused qkv_proj and gate_up_proj; mini 4k's shape (full
	// rotary, a window, here of 6, on every layer), and Phi-4-mini's
	// (rotary over 12 of 16 head elements, LongRoPE from an original
	// context of 32 to 256, tied head, one KV head) with RoPE base 20000.
	{"phi3", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 72, Phi3: true, Window: 6}, nil},
	{"phi3-longrope", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 300, Seed: 73, Phi3: true, RopeDims: 12,
		Tied: true, RopeTheta: 20000, ContextLen: 256, LongRoPE: &modeltest.LongRoPE{OriginalContext: 32}}, nil},
	// gpt-oss: sinks, Q/K/V/O biases, a window of 5 on the even layers,
	// 2 of 4 experts with biases and the clamped SwiGLU, fused as
	// transformers keeps them (gate_up_proj interleaved, down_proj
	// transposed) or as the release ships them (MXFP4 _blocks/_scales,
	// which transformers dequantizes on CPU). YaRN 4× from 4096 tokens with
	// truncate false as gpt-oss's config.json has it: at head size 16 and
	// base 150000 the blend runs from pair 1.01 to 2.17, where rounding
	// the ends out (GGUF's YaRN, transformers' default) would give 1 to 3.
	{"gptoss", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 74, GPTOSS: true, Window: 5,
		Experts: 4, ExpertsUsed: 2, RopeTheta: 150000, ContextLen: 16384, YaRN: &modeltest.YaRN{Factor: 4, OriginalContext: 4096}},
		map[string]any{"rope_scaling": gptossUntruncated}},
	{"gptoss-mxfp4", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 75, GPTOSS: true, Window: 5,
		Experts: 4, ExpertsUsed: 4, RopeTheta: 150000, ContextLen: 16384, YaRN: &modeltest.YaRN{Factor: 4, OriginalContext: 4096},
		ExpertsMXFP4: true}, map[string]any{"rope_scaling": gptossUntruncated}},
	// Gemma 4 (dense): window layers 0, 1, 3, 4 of 5 tokens with heads of 16
	// over 2 KV heads and base 10000, global layers 2 and 5 with heads of 32
	// over 1 KV head whose V is K's projection (attention_k_eq_v) and
	// proportional RoPE over a quarter of the pairs at base 1e6, V normed
	// without a weight, scores unscaled, layer scalars, soft-cap 30.
	{"gemma4", modeltest.Spec{Layers: 6, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 77, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
		LayerScale: true, FinalSoftcap: 30, RopeTheta: 1e6}, nil},
	// Gemma 4 E2B/E4B: per-layer inputs 32 wide, layers 3–5 reading the K/V
	// of layers 1 (window) and 2 (global) with twice the feed-forward width.
	{"gemma4e", modeltest.Spec{Layers: 6, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 79, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 2, PartialRotaryFull: 0.25, RopeTheta: 1e6,
		PerLayerEmbd: 32, SharedKVLayers: 3, DoubleWideMLP: true, FinalSoftcap: 30}, nil},
	// Gemma 4 26B-A4B: beside each layer's dense FFN, 2 of 8 GeGLU experts
	// of 64 behind a router with its input scale and per-expert scales.
	{"gemma4moe", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 80, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
		FinalSoftcap: 30, RopeTheta: 1e6, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64}, nil},
}

// gptossUntruncated is the reference gpt-oss models' rope_scaling, spelled
// as openai/gpt-oss-20b's config.json spells its own.
var gptossUntruncated = map[string]any{"rope_type": "yarn", "factor": json.Number("4.0"), "beta_fast": json.Number("32.0"),
	"beta_slow": json.Number("1.0"), "truncate": false, "original_max_position_embeddings": 4096}

// hfReference is what hf_logits.py writes per model.
type hfReference struct {
	Class       string            `json:"class"`
	Files       map[string]string `json:"files"` // sha256 of config.json and model.safetensors
	LayerTypes  []string          `json:"layer_types"`
	SlidingWin  *int              `json:"sliding_window"`
	Prompts     []hfRefPrompt     `json:"prompts"`
	GeneratorID string            `json:"generator"`
	// F16KVShift: how far transformers' own logits move with its K and V
	// rounded to float16, as Sluice stores them.
	F16KVShift float64 `json:"f16_kv_shift"`
	// Q8ExpertShift (MXFP4 experts): how far they move with the experts'
	// inputs (the hidden state and the gated activation) rounded to Q8_0,
	// as Sluice's MXFP4 kernels round them.
	Q8ExpertShift float64 `json:"q8_expert_shift"`
}

type hfRefPrompt struct {
	Tokens     []int32   `json:"tokens"`
	LastLogits []float64 `json:"last_logits"`
	Top        []struct {
		IDs    []int32   `json:"ids"`
		Logits []float64 `json:"logits"`
	} `json:"top"` // per position, best first
}

// hfRefTol bounds the worst |Sluice − transformers| logit difference as a
// share of the model's logit range (largest minus smallest reference logit
// over the prompts' last positions). Both run F32 weights, but Sluice's KV
// cache holds K and V in F16 (2^-11 relative rounding), which transformers
// does not: that, not summation order (~1e-7), is the difference. Measured
// worst shares 2.9e-5 (gemma3) to 1.5e-4 (mistral); rounding transformers'
// own k_proj/v_proj outputs to float16 moves its logits by the same amounts
// (mistral 1.5e-4, llama 1.2e-4; models/testdata/hf/README.md). 1e-3 leaves
// 6x room over the worst, while a wrong (1 + w) norm, query scale, window
// edge, RoPE base, soft-cap or expert weighting is off by at least twice
// the tolerance (each was tried once: every one fails).
const hfRefTol = 1e-3

// hfRefTolMXFP4 is hfRefTol for MXFP4 experts, whose CPU kernel (as
// ggml's) dots them with Q8_0-rounded activations where transformers
// multiplies in float32: rounding transformers' own expert inputs so moves
// the gptoss-mxfp4 reference by 6.8e-3 of its range, and Sluice is 6.3e-3
// from it. 2e-2 leaves 3x room; the reader with each byte's two nibbles
// swapped is off by 0.63 of the range, with ggml's nibble order by 0.5.
const hfRefTolMXFP4 = 2e-2

// TestHFReference runs each reference checkpoint through Sluice's CPU forward
// twice, one token a step (every position's logits) and prefilled in chunks
// of 16 (the last position's), and compares them with transformers': every
// logit at each prompt's last position, the reference top 5 at every
// position, and the greedy argmax wherever the reference's top-2 margin
// exceeds twice the tolerance. The checkpoints are rewritten here from
// their seeds; they must hash as the ones transformers ran.
func TestHFReference(t *testing.T) {
	for _, c := range hfReferenceModels {
		t.Run(c.name, func(t *testing.T) {
			root := *hfOut
			if root == "" {
				root = t.TempDir()
			}
			dir := filepath.Join(root, c.name)
			if err := modeltest.WriteHF(dir, c.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			setConfigKeys(t, dir, c.config)
			if *hfOut != "" {
				return
			}
			ref := readHFReference(t, c.name)
			checkHFFiles(t, dir, c.name, ref)
			step, chunked := loadHFRef(t, dir, 1, 0), loadHFRef(t, dir, 16, 0)
			// transformers picks LongRoPE's factors per forward by the
			// sequence's length, the short ones up to the original context;
			// Sluice by the context it is loaded with (phi3Frequencies). Each
			// prompt runs on the model loaded as transformers chose.
			var shortStep, shortChunked *Llama
			if lr := c.spec.LongRoPE; lr != nil {
				shortStep, shortChunked = loadHFRef(t, dir, 1, lr.OriginalContext), loadHFRef(t, dir, 16, lr.OriginalContext)
			}
			cfg := step.Config()
			if ref.LayerTypes != nil {
				for i, lt := range ref.LayerTypes {
					if win := i < len(cfg.WindowLayers) && cfg.WindowLayers[i]; win != (lt == "sliding_attention") {
						t.Errorf("layer %d: transformers reads it as %s, Sluice's window layers are %v", i, lt, cfg.WindowLayers)
					}
				}
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, p := range ref.Prompts {
				for _, v := range p.LastLogits {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
			tol := hfRefTol * (hi - lo)
			if c.spec.ExpertsMXFP4 {
				tol = hfRefTolMXFP4 * (hi - lo)
			}
			var worst float64
			diff := func(got []float32, id int32, want float64) float64 {
				d := math.Abs(float64(got[id]) - want)
				worst = math.Max(worst, d)
				return d
			}
			for pi, p := range ref.Prompts {
				step, chunked := step, chunked
				if shortStep != nil && len(p.Tokens) <= c.spec.LongRoPE.OriginalContext {
					step, chunked = shortStep, shortChunked
				}
				r := newSoloRunner(step)
				var got []float32
				for pos, tok := range p.Tokens {
					got = r.feed(t, []int32{tok})
					top := p.Top[pos]
					for k, id := range top.IDs {
						if d := diff(got, id, top.Logits[k]); d > tol {
							t.Errorf("prompt %d position %d: token %d's logit %.5g, transformers %.5g", pi, pos, id, got[id], top.Logits[k])
						}
					}
					if a := argmax(got); a != top.IDs[0] && top.Logits[0]-top.Logits[1] > 2*tol {
						t.Errorf("prompt %d position %d: argmax %d, transformers %d (margin %.3g)", pi, pos, a, top.IDs[0], top.Logits[0]-top.Logits[1])
					}
				}
				whole := newSoloRunner(chunked).feed(t, p.Tokens)
				for _, run := range []struct {
					name   string
					logits []float32
				}{{"one token a step", got}, {"prefilled", whole}} {
					bad := 0
					for id, want := range p.LastLogits {
						if diff(run.logits, int32(id), want) > tol {
							bad++
						}
					}
					if bad > 0 {
						t.Errorf("prompt %d (%d tokens), %s: %d of %d last-position logits off transformers' by more than %.3g", pi, len(p.Tokens), run.name, bad, len(p.LastLogits), tol)
					}
				}
			}
			t.Logf("%s (%s): worst |Δlogit| %.3g over a logit range of %.3g: %.2g of it (tolerance %.0e; transformers with K/V in float16 moves %.2g, with Q8_0 expert inputs %.2g)",
				c.name, ref.Class, worst, hi-lo, worst/(hi-lo), tol/(hi-lo), ref.F16KVShift/(hi-lo), ref.Q8ExpertShift/(hi-lo))
		})
	}
	testHFReferenceQwen35(t)
}

// checkHFFiles fails the test unless dir's files hash as the ones
// transformers ran.
func checkHFFiles(t *testing.T, dir, name string, ref hfReference) {
	t.Helper()
	for file, want := range ref.Files {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != want {
			t.Fatalf("modeltest now writes a different %s/%s than transformers ran: run make golden-hf", name, file)
		}
	}
}

// setConfigKeys sets keys in dir/config.json, keeping every other number as
// written (30.0 stays a float: transformers 5 refuses an int where its config
// declares a float).
func setConfigKeys(t *testing.T, dir string, keys map[string]any) {
	t.Helper()
	if len(keys) == 0 {
		return
	}
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
	for k, v := range keys {
		cfg[k] = v
	}
	if raw, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readHFReference(t *testing.T, name string) hfReference {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "hf", name+".json"))
	if err != nil {
		t.Fatalf("no transformers reference for %s (%v): run make golden-hf", name, err)
	}
	var ref hfReference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Prompts) == 0 || len(ref.Files) == 0 {
		t.Fatalf("testdata/hf/%s.json has no prompts or no file hashes", name)
	}
	for i, p := range ref.Prompts {
		if len(p.Top) != len(p.Tokens) || len(p.LastLogits) == 0 {
			t.Fatalf("testdata/hf/%s.json prompt %d: %d top-k rows for %d tokens, %d last logits", name, i, len(p.Top), len(p.Tokens), len(p.LastLogits))
		}
	}
	return ref
}

// loadHFRef loads the checkpoint at dir on one CPU thread, prefilling batch
// tokens a forward, with room for the longest prompt (48 tokens), its
// context capped at ctx (0: the model's own).
func loadHFRef(t *testing.T, dir string, batch, ctx int) *Llama {
	t.Helper()
	src, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, Options{MaxBatchTokens: batch, MaxSeqs: 1, BlockSize: 4, KVBlocks: 16, ContextLen: ctx})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
