package metrics

import (
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

// LlamaCppGolden is llama-server v0.5.0's exposition after one request,
// written by scripts/llamacpp/metrics-golden.sh.
const LlamaCppGolden = "testdata/llamacpp-v0.5.0.metrics"

// TestLlamaCppFigures feeds the observer and the snapshots as the engine
// loop would, one prefill step then decode steps, and reads every llama.cpp
// figure: a step's time counts as prompt time only once the snapshot after
// it shows its prompt rows; the throughput gauges cover the time since the
// previous scrape.
func TestLlamaCppFigures(t *testing.T) {
	m := newTest(t, Options{Compat: CompatLlamaCpp})
	var st atomic.Pointer[engine.Stats]
	st.Store(&engine.Stats{})
	m.SetSource(st.Load)
	publish := func(s engine.Stats) { st.Store(&s) }
	value := func(f metricstest.Families, name string) float64 { return f.Value(t, lcPrefix+name) }

	s := &engine.Sequence{}
	t0 := time.Now()
	// Step 1 prefills 8 prompt tokens (2 more came from the cache) in 20 ms
	// and samples the first token.
	m.OnFirstToken(s, t0)
	m.OnStep(20*time.Millisecond, 8)
	early := metricstest.Scrape(t, m.Handler())
	if got := value(early, "prompt_seconds_total"); got != 0 {
		t.Errorf("prompt time %v before the step's snapshot was published, want 0", got)
	}
	if got := value(early, "n_decode_total"); got != 0 {
		t.Errorf("n_decode_total %v before the step's snapshot, want 0", got)
	}
	publish(engine.Stats{Steps: 1, Running: 1, PromptTokens: 8, PrefixHitTokens: 2, GenTokens: 1, LastBatchSeqs: 1})
	// Steps 2-4 decode one token each, 10 ms apart; a second sequence joins
	// step 4. Each OnStep sees the snapshot of the step before it.
	for i := 1; i <= 3; i++ {
		m.OnStep(10*time.Millisecond, 1)
		m.OnToken(s, t0.Add(time.Duration(i)*10*time.Millisecond))
		seqs := 1
		if i == 3 {
			seqs = 2
		}
		publish(engine.Stats{Steps: int64(1 + i), Running: seqs, Waiting: 1, PromptTokens: 8 + int64(seqs-1)*4, PrefixHitTokens: 2,
			GenTokens: int64(1 + i), LastBatchSeqs: seqs})
	}
	m.OnFinish(s, engine.Result{Finish: engine.FinishLength}, 0)

	f := metricstest.Scrape(t, m.Handler())
	for _, c := range []struct {
		name string
		want float64
	}{
		{"prompt_tokens_total", 12},
		{"prompt_tokens_cached_total", 2},
		{"prompt_seconds_total", 0.030}, // step 1 and step 4, which prefilled 4
		{"tokens_predicted_total", 4},
		{"tokens_predicted_seconds_total", 0.030}, // first token to last
		{"n_decode_total", 4},
		{"n_tokens_max", 3}, // a zero Sequence has no prompt: 0 + the 3 tokens decoded after the first
		{"prompt_tokens_seconds", 12 / 0.030},
		{"predicted_tokens_seconds", 3 / 0.030}, // the first token is free, as llama-server counts
		{"requests_processing", 2},
		{"requests_deferred", 1},
		{"n_busy_slots_per_decode", 5.0 / 4},
		{"spec_decode_num_drafts_total", 0},
	} {
		if got := value(f, c.name); math.Abs(got-c.want) > 1e-9*max(1, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	// The gauges were emptied by that scrape; the counters stay.
	again := metricstest.Scrape(t, m.Handler())
	for name, want := range map[string]float64{"prompt_tokens_seconds": 0, "predicted_tokens_seconds": 0, "prompt_tokens_total": 12, "n_decode_total": 4} {
		if got := value(again, name); got != want {
			t.Errorf("second scrape: %s = %v, want %v", name, got, want)
		}
	}
	if len(m.lc.spans) != 0 {
		t.Errorf("%d sequences still tracked after they finished", len(m.lc.spans))
	}
}

// A snapshot older than one already settled (a scrape that read it before
// another scrape settled a newer one) changes nothing: the prompt counter
// it would report is behind, and a counter never goes back.
func TestLlamaCppStaleSnapshot(t *testing.T) {
	a := newLlamacppAcc()
	s1 := &engine.Stats{Steps: 1, PromptTokens: 8, LastBatchSeqs: 1}
	s2 := &engine.Stats{Steps: 2, PromptTokens: 16, LastBatchSeqs: 1}
	s3 := &engine.Stats{Steps: 3, PromptTokens: 16, LastBatchSeqs: 1}
	a.onStep(func() *engine.Stats { return &engine.Stats{} }, 10*time.Millisecond)
	a.onStep(func() *engine.Stats { return s1 }, 10*time.Millisecond)
	a.settle(s2)
	a.settle(s1) // stale
	if a.seenPrompt != 16 {
		t.Fatalf("a stale snapshot took prompt_tokens_total back from 16 to %d", a.seenPrompt)
	}
	a.onStep(func() *engine.Stats { return s2 }, time.Millisecond)
	a.settle(s3)
	if a.seenPrompt != 16 || a.promptTime != 20*time.Millisecond || a.decodes != 3 {
		t.Errorf("prompt %d in %v over %d decodes, want 16 in 20ms over 3", a.seenPrompt, a.promptTime, a.decodes)
	}
}

// TestLlamaCppMatchesGolden compares the llama.cpp families Sluice exports,
// alone and beside vLLM's, with llama-server v0.5.0's: the same names, types,
// HELP text and label sets (none), no name missing and none invented.
func TestLlamaCppMatchesGolden(t *testing.T) {
	golden := readExposition(t, LlamaCppGolden)
	if len(golden) < 10 {
		t.Fatalf("%s holds %d llamacpp: families; the capture is broken", LlamaCppGolden, len(golden))
	}
	for _, compat := range []Compat{CompatLlamaCpp, CompatBoth} {
		t.Run(string(compat), func(t *testing.T) {
			m := newTest(t, Options{Compat: compat, BlockSize: 16})
			fams := metricstest.Scrape(t, m.Handler())
			if diff := metricstest.CompareFamilies(golden, fams, lcPrefix); diff != "" {
				t.Error(diff)
			}
			if _, ok := fams["vllm:num_requests_running"]; ok != compat.vllm() {
				t.Errorf("vLLM names exported: %v", ok)
			}
		})
	}
	// Without the flag there are none.
	for name := range metricstest.Scrape(t, newTest(t, Options{Compat: CompatVLLM}).Handler()) {
		if strings.HasPrefix(name, lcPrefix) {
			t.Errorf("%s exported without llamacpp compat", name)
		}
	}
}

func readExposition(t *testing.T, path string) metricstest.Families {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return metricstest.Read(t, r)
}
