package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// assistantTarget is the tiny Gemma 4 the assistant golden drafts for:
// window layers 0 and 2 (5 tokens, heads of 16, 2 KV heads), global layers
// 1 and 3 (heads of 32, one KV head, V from K's projection, a quarter of
// the pairs rotating), layer scales and the final soft-cap.
var assistantTarget = modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 61, RMSEps: 1e-6,
	Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
	LayerScale: true, FinalSoftcap: 30, RopeTheta: 1e6}

// tinyAssistant drafts for assistantTarget: 32 wide, a window layer reading
// the target's layer 2 and a global one reading its layer 3, 4 query heads
// each, feed-forward 64.
var tinyAssistant = modeltest.AssistantSpec{Hidden: 32, Layers: 2, Heads: 4, FFN: 64, Window: []bool{true, false}, Seed: 62}

// assistantGolden is what make_assistant_golden.py writes: the target's
// tokens (prompt, then greedy), and every assistant row llama.cpp v0.5.0
// ran: its position, the token fed and the logits.
type assistantGolden struct {
	TargetSHA256    string  `json:"target_sha256"`
	AssistantSHA256 string  `json:"assistant_sha256"`
	PromptLen       int     `json:"prompt_len"`
	Draft           int     `json:"n_draft"`
	Tokens          []int32 `json:"tokens"`
	Drafts          []struct {
		Pos    int       `json:"pos"`
		Token  int32     `json:"token"`
		Logits []float64 `json:"logits"`
	} `json:"drafts"`
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// assistantPair is a tiny target and assistant with a golden of their own.
type assistantPair struct {
	name      string
	target    modeltest.Spec
	assistant modeltest.AssistantSpec
	dtype     kernels.DType // the target's matrices' (the assistant's are its spec's)
	tol       float64       // worst |Δlogit| allowed over the largest |logit|
}

var assistantPairs = []assistantPair{
	// The F32 tolerance against v0.5.0 (tiny_newest_test.go); measured
	// worst 0.0012 of 3.92 (3.1e-4).
	{"gemma4-assistant", assistantTarget, tinyAssistant, kernels.F32, tinyNewestF32Tol},
	// An E2B-like target: per-layer inputs, layers 3-5 reading the K/V of
	// layers 1 (window) and 2 (global), so the assistant's layers read
	// through the target's sharing (layer 4 is 1's, 5 is 2's), and twice
	// the feed-forward width there. Its assistant has three layers, two of
	// them window layers.
	{"gemma4e-assistant", modeltest.Spec{Layers: 6, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 65, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 3, HeadDimFull: 32, KVHeadsFull: 2, PartialRotaryFull: 0.25, RopeTheta: 1e6,
		PerLayerEmbd: 32, SharedKVLayers: 3, DoubleWideMLP: true},
		modeltest.AssistantSpec{Hidden: 32, Layers: 3, Heads: 8, FFN: 96, Window: []bool{true, false, true}, Seed: 66},
		kernels.F32, tinyNewestF32Tol},
	// Both models' matrices Q8_0, as the released GGUFs come: the
	// pre-projection is cut into its column halves a block at a time, and
	// both sides quantize the activations to 8 bits before each matrix.
	{"gemma4-assistant-q8_0", modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 67, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 2, RopeTheta: 1e6},
		modeltest.AssistantSpec{Hidden: 32, Layers: 2, Heads: 4, FFN: 64, Window: []bool{true, false}, Seed: 68, DType: kernels.Q8_0},
		kernels.Q8_0, tinyQuantTol},
}

// writeAssistantPair writes p's target and assistant GGUFs into dir.
func writeAssistantPair(t *testing.T, dir string, p assistantPair) (target, assistant string) {
	t.Helper()
	target, assistant = filepath.Join(dir, p.name+"-target.gguf"), filepath.Join(dir, p.name+".gguf")
	if err := modeltest.WriteGGUF(target, p.target, p.dtype); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGemma4Assistant(assistant, p.assistant, p.target); err != nil {
		t.Fatal(err)
	}
	return target, assistant
}

