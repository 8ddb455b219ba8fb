package loader

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestSpeculateMTP: --speculate mtp on a Qwen3.5 GGUF with a nextn block
// readies the model's own head, with a KV pool of as many blocks as the
// target's, and a full batch's greedy output is the output without
// speculation; a model without the head is refused before anything is
// served, naming what it lacks.
func TestSpeculateMTP(t *testing.T) {
	spec := qwen35Tiny
	spec.MTP, spec.MTPEcho = true, true
	path := writeQwen35(t, spec)
	const seqs, n = 3, 24
	run := func(o Options) ([][]int32, engine.Stats) {
		t.Helper()
		m, err := Load(path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		ids, _ := m.Backend().Tokenizer.Encode(strings.Repeat("the river under the mill ", 3), true)
		var ss []*engine.Sequence
		for i := range seqs {
			s, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: append(slices.Clone(ids), int32(10+i)), MaxTokens: n, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
		}
		out := make([][]int32, seqs)
		for i, s := range ss {
			for tok := range s.Tokens() {
				out[i] = append(out[i], tok.ID)
			}
			if r := s.Result(); r.Finish != engine.FinishLength || r.Err != nil {
				t.Fatalf("sequence %d: %v %v", i, r.Finish, r.Err)
			}
		}
		return out, *m.Engine.Stats()
	}
	o := Options{Threads: 1, KVBlocks: 24, MaxSeqs: seqs, ContextLen: 256}
	plain, _ := run(o)
	o.Speculate = engine.SpecConfig{Method: "mtp", K: 3, Fixed: true}
	drafted, st := run(o)
	if !st.Speculating || st.SpecDraftTokens == 0 {
		t.Fatalf("speculating %v, %d draft tokens", st.Speculating, st.SpecDraftTokens)
	}
	for i := range plain {
		if !slices.Equal(plain[i], drafted[i]) {
			t.Fatalf("sequence %d: with --speculate mtp %v, without %v", i, drafted[i], plain[i])
		}
	}
	t.Logf("%d drafts, %d draft tokens, %d accepted", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens)

	_, err := Load(writeQwen35(t, qwen35Tiny), o)
	if err == nil || !strings.Contains(err.Error(), "no multi-token-prediction (nextn) head") {
		t.Fatalf("--speculate mtp without a head: %v", err)
	}
}
