package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// tinyQwen35MTPModels are the tiny Qwen3.5 models with an MTP block whose
// head scripts/golden/make_mtp_golden.sh runs in llama.cpp v0.5.0
// (scripts/llamacpp/mtp_logits.cpp): a hybrid (DeltaNet with attention
// every second layer, Q8_0) and a qwen35moe, whose MTP block's
// feed-forward is the mixture. A model of full-attention layers only
// cannot be one: llama.cpp's hybrid memory fails to allocate with no
// recurrent layer (GGML_ASSERT(buffer) in ggml-backend.cpp).
var tinyQwen35MTPModels = []struct {
	name  string
	spec  modeltest.Qwen35Spec
	dtype kernels.DType
}{
	{"qwen35-mtp-hybrid-q8_0", modeltest.Qwen35Spec{Layers: 4, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 1, HeadDim: 32,
		Interval: 2, KHeads: 1, VHeads: 2, StateSize: 32, Tied: true, Seed: 52, MTP: true}, kernels.Q8_0},
	{"qwen35moe-mtp-f32", func() modeltest.Qwen35Spec { s := qwen35MoETiny; s.Seed, s.MTP = 53, true; return s }(), kernels.F32},
}

// qwen35MTPPrompt is the goldens' prompt; they generate 20 tokens after it
// and chain 4 drafts from the last position.
var qwen35MTPPrompt = qwen35Prompt[:12]

type mtpGolden struct {
	ModelSHA256 string      `json:"model_sha256"`
	Tokens      []int32     `json:"tokens"`
	PromptLen   int         `json:"prompt_len"`
	MTP         [][]float64 `json:"mtp"`
	Chain       []struct {
		Token  int32     `json:"token"`
		Logits []float64 `json:"logits"`
	} `json:"chain"`
}

// TestQwen35MTPLlamaCpp compares the MTP head's logits at every position of
// the prompt and the trunk's greedy continuation, and along a chain of
// drafts fed its own hidden state, with llama.cpp v0.5.0's draft-mtp
// context on the same model. The trunk runs as the engine runs it (the
// prompt in one forward, then a token a forward) and the head after each
// trunk forward over the positions that forward's rows pair with, as the
// engine's MTP proposer runs it; tokens are llama.cpp's (teacher-forced).
func TestQwen35MTPLlamaCpp(t *testing.T) {
	dir := *tinyOut
	if dir == "" {
		dir = t.TempDir()
	}
	for _, tm := range tinyQwen35MTPModels {
		t.Run(tm.name, func(t *testing.T) {
			path := filepath.Join(dir, tm.name+".gguf")
			if err := modeltest.WriteQwen35GGUF(path, tm.spec, tm.dtype); err != nil {
				t.Fatal(err)
			}
			if *tinyOut != "" {
				return
			}
			g := readMTPGolden(t, tm.name, path)
			m, src := loadQwen35Src(t, path, Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16})
			if !m.HasMTP() {
				t.Fatal("no MTP head in the file")
			}
			h, err := m.NewMTP(src, 16)
			if err != nil {
				t.Fatal(err)
			}
			bs := m.opts.BlockSize
			toks, n := g.Tokens, len(g.Tokens)
			got := make([][]float32, n)
			mtpStep := func(from, count int) {
				b := q35Batch(bs, q35Seq{toks: toks, start: from, n: count})
				hidden := make([]int32, count)
				for i := range hidden {
					hidden[i] = int32(i) - 1 // row i−1 of the trunk forward: position from+i−1
					if from > 0 {
						hidden[i] = int32(i) // a forward of one row: h of from−1 is its row 0
					}
				}
				logits, err := h.Forward(b, hidden, false)
				if err != nil {
					t.Fatal(err)
				}
				for i := range count {
					got[from+i] = append([]float32(nil), logits[i*m.cfg.Vocab:(i+1)*m.cfg.Vocab]...)
				}
			}
			if _, err := m.Forward(q35Batch(bs, q35Seq{toks: toks, start: 0, n: g.PromptLen})); err != nil {
				t.Fatal(err)
			}
			mtpStep(0, g.PromptLen+1) // positions 0…P pair with h of −1…P−1
			for p := g.PromptLen; p < n-1; p++ {
				if _, err := m.Forward(q35Batch(bs, q35Seq{toks: toks, start: p, n: 1})); err != nil {
					t.Fatal(err)
				}
				mtpStep(p+1, 1)
			}
			tol := tinyQuantTol
			if tm.dtype == kernels.F32 {
				tol = qwen35F32Tol
			}
			worst, scale := compareRows(t, "position", got, g.MTP, tol)
			// The chain: position n−1's head state, then each draft's.
			chain := make([][]float32, len(g.Chain))
			want := make([][]float64, len(g.Chain))
			for i, c := range g.Chain {
				seq := append(append([]int32(nil), toks...), make([]int32, i+1)...)
				seq[n+i] = c.Token
				b := q35Batch(bs, q35Seq{toks: seq, start: n + i, n: 1})
				logits, err := h.Forward(b, []int32{0}, true)
				if err != nil {
					t.Fatal(err)
				}
				chain[i], want[i] = append([]float32(nil), logits...), c.Logits
			}
			cw, cs := compareRows(t, "chain draft", chain, want, tol)
			t.Logf("%d positions, %d chained drafts × %d logits: worst |Δ| %.2g of the largest |logit| %.3g, chain %.2g of %.3g",
				n, len(chain), m.cfg.Vocab, worst, scale, cw, cs)
		})
	}
}

