package models

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// qwen35Tiny: six layers, full attention at 2 and 5 (interval 3), GQA,
// 8 of 16 head elements rotating, DeltaNet with 2 key heads tiled over 4
// value heads.
var qwen35Tiny = modeltest.Qwen35Spec{Layers: 6, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, Interval: 3, KHeads: 2, VHeads: 4, StateSize: 16, Seed: 35}

// qwen35MoETiny is the qwen35moe variant: four layers (full attention at
// 3), 8 experts of 64, 2 per token, a shared expert of 96.
var qwen35MoETiny = modeltest.Qwen35Spec{Layers: 4, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, KHeads: 2, VHeads: 4, StateSize: 16, Seed: 38, Experts: 8, ExpertsUsed: 2, ExpertFFN: 64, SharedFFN: 96}

var qwen35Prompt = []int32{1, 17, 42, 99, 3, 250, 250, 7, 120, 64, 33, 5, 280, 11, 0, 199, 76, 18, 2, 44, 9, 123, 87, 150, 66, 31, 270, 12, 8, 200, 45, 91, 13}

func loadQwen35(t testing.TB, spec modeltest.Qwen35Spec, dt kernels.DType, opts Options) *Qwen35 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := modeltest.WriteQwen35GGUF(path, spec, dt); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	be := cpu.New(2)
	t.Cleanup(func() { be.Close() })
	m, err := LoadQwen35(g, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// q35Seq is one sequence's part of a test batch.
type q35Seq struct {
	toks       []int32
	start, n   int
	slot       int32
	blockStart int32 // its blocks are blockStart, blockStart+1, …
	prompt     int   // the prompt's length (rows below it are prompt rows); 0: all of toks
}

// q35Batch lays sequences out as the engine does, every row's logits wanted.
func q35Batch(bs int, seqs ...q35Seq) *kernels.Batch {
	b := &kernels.Batch{}
	for _, s := range seqs {
		var table []int32
		for i := range (s.start+s.n+bs-1)/bs + 1 {
			table = append(table, s.blockStart+int32(i))
		}
		first := len(b.Tokens)
		for p := s.start; p < s.start+s.n; p++ {
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)))
			b.Tokens = append(b.Tokens, s.toks[p])
			b.Positions = append(b.Positions, int32(p))
			b.Slots = append(b.Slots, table[p/bs]*int32(bs)+int32(p%bs))
		}
		prompt := s.prompt
		if prompt == 0 {
			prompt = len(s.toks)
		}
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: first, End: len(b.Tokens), ContextLen: s.start + s.n,
			Prompt: prompt, Blocks: table, State: s.slot})
	}
	return b
}

// runQwen35 feeds toks through m in steps of the given sizes (the last one
// repeated) in state slot 0 and returns every position's logits.
func runQwen35(t testing.TB, m *Qwen35, toks []int32, steps ...int) [][]float32 {
	t.Helper()
	var out [][]float32
	for p, i := 0, 0; p < len(toks); i++ {
		n := min(steps[min(i, len(steps)-1)], len(toks)-p)
		logits, err := m.Forward(q35Batch(m.opts.BlockSize, q35Seq{toks: toks, start: p, n: n}))
		if err != nil {
			t.Fatal(err)
		}
		for r := range n {
			out = append(out, slices.Clone(logits[r*m.cfg.Vocab:(r+1)*m.cfg.Vocab]))
		}
		p += n
	}
	return out
}

// worstShare is the largest |a−b| over every position as a share of the
// reference's logit range at that position.
func worstShare(got [][]float32, want [][]float64) float64 {
	var worst float64
	for p := range want {
		lo, hi := slices.Min(want[p]), slices.Max(want[p])
		for i, w := range want[p] {
			worst = max(worst, math.Abs(float64(got[p][i])-w)/(hi-lo))
		}
	}
	return worst
}

// TestQwen35MatchesReference checks the F32 model against qwen35Ref at every
// position, prefilled whole, one token a step, and in uneven chunks (the
// state carried across steps): the three must also agree bit for bit, as
// the DeltaNet kernel runs each row's recurrence the same way whatever the
// step holds.
func TestQwen35MatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec modeltest.Qwen35Spec
	}{
		{"interval3", qwen35Tiny},
		{"tied-full-rotary-kernel2", func() modeltest.Qwen35Spec {
			s := qwen35Tiny
			s.Tied, s.RopeDims, s.ConvKernel, s.Interval, s.KHeads = true, 16, 2, 4, 4
			return s
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadQwen35(t, tc.spec, kernels.F32, Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 16})
			want := qwen35Ref(tc.spec, modeltest.Qwen35Weights(tc.spec), qwen35Prompt)
			whole := runQwen35(t, m, qwen35Prompt, len(qwen35Prompt))
			if w := worstShare(whole, want); w > 1e-5 {
				t.Errorf("whole prompt: worst |Δ| %.3g of the logit range (tolerance 1e-5)", w)
			} else {
				t.Logf("worst |Δ| %.3g of the logit range", w)
			}
			for _, steps := range [][]int{{1}, {5, 3, 16, 1}} {
				got := runQwen35(t, m, qwen35Prompt, steps...)
				for p := range got {
					if !slices.Equal(got[p], whole[p]) {
						t.Fatalf("steps %v: position %d differs from the whole-prompt step", steps, p)
					}
				}
			}
		})
	}
}

