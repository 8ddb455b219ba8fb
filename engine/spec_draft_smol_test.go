package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// writeFirstLayers writes a copy of the GGUF at path keeping only its
// first layers blocks: the same embeddings, output head and tokenizer, so
// a draft of the target's vocabulary that is smaller and worse than it.
func writeFirstLayers(t testing.TB, path string, layers int) string {
	t.Helper()
	g, err := models.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	arch, _ := g.String("general.architecture")
	var meta []modeltest.KV
	for _, k := range g.Keys() {
		v, _ := g.Meta(k)
		switch k {
		case arch + ".block_count":
			v = uint32(layers)
		case "general.alignment":
			continue // EncodeGGUF writes its own
		}
		meta = append(meta, modeltest.KV{Key: k, Value: v})
	}
	var tensors []modeltest.Tensor
	for _, ti := range g.Tensors() {
		var l int
		if _, err := fmt.Sscanf(ti.Name, "blk.%d.", &l); err == nil && l >= layers {
			continue
		}
		h, err := g.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, modeltest.Tensor{Name: h.Name, DType: h.DType, Shape: h.Shape, Data: h.Data})
	}
	out := filepath.Join(t.TempDir(), fmt.Sprintf("first%d.gguf", layers))
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := modeltest.EncodeGGUF(f, meta, tensors, g.Alignment()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

var draftPrompts = []string{
	editText,
	"The capital of France is",
	"Write a short poem about the sea.\n",
	"List the first ten prime numbers:",
}

// TestSmolLM2DraftGreedy: greedy output with a draft model is SmolLM2's
// own, token for token, alone and in a full batch of four, with SmolLM2 as
// its own draft (another instance, its own KV: nearly every draft taken)
// and with SmolLM2 cut to its first 10 of 30 layers (written by
// writeFirstLayers: a worse draft, often rejected).
func TestSmolLM2DraftGreedy(t *testing.T) {
	path := smolPath(t)
	tok := smolTokenizer(t, path)
	const k, seqs, n = 4, 4, 32
	prompts := make([][]int32, len(draftPrompts))
	for i, p := range draftPrompts {
		prompts[i] = tok.Encode(p, false)
	}
	run := func(draft string, batch int) ([][]int32, *Stats) {
		cfg := Config{Blocks: 128, BlockSize: 16, MaxBatchTokens: 256, MaxSeqs: seqs, EOG: tok.EOGIDs()}
		rows := seqs
		if draft != "" {
			rows = seqs * (1 + k)
			dm := loadModel(t, draft, 2, 128, 16, 256, seqs)
			cfg.Speculate = SpecConfig{Method: "draft", K: k, Fixed: true, LogitRows: rows, Draft: dm, DraftBlocks: 128}
		}
		e := newEngineOn(t, loadModel(t, path, 2, 128, 16, 256, rows), cfg)
		outs := make([][]int32, batch)
		var wg sync.WaitGroup
		for i := range batch {
			s := submit(t, e, Request{Prompt: prompts[i], MaxTokens: n})
			wg.Go(func() { outs[i], _ = collect(t, s, 0) })
		}
		wg.Wait()
		return outs, waitIdle(t, e)
	}
	short := writeFirstLayers(t, path, 10)
	for _, batch := range []int{1, seqs} {
		plain, _ := run("", batch)
		for _, d := range []struct{ name, path string }{{"self", path}, {"first 10 layers", short}} {
			got, st := run(d.path, batch)
			for i := range plain {
				if !slices.Equal(got[i], plain[i]) {
					t.Errorf("batch %d, draft %s, prompt %d: %q, without drafts %q", batch, d.name, i,
						tok.Decode(got[i], false), tok.Decode(plain[i], false))
				}
			}
			acc := float64(st.SpecAcceptedTokens) / float64(max(st.SpecDraftTokens, 1))
			t.Logf("batch %d, draft %s: %d draft tokens, %d accepted (%.2f)", batch, d.name, st.SpecDraftTokens, st.SpecAcceptedTokens, acc)
			// SmolLM2 drafting for itself computes every row as the target
			// does, bit for bit, so it guesses every token right; only a
			// sequence's last proposal may run past its end (the stop token
			// or the length limit), up to k drafts a sequence. A rate would
			// not do: the first prompt's answer ends at its stop token after
			// 26 tokens on a CPU without AMX (prompt rows on the row
			// kernels), and the 4 drafts past it were a sixth of its 24.
			if rejected := st.SpecDraftTokens - st.SpecAcceptedTokens; d.name == "self" && rejected > int64(k*batch) {
				t.Errorf("SmolLM2 as its own draft: %d of %d drafts rejected, more than the %d its sequences' ends explain", rejected, st.SpecDraftTokens, k*batch)
			}
			if st.SpecDraftTokens == 0 {
				t.Errorf("draft %s: no drafts", d.name)
			}
		}
	}
}
