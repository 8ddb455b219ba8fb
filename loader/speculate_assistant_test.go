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

// TestSpeculateAssistant: a Gemma 4 assistant (GGUF, or a Hugging Face
// checkpoint of the same weights) given as --draft-model drafts
// for its Gemma 4 target (the target then keeps its window layers' K/V in
// the global store, which the assistant reads and verification rolls back):
// a full batch drafts and gives the output it has without speculation (and
// with WindowKV); beside a target of another architecture it is refused
// before anything is served.
func TestSpeculateAssistant(t *testing.T) {
	dir := t.TempDir()
	target, assistant, llama := filepath.Join(dir, "gemma4.gguf"), filepath.Join(dir, "assistant.gguf"), filepath.Join(dir, "llama.gguf")
	spec := modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 81, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25, RopeTheta: 1e6}
	if err := modeltest.WriteGGUF(target, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	aspec := modeltest.AssistantSpec{Hidden: 32, Layers: 2, Heads: 4, FFN: 64, Window: []bool{true, false}, Seed: 82}
	if err := modeltest.WriteGemma4Assistant(assistant, aspec, spec); err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(dir, "assistant-hf")
	if err := modeltest.WriteGemma4AssistantHF(hf, aspec, spec); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGGUF(llama, modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 83}, kernels.F32); err != nil {
		t.Fatal(err)
	}
	const seqs, n = 4, 32
	run := func(o Options) ([][]int32, engine.Stats) {
		t.Helper()
		m, err := Load(target, o)
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
	for _, draft := range []string{assistant, hf} {
		drafted, st := run(Options{Threads: 1, MaxSeqs: seqs, DraftModel: draft, Speculate: engine.SpecConfig{K: 3, Fixed: true}})
		t.Logf("%s: %d draft tokens, %d accepted", filepath.Base(draft), st.SpecDraftTokens, st.SpecAcceptedTokens)
		if !st.Speculating || st.SpecDraftTokens == 0 {
			t.Fatalf("%s: speculating %v, %d draft tokens: the assistant drafted nothing", draft, st.Speculating, st.SpecDraftTokens)
		}
		for i := range plain {
			if !slices.Equal(plain[i], drafted[i]) {
				t.Fatalf("%s: sequence %d: %v with the assistant, %v without", draft, i, drafted[i], plain[i])
			}
		}
	}
	m, err := Load(llama, Options{Threads: 1, DraftModel: assistant})
	if err == nil {
		m.Close(context.Background())
		t.Fatal("an assistant loaded beside a llama target")
	}
	if want := "drafts for a Gemma 4 target, not llama"; !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
}
