package loader

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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

// TestSpeculateDraftModel: --draft-model loads a draft beside the target;
// with the target's own file as the draft a full batch takes every draft
// (greedy) and gives the output it has without speculation; a draft of
// another vocabulary, a draft model with another method and method draft
// without one are refused before anything is served.
func TestSpeculateDraftModel(t *testing.T) {
	dir := t.TempDir()
	path, other := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "other.gguf")
	spec := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 3}
	if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	spec.Vocab = 320
	if err := modeltest.WriteGGUF(other, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	const seqs, n = 4, 40
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
			prompt := m.Tokenizer.Encode("a story about a dog and a cat", true)
			s, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: append(prompt, int32(10+i)), MaxTokens: n, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for tok := range s.Tokens() {
					out[i] = append(out[i], tok.ID)
				}
			})
		}
		wg.Wait()
		return out, *m.Engine.Stats()
	}
	plain, _ := run(Options{Threads: 1, MaxSeqs: seqs})
	drafted, st := run(Options{Threads: 1, MaxSeqs: seqs, DraftModel: path, Speculate: engine.SpecConfig{K: 3, Fixed: true}})
	if st.SpecDraftTokens == 0 || st.SpecAcceptedTokens != st.SpecDraftTokens {
		t.Fatalf("the target as its own draft: %d draft tokens, %d accepted", st.SpecDraftTokens, st.SpecAcceptedTokens)
	}
	for i := range plain {
		if !slices.Equal(plain[i], drafted[i]) {
			t.Fatalf("sequence %d: %v with a draft model, %v without", i, drafted[i], plain[i])
		}
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{DraftModel: other}, "vocabulary of 320 tokens, the target's has 300"},
		{Options{DraftModel: path, Speculate: engine.SpecConfig{Method: "ngram"}}, `only for speculative method draft, not "ngram"`},
		{Options{Speculate: engine.SpecConfig{Method: "draft"}}, "needs a draft model"},
		{Options{DraftModel: filepath.Join(dir, "absent.gguf")}, "draft model"},
	} {
		tc.o.Threads = 1
		m, err := Load(path, tc.o)
		if err == nil {
			m.Close(context.Background())
			t.Fatalf("%+v loaded", tc.o)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
