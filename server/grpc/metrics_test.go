package grpcserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/metrics"
)

// scrapeText GETs /metrics as Prometheus would and parses the text format.
func scrapeText(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// one returns the single series of name (gauge or counter value, or a
// histogram's sample count), or of name with label=value.
func one(t *testing.T, fams map[string]*dto.MetricFamily, name string, label ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("%s missing from the exposition", name)
	}
	for _, m := range f.GetMetric() {
		if len(label) == 2 && !hasLabel(m, label[0], label[1]) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("%s%v: no such series", name, label)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

// TestMetricsDuringAndAfterLoad runs concurrent gRPC generations, scrapes
// /metrics while they run (the loop held mid-load so "during" is certain)
// and after, and checks the gauges come back to idle and every histogram
// counted every request.
func TestMetricsDuringAndAfterLoad(t *testing.T) {
	const n = 10
	r := newRig(t, rigOptions{maxSeqs: 4, compat: metrics.CompatVLLM})
	h := r.rec.Metrics.Handler()
	held, release := r.rec.hold(3)
	defer release()

	var wg sync.WaitGroup
	usages := make([]*sluicev1.Usage, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			stream, err := r.client.Generate(context.Background(), &sluicev1.GenerateRequest{
				Input: textInput(fmt.Sprintf("Request number %d says", i)), Sampling: greedy(uint32(8 + i))})
			if err != nil {
				errs[i] = err
				return
			}
			c := drain(stream)
			usages[i], errs[i] = c.complete.GetUsage(), c.err
		})
	}
	wait(t, "the loop holding mid-load", held)
	during := scrapeText(t, h)
	running := one(t, during, "sluice_requests_running")
	total := one(t, during, "sluice_kv_blocks_total")
	free, cached := one(t, during, "sluice_kv_blocks_free"), one(t, during, "sluice_kv_blocks_cached")
	usage := one(t, during, "sluice_kv_cache_usage_ratio")
	if running < 1 || running > 4 || usage <= 0 || free+cached+usage*total != total {
		t.Errorf("during load: running %v (max-seqs 4), KV usage %v, free %v + cached %v of %v", running, usage, free, cached, total)
	}
	if v := one(t, during, "vllm:num_requests_running"); v != running {
		t.Errorf("vllm:num_requests_running %v != sluice_requests_running %v", v, running)
	}
	release()
	wg.Wait()
	for i := range n {
		r.waitFinish(t)
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
	}
	r.idle(t)

	after := scrapeText(t, h)
	for _, g := range []string{"sluice_requests_running", "sluice_requests_waiting", "sluice_kv_cache_usage_ratio",
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		if v := one(t, after, g); v != 0 {
			t.Errorf("after load: %s = %v, want 0", g, v)
		}
	}
	if free, cached := one(t, after, "sluice_kv_blocks_free"), one(t, after, "sluice_kv_blocks_cached"); free+cached != total {
		t.Errorf("after load: free %v + cached %v != total %v", free, cached, total)
	}
	var prompt, gaps float64
	for _, u := range usages {
		prompt += float64(u.GetPromptTokens())
		gaps += float64(u.GetCompletionTokens() - 1)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"sluice_time_to_first_token_seconds", n},
		{"sluice_request_duration_seconds", n},
		{"sluice_request_queue_seconds", n},
		{"sluice_inter_token_latency_seconds", gaps}, // every gap of every request
		{"sluice_prompt_tokens_total", prompt},
		{"vllm:e2e_request_latency_seconds", n},
	} {
		if got := one(t, after, c.name); got != c.want {
			t.Errorf("after load: %s = %v, want %v", c.name, got, c.want)
		}
	}
	finished := one(t, after, "sluice_requests_total", "finish_reason", "length") + one(t, after, "sluice_requests_total", "finish_reason", "stop")
	if finished != n {
		t.Errorf("requests_total{length|stop} = %v, want %d", finished, n)
	}
	if steps := one(t, after, "sluice_step_duration_seconds"); steps < 8 || one(t, after, "sluice_batch_size") != steps {
		t.Errorf("%v steps recorded (batch sizes %v) for %d requests of 8+ tokens", steps, one(t, after, "sluice_batch_size"), n)
	}
}