func loadAssistantPair(t *testing.T, target, assistant string, rows int) (*Llama, *Gemma4Assistant) {
	t.Helper()
	src, err := Open(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, Options{MaxBatchTokens: 32, MaxSeqs: 4, BlockSize: 4, KVBlocks: 64, ContextLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	asrc, err := Open(assistant)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { asrc.Close() })
	if !IsGemma4Assistant(asrc) {
		t.Fatal("IsGemma4Assistant: false for a gemma4-assistant file")
	}
	a, err := LoadGemma4Assistant(asrc, m, rows)
	if err != nil {
		t.Fatal(err)
	}
	return m, a
}

// TestGemma4AssistantGolden runs the assistant as llama.cpp v0.5.0's
// draft-mtp driver does beside a tiny Gemma 4 target (assistant_logits.cpp):
// after every target position, a chain of drafts at the next position, the
// first fed the target's post-norm hidden row and each next one the
// assistant's own h_next, reading the target's K/V below that position (20
// prompt tokens and 12 generated: past the window of 5). Every draft row's
// logits must match llama.cpp's; the drafts are teacher-forced (llama.cpp's
// tokens fed), and Sluice's greedy draft must be llama.cpp's wherever its
// top-2 margin allows. The target's K/V must be untouched by the drafts:
// the target's logits after them are compared with a run without drafts.
func TestGemma4AssistantGolden(t *testing.T) {
	dir := *tinyOut
	if dir == "" {
		dir = t.TempDir()
	}
	for _, pair := range assistantPairs {
		t.Run(pair.name, func(t *testing.T) {
			target, assistant := writeAssistantPair(t, dir, pair)
			if *tinyOut != "" {
				return
			}
			runAssistantGolden(t, pair.name, target, assistant, pair.tol)
		})
	}
}

// runAssistantGolden compares the pair with its golden file.
func runAssistantGolden(t *testing.T, name, target, assistant string, rel float64) {
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "tiny", name+".json"))
	if err != nil {
		t.Skipf("no golden data (%v): scripts/golden/make_assistant_golden.py", err)
	}
	var g assistantGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if sha256File(t, target) != g.TargetSHA256 || sha256File(t, assistant) != g.AssistantSHA256 {
		t.Fatal("the tiny target or assistant differs from the files llama.cpp ran: run scripts/golden/make_assistant_golden.py")
	}
	m, a := loadAssistantPair(t, target, assistant, 1)
	r := newSoloRunner(m)
	plain := newSoloRunner(mustLoadAgain(t, target))
	scale := 0.0
	for _, d := range g.Drafts {
		for _, v := range d.Logits {
			scale = math.Max(scale, math.Abs(v))
		}
	}
	tol := rel * scale
	worst, agree, steps, di := 0.0, 0, 0, 0
	for p := g.PromptLen; p <= len(g.Tokens); p++ {
		var logits []float32
		if p == g.PromptLen {
			logits = r.feed(t, g.Tokens[:p])
			plain.feed(t, g.Tokens[:p])
		} else {
			logits = r.feed(t, g.Tokens[p-1:p])
			want := plain.feed(t, g.Tokens[p-1:p])
			for i := range want {
				if logits[i] != want[i] {
					t.Fatalf("position %d: the target's logit %d is %g after drafts, %g without: the assistant changed its K/V", p-1, i, logits[i], want[i])
				}
			}
		}
		if p == len(g.Tokens) {
			break
		}
		if next := argmax(logits); next != g.Tokens[p] {
			t.Fatalf("position %d: the target picks %d, llama.cpp %d", p, next, g.Tokens[p])
		}
		fromTarget, hRow := true, int32(0) // the prompt's last row, or the one row fed
		if p == g.PromptLen {
			hRow = int32(p - 1)
		}
		for k := 0; k < g.Draft; k, di = k+1, di+1 {
			d := g.Drafts[di]
			if d.Pos != p {
				t.Fatalf("golden draft %d at position %d, want %d", di, d.Pos, p)
			}
			b := &kernels.Batch{Tokens: []int32{d.Token}, Positions: []int32{int32(p)},
				Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: p, Blocks: r.blocks}}}
			got, err := a.Forward(b, fromTarget, []int32{hRow})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range d.Logits {
				worst = math.Max(worst, math.Abs(float64(got[i])-want))
			}
			if k+1 < g.Draft {
				steps++
				if argmax(got) == g.Drafts[di+1].Token {
					agree++
				} else if top2MarginF64(d.Logits) > 2*tol {
					t.Errorf("position %d draft %d: greedy %d, llama.cpp %d (its top-2 margin %.3g)", p, k, argmax(got), g.Drafts[di+1].Token, top2MarginF64(d.Logits))
				}
			}
			fromTarget, hRow = false, 0
		}
	}
	if di != len(g.Drafts) {
		t.Fatalf("ran %d of the golden's %d drafts", di, len(g.Drafts))
	}
	t.Logf("%d draft rows × %d logits: worst |Δ| %.2g of %.3g (%.2g); greedy drafts %d/%d", di, a.VocabSize(), worst, scale, worst/scale, agree, steps)
	if worst > tol {
		t.Errorf("worst |Δlogit| %.3g exceeds %.2g", worst, tol)
	}
}

