package loader

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// TestSpeculateFullBatch: with --speculate the model is loaded for the
// drafts' logit rows too, so a full batch of sequences whose history
// repeats (what the n-gram proposer drafts from) carries drafts and every
// sequence ends by its length, with the output it has without speculation.
// Loaded with MaxSeqs rows only, drafts get no rows beside a full batch.
func TestSpeculateFullBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 3}
	if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	const seqs, n = 4, 48
	run := func(o Options) ([][]int32, engine.Stats) {
		t.Helper()
		m, err := Load(path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		out := make([][]int32, seqs)
		var wg sync.WaitGroup
		for i := range seqs {
			prompt := m.Tokenizer.Encode("one two three one two three one two three one two", true)
			s, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: append(prompt, int32(10+i)), MaxTokens: n,
				Sampling: engine.SamplingParams{Temperature: 0}, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for tok := range s.Tokens() {
					out[i] = append(out[i], tok.ID)
				}
				if r := s.Result(); r.Finish != engine.FinishLength || r.Err != nil {
					t.Errorf("sequence %d: %v %v", i, r.Finish, r.Err)
				}
			})
		}
		wg.Wait()
		return out, *m.Engine.Stats()
	}
	plain, _ := run(Options{Threads: 1, MaxSeqs: seqs})
	drafted, st := run(Options{Threads: 1, MaxSeqs: seqs, Speculate: engine.SpecConfig{Method: "ngram", K: 4, Fixed: true}})
	if !st.Speculating || st.SpecDraftTokens == 0 {
		t.Fatalf("speculating %v, %d draft tokens: a full batch drafted nothing", st.Speculating, st.SpecDraftTokens)
	}
	for i := range plain {
		if len(plain[i]) != len(drafted[i]) {
			t.Fatalf("sequence %d: %d tokens with speculation, %d without", i, len(drafted[i]), len(plain[i]))
		}
		for j := range plain[i] {
			if plain[i][j] != drafted[i][j] {
				t.Fatalf("sequence %d differs at %d with speculation", i, j)
			}
		}
	}
	t.Logf("%d draft tokens, %d accepted", st.SpecDraftTokens, st.SpecAcceptedTokens)
}