// compareRows checks every row's logits against want's within tol of the
// largest |logit| and the greedy pick where want's top-2 margin is clear
// of twice that; the worst |Δ| and that scale.
func compareRows(t *testing.T, what string, got [][]float32, want [][]float64, tol float64) (worst, scale float64) {
	t.Helper()
	for _, row := range want {
		for _, v := range row {
			scale = math.Max(scale, math.Abs(v))
		}
	}
	for p, row := range want {
		for i, v := range row {
			worst = math.Max(worst, math.Abs(float64(got[p][i])-v))
		}
		if a, b := argmax(got[p]), argmaxF64(row); a != b && top2MarginF64(row) > 2*tol*scale {
			t.Errorf("%s %d: greedy %d, llama.cpp %d (its top-2 margin %.3g)", what, p, a, b, top2MarginF64(row))
		}
	}
	if worst > tol*scale {
		t.Errorf("%s rows: worst |Δlogit| %.3g exceeds %.2g", what, worst, tol*scale)
	}
	return worst, scale
}

func readMTPGolden(t *testing.T, name, path string) mtpGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "tiny", name+".json"))
	if err != nil {
		t.Skipf("no golden data (%v): scripts/golden/make_mtp_golden.sh", err)
	}
	var g mtpGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(file); hex.EncodeToString(sum[:]) != g.ModelSHA256 {
		t.Fatalf("modeltest now writes a different %s than llama.cpp ran: run scripts/golden/make_mtp_golden.sh", name)
	}
	if len(g.MTP) != len(g.Tokens) || g.PromptLen <= 0 || g.PromptLen >= len(g.Tokens) || len(g.Chain) == 0 {
		t.Fatalf("golden file: %d tokens, %d MTP rows, prompt %d, %d chained", len(g.Tokens), len(g.MTP), g.PromptLen, len(g.Chain))
	}
	return g
}