func mustLoadAgain(t *testing.T, path string) *Llama {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	m, err := Load(src, be, Options{MaxBatchTokens: 32, MaxSeqs: 4, BlockSize: 4, KVBlocks: 64, ContextLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGemma4AssistantRefusesTarget: an assistant loads only beside the
// Gemma 4 it was made for.
func TestGemma4AssistantRefusesTarget(t *testing.T) {
	dir := t.TempDir()
	target, assistant := writeAssistantPair(t, dir, assistantPairs[0])
	other := assistantTarget
	other.Hidden, other.Seed = 128, 63 // another width
	otherPath := filepath.Join(dir, "other.gguf")
	if err := modeltest.WriteGGUF(otherPath, other, kernels.F32); err != nil {
		t.Fatal(err)
	}
	llama := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 64}
	llamaPath := filepath.Join(dir, "llama.gguf")
	if err := modeltest.WriteGGUF(llamaPath, llama, kernels.F32); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{otherPath, "hidden size 64"},
		{llamaPath, "not llama"},
	} {
		m := mustLoadAgain(t, c.path)
		src, err := Open(assistant)
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadGemma4Assistant(src, m, 1)
		src.Close()
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrUnsupported naming %q", filepath.Base(c.path), err, c.want)
		}
	}
	// The target file itself is no assistant.
	src, err := Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if IsGemma4Assistant(src) {
		t.Error("IsGemma4Assistant: true for a gemma4 target")
	}
	if _, err := LoadGemma4Assistant(src, mustLoadAgain(t, target), 1); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a gemma4 file loaded as an assistant: %v", err)
	}
}

// TestGemma4AssistantHF: the assistant as a Hugging Face checkpoint
// (modeltest.WriteGemma4AssistantHF: the GGUF file's weights under
// transformers' names, config.json's text_config and backbone_hidden_size,
// the proportional RoPE from rope_parameters) drafts exactly as the GGUF
// file does beside the same target, every logit of every chained draft
// bit-equal, past the window; a checkpoint with an assistant's forbidden
// per-layer inputs is refused.
func TestGemma4AssistantHF(t *testing.T) {
	dir := t.TempDir()
	// transformers makes a text model's last layer global, which the
	// E2B-like pair's assistant is not: the first pair only.
	for _, pair := range assistantPairs[:1] {
		t.Run(pair.name, func(t *testing.T) {
			target, assistant := writeAssistantPair(t, dir, pair)
			hf := filepath.Join(dir, pair.name+"-hf")
			if err := modeltest.WriteGemma4AssistantHF(hf, pair.assistant, pair.target); err != nil {
				t.Fatal(err)
			}
			m, ag := loadAssistantPair(t, target, assistant, 1)
			hsrc, err := Open(hf)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hsrc.Close() })
			if !IsGemma4Assistant(hsrc) {
				t.Fatal("IsGemma4Assistant: false for a Gemma4AssistantForCausalLM checkpoint")
			}
			ah, err := LoadGemma4Assistant(hsrc, m, 1)
			if err != nil {
				t.Fatal(err)
			}
			if g, h := ag.Config(), ah.Config(); fmt.Sprint(g) != fmt.Sprint(h) {
				t.Fatalf("config from GGUF %+v, from the checkpoint %+v", g, h)
			}
			r := newSoloRunner(m)
			toks := []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5}
			rows := 0
			for p := range toks {
				r.feed(t, toks[p:p+1])
				if p == 0 {
					continue
				}
				next := toks[(p+1)%len(toks)]
				for k := range 3 {
					b := &kernels.Batch{Tokens: []int32{next}, Positions: []int32{int32(p + 1)},
						Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: p + 1, Blocks: r.blocks}}}
					lg, err := ag.Forward(b, k == 0, []int32{0})
					if err != nil {
						t.Fatal(err)
					}
					want := slices.Clone(lg)
					got, err := ah.Forward(b, k == 0, []int32{0})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("position %d draft %d: the checkpoint's logits differ from the GGUF file's", p+1, k)
					}
					next, rows = argmax(got), rows+1
				}
			}
			t.Logf("%d draft rows bit-equal", rows)
		})
	}
	bad := filepath.Join(dir, "bad-hf")
	if err := modeltest.WriteGemma4AssistantHF(bad, tinyAssistant, assistantTarget); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(bad, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.Replace(string(raw), `"hidden_size_per_layer_input": 0`, `"hidden_size_per_layer_input": 32`, 1))
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	target, _ := writeAssistantPair(t, dir, assistantPairs[0])
	src, err := Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := LoadGemma4Assistant(src, mustLoadAgain(t, target), 1); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "per-layer inputs 32") {
		t.Errorf("an assistant checkpoint with per-layer inputs: %v", err)
	}
}
