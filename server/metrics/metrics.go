package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/engine"
)

// Compat selects extra metric names exported beside Sluice's own.
type Compat string

const (
	CompatNone Compat = ""
	// CompatVLLM also exports vLLM's names (vllm:num_requests_waiting, ...)
	// for routers that only read those; see vllm.go.
	CompatVLLM Compat = "vllm"
)

// ParseCompat validates a --metrics-compat flag value.
func ParseCompat(s string) (Compat, error) {
	switch Compat(s) {
	case CompatNone, CompatVLLM:
		return Compat(s), nil
	}
	return "", fmt.Errorf("metrics: unknown compat %q (want \"\" or \"vllm\")", s)
}

// Options configure New.
type Options struct {
	Compat Compat
	// BlockSize is the KV block size in tokens; the vLLM view reports it in
	// vllm:cache_config_info (the inference extension's prefix scorer reads it).
	BlockSize int
	// NoRuntime leaves out the Go runtime and process collectors (tests that
	// compare whole expositions want only Sluice's own families).
	NoRuntime bool
}

// Metrics holds Sluice's collectors. Its On* methods are the engine observer.
type Metrics struct {
	gatherer prometheus.Gatherer

	running, waiting                   prometheus.Gauge
	kvUsage, kvTotal, kvFree, kvCached prometheus.Gauge
	ttft, itl, request, queue, reclaim prometheus.Histogram
	step, batch                        prometheus.Histogram
	promptTokens, genTokens            prometheus.Counter
	preemptions, prefixHits            prometheus.Counter
	requests                           *prometheus.CounterVec // finish_reason
	aborted                            *prometheus.CounterVec // cause
}

// finishReasons and abortCauses are pre-created so their series exist at 0
// from the start: rate() over a series that appears late misses its first
// increment.
var (
	finishReasons = []engine.FinishReason{engine.FinishStop, engine.FinishLength, engine.FinishAbort, engine.FinishError}
	abortCauses   = []engine.AbortCause{engine.CauseClientDisconnect, engine.CauseStopString, engine.CauseStall, engine.CauseShutdown}
)

// New registers Sluice's collectors in reg, every series labelled
// model=<model>. Serve Handler() on GET /metrics.
func New(reg *prometheus.Registry, model string, opts Options) (*Metrics, error) {
	if model == "" {
		return nil, errors.New("metrics: model name is empty")
	}
	if opts.Compat != CompatNone && opts.Compat != CompatVLLM {
		return nil, fmt.Errorf("metrics: unknown compat %q", opts.Compat)
	}
	m := &Metrics{gatherer: reg}
	var cs []prometheus.Collector
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		cs = append(cs, g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		cs = append(cs, c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		cs = append(cs, h)
		return h
	}

	m.running = gauge("sluice_requests_running", "Sequences in the running batch (prefilling or decoding) after the last step.")
	m.waiting = gauge("sluice_requests_waiting", "Sequences queued for admission (preempted ones included) after the last step.")
	m.kvUsage = gauge("sluice_kv_cache_usage_ratio", "KV blocks held by live sequences over all blocks, 0 to 1; cached-but-idle blocks count as free.")
	m.kvTotal = gauge("sluice_kv_blocks_total", "KV blocks in the pool.")
	m.kvFree = gauge("sluice_kv_blocks_free", "KV blocks neither held by a sequence nor kept for the prefix cache.")
	m.kvCached = gauge("sluice_kv_blocks_cached", "KV blocks held by no sequence but kept for prefix reuse (evictable).")

	m.ttft = hist("sluice_time_to_first_token_seconds", "Arrival to first generated token.", TTFTBuckets)
	m.itl = hist("sluice_inter_token_latency_seconds", "Gap between consecutive generated tokens of one sequence.", ITLBuckets)
	m.request = hist("sluice_request_duration_seconds", "Arrival to end of the sequence, whatever the finish reason.", RequestBuckets)
	m.queue = hist("sluice_request_queue_seconds", "Arrival to first scheduled step.", QueueBuckets)
	m.reclaim = hist("sluice_kv_reclaim_seconds", "Abort request to the sequence's KV blocks being back in the pool.", ReclaimBuckets)
	m.step = hist("sluice_step_duration_seconds", "One engine step: schedule, forward, sample, deliver.", StepBuckets)
	m.batch = hist("sluice_batch_size", "Sequences in one engine step.", BatchBuckets)

	m.promptTokens = counter("sluice_prompt_tokens_total", "Prompt tokens of finished requests (prefix-cache hits included).")
	m.genTokens = counter("sluice_generation_tokens_total", "Tokens generated, counted as they are produced.")
	m.preemptions = counter("sluice_preemptions_total", "Sequences preempted (blocks freed, to be recomputed) for lack of KV blocks.")
	m.prefixHits = counter("sluice_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache instead of computed.")
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total", Help: "Finished requests by finish reason (stop, length, abort, error).",
	}, []string{"finish_reason"})
	m.aborted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_aborted_total", Help: "Aborted requests by cause.",
	}, []string{"cause"})
	cs = append(cs, m.requests, m.aborted)
	for _, r := range finishReasons {
		m.requests.WithLabelValues(string(r))
	}
	for _, c := range abortCauses {
		m.aborted.WithLabelValues(string(c))
	}

	labelled := prometheus.WrapRegistererWith(prometheus.Labels{"model": model}, reg)
	for _, c := range cs {
		if err := labelled.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	if !opts.NoRuntime {
		for _, c := range []prometheus.Collector{
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metrics: register runtime collector: %w", err)
			}
		}
	}
	if opts.Compat == CompatVLLM {
		m.gatherer = vllmView{src: reg, blockSize: opts.BlockSize}
	}
	return m, nil
}

