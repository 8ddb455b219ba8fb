package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

func newTest(t *testing.T, opts Options) *Metrics {
	t.Helper()
	opts.NoRuntime = true
	m, err := New(prometheus.NewRegistry(), "smol", opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestObserverFeedsFamilies(t *testing.T) {
	m := newTest(t, Options{})
	m.SetSource(func() *engine.Stats {
		return &engine.Stats{Running: 2, Waiting: 3, KV: kvcache.Usage{Total: 100, Free: 60, Used: 25, Cached: 15},
			GenTokens: 41, Preemptions: 1, PrefixHitTokens: 8}
	})
	a, b := &engine.Sequence{}, &engine.Sequence{}
	t0 := time.Now()
	m.observeFirstToken(50 * time.Millisecond)
	m.lastToken[a] = t0
	m.OnToken(a, t0.Add(20*time.Millisecond))
	m.OnToken(a, t0.Add(45*time.Millisecond))
	m.OnToken(b, t0) // b's first token was never seen: no gap to measure
	m.OnStep(30*time.Millisecond, 2)
	m.OnStep(time.Millisecond, 0) // a wake-up for arrivals only
	m.observeFinish(engine.Result{Finish: engine.FinishStop, PromptTokens: 12, CompletionTokens: 3, CachedTokens: 8}, 4*time.Millisecond, time.Second)
	m.observeFinish(engine.Result{Finish: engine.FinishAbort, Cause: engine.CauseClientDisconnect, PromptTokens: 5}, time.Millisecond, 2*time.Second)
	m.observeFinish(engine.Result{Finish: engine.FinishAbort, Cause: engine.CauseStopString, PromptTokens: 3}, time.Millisecond, time.Second)
	m.OnReclaim(300 * time.Microsecond)
	m.OnStepFailure(engine.StepFailPanic)

	fams := metricstest.Scrape(t, m.Handler())
	model := []string{"model", "smol"}
	with := func(k, v string) []string { return []string{"model", "smol", k, v} }
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_requests_running", model, 2},
		{"sluice_requests_waiting", model, 3},
		{"sluice_kv_blocks_total", model, 100},
		{"sluice_kv_blocks_free", model, 60},
		{"sluice_kv_blocks_cached", model, 15},
		{"sluice_kv_cache_usage_ratio", model, 0.25},
		{"sluice_generation_tokens_total", model, 41},
		{"sluice_preemptions_total", model, 1},
		{"sluice_prefix_cache_hit_tokens_total", model, 8},
		{"sluice_step_duration_seconds", model, 1}, // the wake-up is not a step
		{"sluice_batch_size", model, 1},
		{"sluice_request_queue_seconds", model, 3},
		{"sluice_time_to_first_token_seconds", model, 1},
		{"sluice_inter_token_latency_seconds", model, 2},
		{"sluice_request_duration_seconds", model, 3},
		{"sluice_prompt_tokens_total", model, 20},
		{"sluice_requests_total", with("finish_reason", "stop"), 2}, // a stop string is a stop to the client
		{"sluice_requests_total", with("finish_reason", "abort"), 1},
		{"sluice_requests_total", with("finish_reason", "length"), 0},
		{"sluice_requests_aborted_total", with("cause", "client_disconnect"), 1},
		{"sluice_requests_aborted_total", with("cause", "stall"), 0},
		{"sluice_requests_aborted_total", with("cause", "stop_string"), 1},
		{"sluice_kv_reclaim_seconds", model, 1},
		{"sluice_engine_step_failures_total", with("kind", "panic"), 1},
		{"sluice_engine_step_failures_total", with("kind", "error"), 0},
		{"sluice_engine_step_failures_total", with("kind", "device_lost"), 0},
	} {
		if got := fams.Value(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The ITL sum is the two gaps (20 ms, 25 ms): the unit is seconds.
	sum := fams["sluice_inter_token_latency_seconds"].GetMetric()[0].GetHistogram().GetSampleSum()
	if math.Abs(sum-0.045) > 1e-9 {
		t.Errorf("ITL sum = %v s, want 0.045", sum)
	}
	m.OnFinish(a, engine.Result{Finish: engine.FinishStop}, 0)
	m.OnFinish(b, engine.Result{Finish: engine.FinishStop}, 0)
	if len(m.lastToken) != 0 {
		t.Errorf("%d sequences still tracked after they finished", len(m.lastToken))
	}
	for name := range fams {
		if strings.HasPrefix(name, "vllm:") {
			t.Errorf("vLLM family %s exported without --metrics-compat=vllm", name)
		}
	}
}

func TestNoSourceReadsIdle(t *testing.T) {
	m := newTest(t, Options{})
	fams := metricstest.Scrape(t, m.Handler())
	for _, name := range []string{"sluice_requests_running", "sluice_kv_blocks_total", "sluice_kv_cache_usage_ratio"} {
		if got := fams.Value(t, name); got != 0 {
			t.Errorf("%s = %v before SetSource, want 0", name, got)
		}
	}
}

func TestVLLMCompat(t *testing.T) {
	m := newTest(t, Options{Compat: CompatVLLM, BlockSize: 16})
	m.SetSource(func() *engine.Stats {
		return &engine.Stats{Running: 4, Waiting: 7, KV: kvcache.Usage{Total: 200, Free: 150, Used: 50}}
	})
	m.observeFinish(engine.Result{Finish: engine.FinishLength, PromptTokens: 9}, time.Millisecond, time.Second)
	fams := metricstest.Scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vllm:num_requests_running", []string{"model_name", "smol"}, 4},
		{"vllm:num_requests_waiting", []string{"model_name", "smol"}, 7},
		{"vllm:kv_cache_usage_perc", []string{"model_name", "smol"}, 0.25},
		{"vllm:gpu_cache_usage_perc", []string{"model_name", "smol"}, 0.25},
		{"vllm:prompt_tokens_total", []string{"model_name", "smol"}, 9},
		{"vllm:request_success_total", []string{"model_name", "smol", "finished_reason", "length"}, 1},
		{"vllm:e2e_request_latency_seconds", []string{"model_name", "smol"}, 1},
		{"vllm:cache_config_info", []string{"block_size", "16", "num_gpu_blocks", "200"}, 1},
		// Sluice's own names stay.
		{"sluice_requests_waiting", []string{"model", "smol"}, 7},
	} {
		if got := fams.Value(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := fams["vllm:num_requests_waiting"].GetType(); got != dto.MetricType_GAUGE {
		t.Errorf("vllm:num_requests_waiting type %v, want gauge (the inference extension requires it)", got)
	}
	for _, lp := range fams["vllm:num_requests_running"].GetMetric()[0].GetLabel() {
		if lp.GetName() == "model" {
			t.Error("vLLM alias kept the label \"model\"; vLLM names it model_name")
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, c := range []struct {
		name  string
		model string
		opts  Options
	}{
		{"empty model", "", Options{}},
		{"unknown compat", "m", Options{Compat: "tgi"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(prometheus.NewRegistry(), c.model, c.opts); err == nil {
				t.Error("New succeeded")
			}
		})
	}
	// Two Metrics on one registry collide instead of silently sharing series.
	reg := prometheus.NewRegistry()
	if _, err := New(reg, "a", Options{NoRuntime: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, "a", Options{NoRuntime: true}); err == nil {
		t.Error("second New on the same registry succeeded")
	}
}

func TestParseCompat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Compat
		ok   bool
	}{
		{"", CompatNone, true},
		{"vllm", CompatVLLM, true},
		{"llamacpp", CompatLlamaCpp, true},
		{"both", CompatBoth, true},
		{"VLLM", "", false},
		{"llama.cpp", "", false},
		{"sglang", "", false},
	} {
		got, err := ParseCompat(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseCompat(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// The device→host byte counter is exported only by an engine sampling on a
// device (whose backend counts); on the CPU backend the family is absent,
// not a misleading 0.
func TestDeviceToHostBytes(t *testing.T) {
	const name = "sluice_backend_device_to_host_bytes_total"
	for _, c := range []struct {
		st      engine.Stats
		present bool
	}{
		{engine.Stats{GenTokens: 3}, false},
		{engine.Stats{DeviceToHost: true, DeviceToHostBytes: 935256}, true},
	} {
		m := newTest(t, Options{})
		m.SetSource(func() *engine.Stats { return &c.st })
		fams := metricstest.Scrape(t, m.Handler())
		f, ok := fams[name]
		if ok != c.present {
			t.Fatalf("%+v: %s present %v, want %v", c.st, name, ok, c.present)
		}
		if !ok {
			continue
		}
		if f.GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s type %v, want counter", name, f.GetType())
		}
		if got := fams.Value(t, name, "model", "smol"); got != 935256 {
			t.Errorf("%s = %v, want 935256", name, got)
		}
	}
}
