package modeltest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

func TestWeightsDeterministic(t *testing.T) {
	a := Spec{Layers: 2, Hidden: 16, Heads: 2, FFN: 32, Vocab: 300, Seed: 7}
	b := a
	b.Seed = 8
	wa, wa2, wb := Weights(a), Weights(a), Weights(b)
	if !reflect.DeepEqual(wa, wa2) {
		t.Fatal("same spec gave different weights")
	}
	for name, w := range wa {
		if reflect.DeepEqual(w, wb[name]) {
			t.Errorf("%s: seeds 7 and 8 gave the same weights", name)
		}
		n := 1
		for _, d := range Shapes(a)[name] {
			n *= d
		}
		if len(w) != n {
			t.Errorf("%s: %d values for shape %v", name, len(w), Shapes(a)[name])
		}
	}
	// Untying adds output.weight without disturbing the others.
	u := a
	u.Tied = false
	wu := Weights(u)
	if _, ok := wu["output.weight"]; !ok || !reflect.DeepEqual(wu["blk.1.ffn_up.weight"], wa["blk.1.ffn_up.weight"]) {
		t.Error("untied spec: output.weight missing or other tensors changed")
	}
}

// rope rotates one head in place at position pos: pairs (2i, 2i+1) when
// interleaved, (i, i+d/2) otherwise, with frequency theta^(-2i/d).
func rope(x []float64, pos int, interleaved bool) {
	d := len(x)
	for i := range d / 2 {
		a, b := i, i+d/2
		if interleaved {
			a, b = 2*i, 2*i+1
		}
		ang := float64(pos) * math.Pow(10000, -float64(2*i)/float64(d))
		s, c := math.Sincos(ang)
		x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
	}
}

// TestPermuteQKMatchesRoPE: interleaved RoPE on the permuted projection's
// output equals halves RoPE on the original's, with the same permutation
// applied — which is why GGUF llama files are read with RoPEInterleaved and
// Hugging Face ones with RoPEHalves.
func TestPermuteQKMatchesRoPE(t *testing.T) {
	const heads, hd, cols = 3, 8, 5
	w := make([]float32, heads*hd*cols)
	x := make([]float32, cols)
	for i := range w {
		w[i] = float32(math.Sin(float64(i) * 1.7))
	}
	for i := range x {
		x[i] = float32(math.Cos(float64(i) * 0.3))
	}
	matvec := func(w []float32) []float64 {
		out := make([]float64, heads*hd)
		for r := range out {
			for c := range cols {
				out[r] += float64(w[r*cols+c]) * float64(x[c])
			}
		}
		return out
	}
	ref, perm := matvec(w), matvec(PermuteQK(w, heads, hd, cols))
	for h := range heads {
		rope(ref[h*hd:(h+1)*hd], 5, false)
		rope(perm[h*hd:(h+1)*hd], 5, true)
	}
	ref32 := make([]float32, len(ref))
	for i, v := range ref {
		ref32[i] = float32(v)
	}
	want := PermuteQK(ref32, heads, hd, 1)
	for i := range want {
		if math.Abs(float64(want[i])-perm[i]) > 1e-5 {
			t.Fatalf("row %d: interleaved(permuted) %g, permute(halves) %g", i, perm[i], want[i])
		}
	}
}

func TestRopeFactors(t *testing.T) {
	// Llama 3.1's published values: theta 500000, head 128, factor 8, low 1,
	// high 4, original context 8192.
	f := RopeFactors(500000, 128, RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192})
	if f[0] != 1 || f[len(f)-1] != 8 {
		t.Fatalf("factors %v: want 1 for the fastest pair and 8 for the slowest", f)
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors not monotonic at %d: %v", i, f)
		}
	}
}

func TestVocabulary(t *testing.T) {
	for _, n := range []int{MinVocab, 300, 512, 2000} {
		tokens, merges := Vocabulary(n)
		if len(tokens) != n {
			t.Fatalf("vocab %d: %d tokens", n, len(tokens))
		}
		ids := map[string]bool{}
		for _, tok := range tokens {
			if ids[tok] {
				t.Fatalf("vocab %d: token %q twice", n, tok)
			}
			ids[tok] = true
		}
		// Every merge joins two existing tokens into the token after them.
		for i, m := range merges {
			a, b, ok := strings.Cut(m, " ")
			if !ok || !ids[a] || !ids[b] || tokens[MinVocab+i] != a+b {
				t.Fatalf("vocab %d: merge %d %q does not make token %q", n, i, m, tokens[MinVocab+i])
			}
		}
		if n == 512 && len(merges) != n-MinVocab {
			t.Errorf("vocab 512: %d merges, want the training text to fill it", len(merges))
		}
	}
	tokens, _ := Vocabulary(MinVocab)
	if tokens[3+' '] != "Ġ" || tokens[3+'\n'] != "Ċ" || tokens[3+'a'] != "a" {
		t.Errorf("byte tokens: space %q newline %q a %q", tokens[3+' '], tokens[3+'\n'], tokens[3+'a'])
	}
}

func TestWriteHFTokenizer(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Layers: 1, Hidden: 8, Heads: 2, FFN: 8, Vocab: 400, Seed: 1}
	if err := WriteHF(dir, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Type   string         `json:"type"`
			Vocab  map[string]int `json:"vocab"`
			Merges []string       `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	tokens, merges := Vocabulary(spec.Vocab)
	for id, tok := range tokens {
		if tj.Model.Vocab[tok] != id {
			t.Fatalf("tokenizer.json: %q has id %d, GGUF order says %d", tok, tj.Model.Vocab[tok], id)
		}
	}
	if tj.Model.Type != "BPE" || !reflect.DeepEqual(tj.Model.Merges, merges) || len(tj.AddedTokens) != 3 ||
		tj.AddedTokens[BOSID].Content != ImStart || !tj.AddedTokens[EOSID].Special {
		t.Errorf("tokenizer.json: type %q, %d merges, added %+v", tj.Model.Type, len(tj.Model.Merges), tj.AddedTokens)
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	ok := Spec{Layers: 1, Hidden: 64, Heads: 2, FFN: 64, Vocab: 300}
	cases := []struct {
		name  string
		spec  Spec
		dtype kernels.DType
		hf    bool
	}{
		{"vocab too small", Spec{Layers: 1, Hidden: 64, Heads: 2, FFN: 64, Vocab: 100}, kernels.F32, false},
		{"odd head dim", Spec{Layers: 1, Hidden: 6, Heads: 2, FFN: 64, Vocab: 300}, kernels.F32, false},
		{"row not a block multiple", ok, kernels.Q4_K, false},
		{"quantized safetensors", ok, kernels.Q8_0, true},
		{"unknown dtype", ok, kernels.DType(99), false},
	}
	for _, tc := range cases {
		var err error
		if tc.hf {
			err = WriteHF(filepath.Join(dir, tc.name), tc.spec, tc.dtype)
		} else {
			err = WriteGGUF(filepath.Join(dir, tc.name+".gguf"), tc.spec, tc.dtype)
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
