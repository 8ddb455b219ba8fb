package metrics

import (
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

// The speculative-decoding counters come from the engine's snapshot under
// Sluice's and vLLM's names, labelled with the engine's proposer, and are
// absent where speculation is off.
func TestSpecDecodeFamilies(t *testing.T) {
	for _, proposer := range []string{"ngram", "draft", "mtp"} {
		m := newTest(t, Options{Compat: CompatVLLM, BlockSize: 16})
		m.SetSource(func() *engine.Stats {
			return &engine.Stats{Speculating: true, SpecMethod: proposer, SpecDrafts: 7, SpecDraftTokens: 25, SpecAcceptedTokens: 11, SpecRowCost: 0.3}
		})
		fams := metricstest.Scrape(t, m.Handler())
		labels := []string{"model", "smol", "proposer", proposer}
		for name, want := range map[string]float64{
			"sluice_spec_decode_num_drafts_total":          7,
			"sluice_spec_decode_num_draft_tokens_total":    25,
			"sluice_spec_decode_num_accepted_tokens_total": 11,
			"sluice_spec_decode_row_cost_ratio":            0.3,
		} {
			if got := fams.Value(t, name, labels...); got != want {
				t.Errorf("%s{proposer=%q} = %v, want %v", name, proposer, got, want)
			}
			if n := len(fams[name].GetMetric()); n != 1 {
				t.Errorf("%s: %d series, want the one proposer's", name, n)
			}
		}
		if got := fams.Value(t, "vllm:spec_decode_num_accepted_tokens_total", "model_name", "smol", "proposer", proposer); got != 11 {
			t.Errorf("vllm:spec_decode_num_accepted_tokens_total{proposer=%q} = %v, want 11", proposer, got)
		}
	}

	off := newTest(t, Options{})
	off.SetSource(func() *engine.Stats { return &engine.Stats{GenTokens: 3} })
	if _, ok := metricstest.Scrape(t, off.Handler())["sluice_spec_decode_num_drafts_total"]; ok {
		t.Error("spec_decode families exported by an engine that does not speculate")
	}
}