// TestQwen35BatchMatchesSolo: three sequences in one batch, each in its own
// state slot and blocks, one mid-prompt and one decoding, give each the
// logits it gets alone, bit for bit.
func TestQwen35BatchMatchesSolo(t *testing.T) {
	for _, spec := range []modeltest.Qwen35Spec{qwen35Tiny, qwen35MoETiny} {
		t.Run(spec.Arch(), func(t *testing.T) { testQwen35BatchMatchesSolo(t, spec) })
	}
}

func testQwen35BatchMatchesSolo(t *testing.T, spec modeltest.Qwen35Spec) {
	m := loadQwen35(t, spec, kernels.Q8_0, Options{MaxBatchTokens: 64, MaxSeqs: 64, KVBlocks: 32})
	a, b, c := qwen35Prompt, qwen35Prompt[5:], append([]int32{1}, qwen35Prompt[9:20]...)
	solo := func(toks []int32, split int) [][]float32 {
		return runQwen35(t, m, toks, split, len(toks))
	}
	wantA, wantB, wantC := solo(a, 10), solo(b, 20), solo(c, 11)
	// Step 1: a's first 10 rows, b's first 20 in slot 1; step 2: the rest of
	// a beside the rest of b, with c whole in slot 3.
	check := func(logits []float32, row int, want []float32, what string) {
		t.Helper()
		got := logits[row*m.cfg.Vocab : (row+1)*m.cfg.Vocab]
		if !slices.Equal(got, want) {
			t.Fatalf("%s: differs from the sequence alone", what)
		}
	}
	bs := m.opts.BlockSize
	l1, err := m.Forward(q35Batch(bs, q35Seq{toks: a, n: 10}, q35Seq{toks: b, n: 20, slot: 1, blockStart: 8}))
	if err != nil {
		t.Fatal(err)
	}
	check(l1, 9, wantA[9], "a at 9")
	check(l1, 29, wantB[19], "b at 19")
	l2, err := m.Forward(q35Batch(bs, q35Seq{toks: c, n: len(c), slot: 3, blockStart: 16},
		q35Seq{toks: a, start: 10, n: len(a) - 10}, q35Seq{toks: b, start: 20, n: len(b) - 20, slot: 1, blockStart: 8}))
	if err != nil {
		t.Fatal(err)
	}
	check(l2, len(c)-1, wantC[len(c)-1], "c at its end")
	check(l2, len(c)+len(a)-11, wantA[len(a)-1], "a at its end")
	check(l2, len(c)+len(a)-10+len(b)-21, wantB[len(b)-1], "b at its end")
}

// TestQwen35Refuses: a backend slot out of range is an error, not a panic.
func TestQwen35Refuses(t *testing.T) {
	m := loadQwen35(t, qwen35Tiny, kernels.F32, Options{MaxBatchTokens: 16, MaxSeqs: 2, KVBlocks: 8})
	if _, err := m.Forward(q35Batch(16, q35Seq{toks: qwen35Prompt, n: 4, slot: 2})); err == nil {
		t.Fatal("state slot 2 of 2 accepted")
	}
	if _, err := m.Forward(q35Batch(16, q35Seq{toks: []int32{1, 300}, n: 2})); err == nil {
		t.Fatal("token 300 of a 300-token vocabulary accepted")
	}
}

func TestDescribeQwen35(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := modeltest.WriteQwen35GGUF(path, qwen35MoETiny, kernels.F32); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := g.Qwen35Config()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range DescribeQwen35(c) {
		got[f.Key] = f.Value
	}
	// 3 DeltaNet layers of 3·128 conv + 4·16·16 state floats: 16896 bytes.
	want := map[string]string{
		"layers":          "3 Gated DeltaNet, 1 full attention (layers 3)",
		"recurrent state": "16896 bytes per sequence (float32, 3 layers), beside 128 bytes/token of F16 KV in 1 layers",
		"experts":         "2 of 8 per token (renormalised), 64 wide; shared expert 96 wide, sigmoid-gated",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

func TestQwen35StateSlots(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		bytes int64
		want  int
	}{
		{Options{MaxSeqs: 8}, 1 << 20, 12},
		{Options{MaxSeqs: 64, KVBytes: 1 << 30}, 20 << 20, 12}, // a quarter of 1 GiB in 20 MiB slots
		{Options{MaxSeqs: 1, KVBytes: 1 << 20}, 20 << 20, 2},
		// Speculating: 16 sequences with 8 draft rows each are 144 logit rows
		// but still 16 sequences' states.
		{Options{MaxSeqs: 144, Sequences: 16}, 1 << 20, 24},
	} {
		if got := stateSlots(tc.o, tc.bytes); got != tc.want {
			t.Errorf("%+v, %d bytes a slot: %d slots, want %d", tc.o, tc.bytes, got, tc.want)
		}
	}
}