// TestQwen35MTPRefusals: a model without the head loads as before and
// NewMTP names what is missing.
func TestQwen35MTPRefusals(t *testing.T) {
	m := loadQwen35(t, qwen35Tiny, kernels.F32, Options{MaxBatchTokens: 16, MaxSeqs: 4, KVBlocks: 8})
	if m.HasMTP() {
		t.Fatal("a model without nextn layers has an MTP head")
	}
	if _, err := m.NewMTP(nil, 8); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("NewMTP without a head: %v, want ErrUnsupported", err)
	}
	spec := qwen35Tiny
	spec.MTP = true
	path := filepath.Join(t.TempDir(), "mtp.gguf")
	if err := modeltest.WriteQwen35GGUF(path, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	gf, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	c, err := gf.Qwen35Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.Layers != spec.Layers || c.MTPLayers != 1 {
		t.Fatalf("block_count %d with one nextn layer read as %d trunk layers and %d MTP", spec.Layers+1, c.Layers, c.MTPLayers)
	}
	facts := map[string]string{}
	for _, f := range DescribeQwen35(c) {
		facts[f.Key] = f.Value
	}
	if want := "1 multi-token-prediction (nextn) block after the 6 layers: drafts for --speculate mtp"; facts["mtp"] != want {
		t.Errorf("sluice inspect's mtp line %q, want %q", facts["mtp"], want)
	}
	be := cpu.New(1)
	defer be.Close()
	mm, err := LoadQwen35(gf, be, Options{MaxBatchTokens: 16, MaxSeqs: 4, KVBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mm.NewMTP(gf, 0); err == nil {
		t.Fatal("NewMTP(0 blocks): no error")
	}
	if _, err := mm.NewMTP(gf, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := mm.NewMTP(gf, 8); err == nil {
		t.Fatal("a second NewMTP: no error")
	}
}

// TestQwen35MTPHFMatchesGGUF: the MTP head of a Hugging Face checkpoint
// (mtp.* renamed as convert_hf_to_gguf does, its norms 1 + w), dense and
// qwen35moe with its experts one tensor each and fused, gives the logits
// of the GGUF of the same weights at every position of a prompt and along
// a chain, up to the float32 rounding of the checkpoint's w − 1 norms.
func TestQwen35MTPHFMatchesGGUF(t *testing.T) {
	moe := qwen35MoETiny
	moe.MTP = true
	dense := qwen35Tiny
	dense.MTP = true
	for _, tc := range []struct {
		name  string
		spec  modeltest.Qwen35Spec
		fused bool
	}{{"dense", dense, false}, {"moe", moe, false}, {"moe-fused", moe, true}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{MaxBatchTokens: 32, MaxSeqs: 32, KVBlocks: 8}
			dir := t.TempDir()
			write := modeltest.WriteQwen35HF
			if tc.fused {
				write = modeltest.WriteQwen35HFFused
			}
			if err := write(dir, tc.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			ggPath := filepath.Join(t.TempDir(), "mtp.gguf")
			if err := modeltest.WriteQwen35GGUF(ggPath, tc.spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			hf, hfSrc := loadQwen35Src(t, dir, opts)
			gg, ggSrc := loadQwen35Src(t, ggPath, opts)
			if hf.cfg.MTPLayers != 1 || !hf.HasMTP() {
				t.Fatalf("checkpoint read with %d MTP layers, head loaded %v", hf.cfg.MTPLayers, hf.HasMTP())
			}
			toks := qwen35MTPPrompt
			rows := func(m *Qwen35, src WeightSource) [][]float32 {
				h, err := m.NewMTP(src, 4)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.Forward(q35Batch(16, q35Seq{toks: toks, start: 0, n: len(toks) - 1})); err != nil {
					t.Fatal(err)
				}
				hidden := make([]int32, len(toks))
				for i := range hidden {
					hidden[i] = int32(i) - 1
				}
				var out [][]float32
				logits, err := h.Forward(q35Batch(16, q35Seq{toks: toks, start: 0, n: len(toks)}), hidden, false)
				for i := 0; ; i++ {
					if err != nil {
						t.Fatal(err)
					}
					for r := 0; r < len(logits); r += m.cfg.Vocab {
						out = append(out, slices.Clone(logits[r:r+m.cfg.Vocab]))
					}
					if i == 2 {
						return out
					}
					seq := append(slices.Clone(toks), make([]int32, i+1)...)
					seq[len(seq)-1] = int32(argmax(out[len(out)-1]))
					last := int32(len(toks) - 1) // the first forward's logit row of the last position; then the one row
					if i > 0 {
						last = 0
					}
					logits, err = h.Forward(q35Batch(16, q35Seq{toks: seq, start: len(seq) - 1, n: 1}), []int32{last}, true)
				}
			}
			want, got := rows(gg, ggSrc), rows(hf, hfSrc)
			var worst float64
			for p := range want {
				lo, hi := slices.Min(want[p]), slices.Max(want[p])
				for i := range want[p] {
					worst = max(worst, math.Abs(float64(got[p][i]-want[p][i]))/float64(hi-lo))
				}
			}
			t.Logf("%d rows: worst |Δ| %.2g of the logit range", len(want), worst)
			if worst > 1e-5 {
				t.Fatalf("HF head's logits differ from the GGUF's by %.3g of the range", worst)
			}
		})
	}
}

// loadQwen35Src loads the GGUF file or Hugging Face directory at path on a
// CPU backend, and gives the source beside the model: NewMTP reads the
// head from it.
func loadQwen35Src(t *testing.T, path string, opts Options) (*Qwen35, WeightSource) {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	be := cpu.New(2)
	t.Cleanup(func() { be.Close() })
	m, err := LoadQwen35Source(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, src
}
