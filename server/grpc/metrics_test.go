package grpcserver

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/metrics"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

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
	during := metricstest.Scrape(t, h)
	running := during.Value(t, "sluice_requests_running")
	total := during.Value(t, "sluice_kv_blocks_total")
	free, cached := during.Value(t, "sluice_kv_blocks_free"), during.Value(t, "sluice_kv_blocks_cached")
	usage := during.Value(t, "sluice_kv_cache_usage_ratio")
	if running < 1 || running > 4 || usage <= 0 || free+cached+usage*total != total {
		t.Errorf("during load: running %v (max-seqs 4), KV usage %v, free %v + cached %v of %v", running, usage, free, cached, total)
	}
	if v := during.Value(t, "vllm:num_requests_running"); v != running {
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

	after := metricstest.Scrape(t, h)
	for _, g := range []string{"sluice_requests_running", "sluice_requests_waiting", "sluice_kv_cache_usage_ratio",
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		if v := after.Value(t, g); v != 0 {
			t.Errorf("after load: %s = %v, want 0", g, v)
		}
	}
	if free, cached := after.Value(t, "sluice_kv_blocks_free"), after.Value(t, "sluice_kv_blocks_cached"); free+cached != total {
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
		if got := after.Value(t, c.name); got != c.want {
			t.Errorf("after load: %s = %v, want %v", c.name, got, c.want)
		}
	}
	finished := after.Value(t, "sluice_requests_total", "finish_reason", "length") + after.Value(t, "sluice_requests_total", "finish_reason", "stop")
	if finished != n {
		t.Errorf("requests_total{length|stop} = %v, want %d", finished, n)
	}
	if steps := after.Value(t, "sluice_step_duration_seconds"); steps < 8 || after.Value(t, "sluice_batch_size") != steps {
		t.Errorf("%v steps recorded (batch sizes %v) for %d requests of 8+ tokens", steps, after.Value(t, "sluice_batch_size"), n)
	}
}
