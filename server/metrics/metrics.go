package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
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
	// CompatLlamaCpp also exports llama-server's names (llamacpp:prompt_tokens_total,
	// ...) for dashboards built on those; see llamacpp.go.
	CompatLlamaCpp Compat = "llamacpp"
	// CompatBoth exports both name sets beside Sluice's.
	CompatBoth Compat = "both"
)

func (c Compat) vllm() bool     { return c == CompatVLLM || c == CompatBoth }
func (c Compat) llamacpp() bool { return c == CompatLlamaCpp || c == CompatBoth }

// ParseCompat validates a --metrics-compat flag value.
func ParseCompat(s string) (Compat, error) {
	switch Compat(s) {
	case CompatNone, CompatVLLM, CompatLlamaCpp, CompatBoth:
		return Compat(s), nil
	}
	return "", fmt.Errorf("metrics: unknown compat %q (want \"\", \"vllm\", \"llamacpp\" or \"both\")", s)
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

// Metrics holds Sluice's collectors. It implements engine.Observer (set it
// as engine.Config.Observer) and reads the engine's per-step Stats snapshot
// at scrape time (SetSource) for the gauges and the loop's own counters.
type Metrics struct {
	gatherer prometheus.Gatherer
	source   atomic.Pointer[func() *engine.Stats]

	ttft, itl, request, queue, reclaim prometheus.Histogram
	step, batch                        prometheus.Histogram
	promptTokens                       prometheus.Counter
	requests                           *prometheus.CounterVec // finish_reason
	aborted                            *prometheus.CounterVec // cause
	stepFailures                       *prometheus.CounterVec // kind (engine.StepFail*)

	// lastToken is when each live sequence delivered its previous token, for
	// the inter-token gap. Only the engine loop touches it (Observer calls).
	lastToken map[*engine.Sequence]time.Time
	// lc keeps llama-server's own figures; nil without CompatLlamaCpp.
	lc *llamacppAcc
}

// finishReasons and abortCauses are pre-created so their series exist at 0
// from the start: rate() over a series that appears late misses its first
// increment.
var (
	finishReasons = []engine.FinishReason{engine.FinishStop, engine.FinishLength, engine.FinishAbort, engine.FinishError}
	abortCauses   = []engine.AbortCause{engine.CauseClientDisconnect, engine.CauseStopString, engine.CauseStall, engine.CauseShutdown}
	stepFailKinds = []string{engine.StepFailError, engine.StepFailPanic, engine.StepFailDeviceLost}
)

// New registers Sluice's collectors in reg, every series labelled
// model=<model>. Serve Handler() on GET /metrics.
func New(reg *prometheus.Registry, model string, opts Options) (*Metrics, error) {
	if model == "" {
		return nil, errors.New("metrics: model name is empty")
	}
	if _, err := ParseCompat(string(opts.Compat)); err != nil {
		return nil, err
	}
	m := &Metrics{gatherer: reg, lastToken: map[*engine.Sequence]time.Time{}}
	cs := []prometheus.Collector{statsCollector{m}, specCollector{m}}
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

	m.ttft = hist("sluice_time_to_first_token_seconds", "Arrival to first generated token.", TTFTBuckets)
	m.itl = hist("sluice_inter_token_latency_seconds", "Gap between consecutive generated tokens of one sequence.", ITLBuckets)
	m.request = hist("sluice_request_duration_seconds", "Arrival to end of the sequence, whatever the finish reason.", RequestBuckets)
	m.queue = hist("sluice_request_queue_seconds", "Arrival to first scheduled step.", QueueBuckets)
	m.reclaim = hist("sluice_kv_reclaim_seconds", "Abort request to the sequence's KV blocks being back in the pool.", ReclaimBuckets)
	m.step = hist("sluice_step_duration_seconds", "One engine step: schedule, forward, sample, deliver.", StepBuckets)
	m.batch = hist("sluice_batch_size", "Tokens (batch rows) in one engine step: one per decoding sequence plus prefill chunks.", BatchBuckets)

	m.promptTokens = counter("sluice_prompt_tokens_total", "Prompt tokens of finished requests (prefix-cache hits included).")
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total", Help: "Finished requests by finish reason as the client saw it (stop, stop string included; length; abort; error).",
	}, []string{"finish_reason"})
	m.aborted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_aborted_total", Help: "Aborted requests by cause.",
	}, []string{"cause"})
	m.stepFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_engine_step_failures_total", Help: "Engine steps that failed, by kind (error, panic, device_lost); each ended only that step's sequences, except device_lost, which ends all and stops the server.",
	}, []string{"kind"})
	cs = append(cs, m.requests, m.aborted, m.stepFailures)
	for _, k := range stepFailKinds {
		m.stepFailures.WithLabelValues(k)
	}
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
	if opts.Compat.llamacpp() {
		// Unlabelled, as llama-server's series are.
		m.lc = newLlamacppAcc()
		if err := reg.Register(llamacppCollector{m}); err != nil {
			return nil, fmt.Errorf("metrics: register llama.cpp names: %w", err)
		}
	}
	if opts.Compat.vllm() {
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

// SetSource makes scrapes read the gauges and loop counters from f, usually
// (*engine.Engine).Stats. Until it is called they read as zero.
func (m *Metrics) SetSource(f func() *engine.Stats) { m.source.Store(&f) }

func (m *Metrics) snapshot() *engine.Stats {
	if f := m.source.Load(); f != nil {
		if st := (*f)(); st != nil {
			return st
		}
	}
	return &engine.Stats{}
}

var _ engine.Observer = (*Metrics)(nil)

// OnFirstToken implements engine.Observer.
func (m *Metrics) OnFirstToken(s *engine.Sequence, at time.Time) {
	m.observeFirstToken(at.Sub(s.Submitted()))
	m.lastToken[s] = at
	if m.lc != nil {
		m.lc.onToken(s, at, true)
	}
}

// OnToken implements engine.Observer.
func (m *Metrics) OnToken(s *engine.Sequence, at time.Time) {
	if prev, ok := m.lastToken[s]; ok {
		m.itl.Observe(at.Sub(prev).Seconds())
	}
	m.lastToken[s] = at
	if m.lc != nil {
		m.lc.onToken(s, at, false)
	}
}

// OnFinish implements engine.Observer.
func (m *Metrics) OnFinish(s *engine.Sequence, r engine.Result, queued time.Duration) {
	delete(m.lastToken, s)
	if m.lc != nil {
		m.lc.onFinish(s)
	}
	m.observeFinish(r, queued, time.Since(s.Submitted()))
}

// OnStepFailure implements engine.StepFailureObserver.
func (m *Metrics) OnStepFailure(kind string) { m.stepFailures.WithLabelValues(kind).Inc() }

var _ engine.StepFailureObserver = (*Metrics)(nil)

// OnReclaim implements engine.Observer.
func (m *Metrics) OnReclaim(d time.Duration) { m.reclaim.Observe(d.Seconds()) }

// OnStep implements engine.Observer. Wake-ups that ran no row are not steps.
func (m *Metrics) OnStep(d time.Duration, rows int) {
	if rows == 0 {
		return
	}
	m.step.Observe(d.Seconds())
	m.batch.Observe(float64(rows))
	if m.lc != nil {
		// The snapshot it reads is the one published before this step ran.
		m.lc.onStep(m.snapshot, d)
	}
}

func (m *Metrics) observeFirstToken(ttft time.Duration) { m.ttft.Observe(ttft.Seconds()) }

func (m *Metrics) observeFinish(r engine.Result, queued, elapsed time.Duration) {
	m.queue.Observe(queued.Seconds())
	m.request.Observe(elapsed.Seconds())
	reason := r.Finish
	if r.Finish == engine.FinishAbort && r.Cause == engine.CauseStopString {
		// The client saw finish_reason "stop": the writer ended the sequence
		// at a stop string. The abort still counts under its cause.
		reason = engine.FinishStop
	}
	m.requests.WithLabelValues(string(reason)).Inc()
	if r.Finish == engine.FinishAbort && r.Cause != engine.CauseNone {
		m.aborted.WithLabelValues(string(r.Cause)).Inc()
	}
	m.promptTokens.Add(float64(r.PromptTokens))
}