// Handler serves the exposition (Prometheus text, or protobuf when asked).
// A failing collector is reported in the response, not as a 500, so one bad
// GPU reading never hides the engine figures.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer is what Handler serves, for callers that mount their own handler.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// Step is the snapshot the engine loop publishes after each step.
type Step struct {
	Duration     time.Duration
	Running      int // sequences in the running batch after the step
	Waiting      int // sequences waiting for admission after the step
	Batch        int // sequences that ran in this step
	BlocksTotal  int
	BlocksFree   int
	BlocksCached int
	Preemptions  int // sequences preempted during this step
}

// OnStep updates the gauges and the per-step histograms. A step that ran no
// sequence (the loop woke for arrivals or aborts only) updates only the gauges,
// so idle wake-ups do not drag the step-duration figures down.
func (m *Metrics) OnStep(s Step) {
	m.running.Set(float64(s.Running))
	m.waiting.Set(float64(s.Waiting))
	m.kvTotal.Set(float64(s.BlocksTotal))
	m.kvFree.Set(float64(s.BlocksFree))
	m.kvCached.Set(float64(s.BlocksCached))
	usage := 0.0
	if s.BlocksTotal > 0 {
		usage = float64(s.BlocksTotal-s.BlocksFree-s.BlocksCached) / float64(s.BlocksTotal)
	}
	m.kvUsage.Set(usage)
	if s.Preemptions > 0 {
		m.preemptions.Add(float64(s.Preemptions))
	}
	if s.Batch > 0 {
		m.step.Observe(s.Duration.Seconds())
		m.batch.Observe(float64(s.Batch))
	}
}

// OnScheduled records a sequence's first admission into a step, wait after arrival.
func (m *Metrics) OnScheduled(wait time.Duration) { m.queue.Observe(wait.Seconds()) }

// OnFirstToken records a sequence's first generated token, ttft after arrival.
func (m *Metrics) OnFirstToken(ttft time.Duration) {
	m.ttft.Observe(ttft.Seconds())
	m.genTokens.Inc()
}

// OnToken records every later token, gap after the previous one of the same sequence.
func (m *Metrics) OnToken(gap time.Duration) {
	m.itl.Observe(gap.Seconds())
	m.genTokens.Inc()
}

// OnFinish records a sequence's end, elapsed after arrival.
func (m *Metrics) OnFinish(res engine.Result, elapsed time.Duration) {
	m.request.Observe(elapsed.Seconds())
	m.requests.WithLabelValues(string(res.Finish)).Inc()
	if res.Finish == engine.FinishAbort && res.Cause != engine.CauseNone {
		m.aborted.WithLabelValues(string(res.Cause)).Inc()
	}
	m.promptTokens.Add(float64(res.PromptTokens))
	m.prefixHits.Add(float64(res.CachedTokens))
}

// OnReclaim records the time from an abort request to the sequence's blocks
// being free again.
func (m *Metrics) OnReclaim(d time.Duration) { m.reclaim.Observe(d.Seconds()) }
