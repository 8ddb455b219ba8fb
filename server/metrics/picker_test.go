package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/server/metrics"
)

// gatedModel holds every step until the test lets it go, so that a scrape
// sees the engine mid-load: some sequences running, others queued.
type gatedModel struct {
	entered chan struct{} // a step has started (until free)
	gate    chan struct{} // receive: the step may run
	free    chan struct{} // closed: every step runs unheld
	logits  []float32
}

func (m *gatedModel) VocabSize() int  { return 32 }
func (m *gatedModel) ContextLen() int { return 512 }
func (m *gatedModel) Forward(b *kernels.Batch) ([]float32, error) {
	select {
	case m.entered <- struct{}{}:
		select {
		case <-m.gate:
		case <-m.free:
		}
	case <-m.free:
	}
	m.logits = slices.Grow(m.logits[:0], len(b.LogitRows)*32)[:len(b.LogitRows)*32]
	clear(m.logits)
	for i := range b.LogitRows {
		m.logits[i*32+1] = 1
	}
	return m.logits, nil
}

// pickerView is what llm-d-router's endpoint picker (v0.10.0, its
// core-metrics-extractor for engine "vllm") takes from one scrape: the text
// format parsed with legacy name validation, the first series of each family
// by name, a gauge's or counter's value, and two labels of the cache info.
type pickerView struct {
	waiting, running, kvUsage float64
	blockSize, numGPUBlocks   int
}

func scrapeAsPicker(t *testing.T, h http.Handler) pickerView {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the picker's parser rejects the exposition: %v", err)
	}
	value := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			t.Fatalf("%s missing: the picker would mark the pod's metrics stale", name)
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		}
		t.Fatalf("%s is a %v; the picker reads gauges and counters", name, f.GetType())
		return 0
	}
	v := pickerView{
		waiting: value("vllm:num_requests_waiting"),
		running: value("vllm:num_requests_running"),
		kvUsage: value("vllm:kv_cache_usage_perc"),
	}
	value("vllm:cache_config_info")
	label := func(m *dto.Metric, name string) int {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == name {
				n, err := strconv.Atoi(lp.GetValue())
				if err != nil {
					t.Fatalf("cache_config_info %s=%q is not an integer", name, lp.GetValue())
				}
				return n
			}
		}
		t.Fatalf("vllm:cache_config_info has no %s label", name)
		return 0
	}
	info := fams["vllm:cache_config_info"].GetMetric()[0]
	v.blockSize, v.numGPUBlocks = label(info, "block_size"), label(info, "num_gpu_blocks")
	return v
}

// TestPickerReadsEveryValueUnderLoad runs an engine under a load it cannot
// admit at once and scrapes /metrics the way the endpoint picker does, mid-
// load and after: every value the picker reads is there and says what the
// engine is doing.
func TestPickerReadsEveryValueUnderLoad(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "smol", metrics.Options{Compat: metrics.CompatVLLM, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	mod := &gatedModel{entered: make(chan struct{}), gate: make(chan struct{}), free: make(chan struct{})}
	eng, err := engine.New(mod, engine.Config{Blocks: 64, BlockSize: 16, MaxSeqs: 2, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	m.SetSource(eng.Stats)
	const n = 6
	prompt := make([]int32, 40)
	var seqs []*engine.Sequence
	for i := range n {
		s, err := eng.Submit(t.Context(), engine.Request{ID: strconv.Itoa(i), Prompt: prompt, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	// Step until every request has arrived (arrivals apply at step
	// boundaries) and MaxSeqs of them run; the loop is then held inside the
	// next step, so the scrape reads a still snapshot.
	<-mod.entered
	for step := 0; ; step++ {
		if st := eng.Stats(); st.Running == 2 && st.Waiting == n-2 {
			break
		}
		if step == 10 {
			t.Fatalf("after %d steps: %+v", step, eng.Stats())
		}
		mod.gate <- struct{}{}
		<-mod.entered
	}
	st := eng.Stats()
	busy := scrapeAsPicker(t, m.Handler())
	if busy.running != 2 || busy.waiting != n-2 {
		t.Errorf("mid-load: the picker reads %v running, %v waiting; the engine has 2 and %d", busy.running, busy.waiting, n-2)
	}
	if want := float64(st.KV.Used) / float64(st.KV.Total); busy.kvUsage != want || want == 0 {
		t.Errorf("mid-load KV usage %v, the pool's %v", busy.kvUsage, want)
	}
	if busy.blockSize != 16 || busy.numGPUBlocks != 64 {
		t.Errorf("cache info block_size=%d num_gpu_blocks=%d, want 16 and 64", busy.blockSize, busy.numGPUBlocks)
	}

	close(mod.free)
	for _, s := range seqs {
		<-s.Done()
	}
	if err := eng.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	idle := scrapeAsPicker(t, m.Handler())
	if idle.running != 0 || idle.waiting != 0 || idle.kvUsage != 0 {
		t.Errorf("after the load: %+v, want nothing running, queued or held", idle)
	}
}
