package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/engine"
)

// llama-server's names (--metrics-compat=llamacpp), as v0.5.0 exports them
// (tools/server/server-task.cpp, server_task_result_metrics::to_metrics):
// the same names, types and HELP text, and no labels, llama-server labelling
// none (one server, one model). testdata/llamacpp-v0.5.0.metrics is its
// exposition, captured by scripts/llamacpp/metrics-golden.sh.
//
// Where the figures come from:
//
//	prompt_tokens_total             Stats.PromptTokens: tokens prefilled (cached ones excluded)
//	prompt_tokens_cached_total      Stats.PrefixHitTokens
//	tokens_predicted_total          Stats.GenTokens (vllm:generation_tokens_total's counter)
//	n_decode_total                  engine steps (OnStep): one forward pass each
//	prompt_seconds_total            wall time of the steps that carried prompt rows
//	tokens_predicted_seconds_total  Σ per finished sequence, first token to last
//	n_tokens_max                    longest sequence seen, prompt + generated tokens decoded
//	spec_decode_*                   Stats.Spec* (0 without speculation, as llama-server's)
//	prompt_tokens_seconds           prompt tokens / prompt time since the previous scrape
//	predicted_tokens_seconds        decode steps / generation time since the previous scrape
//	requests_processing             Stats.Running
//	requests_deferred               Stats.Waiting
//	n_busy_slots_per_decode         Σ sequences per step / steps
//
// The two throughput gauges are llama-server's "buckets": every scrape reads
// and empties them, so they average over the window between two scrapes, and
// two scrapers each see part of the traffic, as with llama-server.
// spec_decode_num_accepted_tokens_per_pos_total is not exported: the engine
// does not count acceptances per draft position.

const lcPrefix = "llamacpp:"

func lcDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(lcPrefix+name, help, nil, nil)
}

var (
	lcPromptTokens   = lcDesc("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens")
	lcPromptCached   = lcDesc("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache")
	lcPromptSeconds  = lcDesc("prompt_seconds_total", "Total time spent processing prompts")
	lcPredicted      = lcDesc("tokens_predicted_total", "Number of generation tokens processed")
	lcPredictSeconds = lcDesc("tokens_predicted_seconds_total", "Total time spent generating tokens")
	lcDecodes        = lcDesc("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding")
	lcTokensMax      = lcDesc("n_tokens_max", "Largest observed sequence length (prompt + generation)")
	lcDraftTokens    = lcDesc("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated")
	lcDraftAccepted  = lcDesc("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model")
	lcDrafts         = lcDesc("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps")

	lcPromptRate  = lcDesc("prompt_tokens_seconds", "Average prompt throughput in tokens/s")
	lcPredictRate = lcDesc("predicted_tokens_seconds", "Average generation throughput in tokens/s")
	lcProcessing  = lcDesc("requests_processing", "Number of requests processing")
	lcDeferred    = lcDesc("requests_deferred", "Number of requests deferred")
	lcBusyPerStep = lcDesc("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call")
)

// rate is llama-server's server_metrics::bucket: steps over time, where a
// prompt token is a step and a sequence's first generated token is not (it
// comes with the prompt's last batch).
type rate struct {
	steps int64
	time  time.Duration
}

func (r *rate) add(steps int64, d time.Duration) { r.steps, r.time = r.steps+steps, r.time+d }

func (r rate) perSecond() float64 {
	if r.time <= 0 {
		return 0
	}
	return float64(r.steps) / r.time.Seconds()
}

// genSpan is one live sequence's generation so far.
type genSpan struct {
	first, last time.Time
	n           int // tokens delivered
	base        int // prompt (and resumed) tokens before them
}

// llamacppAcc keeps what llama-server counts and engine.Stats does not.
//
// A step's prompt rows are known only from the Stats snapshot the loop
// publishes after it, and OnStep runs before that publish: so OnStep leaves
// its wall time pending, and the next OnStep or a scrape, whichever first
// sees the step's snapshot (Steps past the one OnStep saw), settles it.
//
//	OnStep(k): snapshot = after step k-1 → settle k-1; pending = d_k, seen Steps S
//	publish(k): Steps S+1
//	scrape or OnStep(k+1): snapshot Steps > S → settle k
//
// The observer calls (the loop) and Collect (scrapes) share it under mu,
// and each reads the snapshot while holding mu: snapshots only move
// forward, so none settles with one older than a snapshot already settled
// (which would count a step's prompt tokens twice).
type llamacppAcc struct {
	mu sync.Mutex

	pending     time.Duration
	pendingStep int64 // Stats.Steps before the pending step ran
	hasPending  bool
	seenPrompt  int64 // Stats.PromptTokens settled, their time counted
	seenSteps   int64 // Stats.Steps of the newest snapshot settled with

	decodes, busy int64
	promptTime    time.Duration
	predictTime   time.Duration
	tokensMax     int64
	// Emptied by each scrape (llama-server's prompt_bucket, predict_bucket).
	promptWindow, predictWindow rate

	spans map[*engine.Sequence]*genSpan // loop only, like Metrics.lastToken
}

func newLlamacppAcc() *llamacppAcc { return &llamacppAcc{spans: map[*engine.Sequence]*genSpan{}} }

// settle attributes the pending step once st is the snapshot published
// after it. Called with mu held.
func (a *llamacppAcc) settle(st *engine.Stats) {
	if st.Steps < a.seenSteps {
		return // older than one already settled: its prompt count is behind, and counters never go back
	}
	a.seenSteps = st.Steps
	if a.hasPending {
		if st.Steps <= a.pendingStep {
			return // the step's snapshot is not out yet
		}
		a.decodes++
		a.busy += int64(st.LastBatchSeqs)
		if n := st.PromptTokens - a.seenPrompt; n > 0 {
			a.promptTime += a.pending
			a.promptWindow.add(n, a.pending)
		}
		a.hasPending = false
	}
	a.seenPrompt = st.PromptTokens
}

func (a *llamacppAcc) onStep(snapshot func() *engine.Stats, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := snapshot()
	a.settle(st)
	a.pending, a.pendingStep, a.hasPending = d, st.Steps, true
}

func (a *llamacppAcc) onToken(s *engine.Sequence, at time.Time, first bool) {
	sp := a.spans[s]
	if sp == nil {
		if !first {
			return // its first token was never seen: no span to extend
		}
		req := s.Request()
		sp = &genSpan{first: at, base: len(req.Prompt) + len(req.Resume)}
		a.spans[s] = sp
	}
	sp.last = at
	sp.n++
	// llama-server takes the slot's cached tokens after each decode: the
	// token just sampled is not among them yet.
	a.mu.Lock()
	a.tokensMax = max(a.tokensMax, int64(sp.base+sp.n-1))
	a.mu.Unlock()
}

// onFinish adds s's generation to the totals, as llama-server does when a
// slot is released: steps = tokens - 1, time = first token to last.
func (a *llamacppAcc) onFinish(s *engine.Sequence) {
	sp, ok := a.spans[s]
	if !ok {
		return
	}
	delete(a.spans, s)
	d := sp.last.Sub(sp.first)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.predictTime += d
	a.predictWindow.add(int64(sp.n-1), d)
}

// llamacppCollector exports the llama-server view; it is registered without
// the model label.
type llamacppCollector struct{ m *Metrics }

func (llamacppCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lcPromptTokens, lcPromptCached, lcPromptSeconds, lcPredicted, lcPredictSeconds,
		lcDecodes, lcTokensMax, lcDraftTokens, lcDraftAccepted, lcDrafts,
		lcPromptRate, lcPredictRate, lcProcessing, lcDeferred, lcBusyPerStep} {
		ch <- d
	}
}

func (c llamacppCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.m.lc
	a.mu.Lock()
	st := c.m.snapshot()
	a.settle(st)
	prompt, promptTime, predictTime := a.seenPrompt, a.promptTime, a.predictTime
	decodes, busy, tokensMax := a.decodes, a.busy, a.tokensMax
	promptRate, predictRate := a.promptWindow.perSecond(), a.predictWindow.perSecond()
	a.promptWindow, a.predictWindow = rate{}, rate{}
	a.mu.Unlock()

	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(lcPromptTokens, float64(prompt))
	counter(lcPromptCached, float64(st.PrefixHitTokens))
	counter(lcPromptSeconds, promptTime.Seconds())
	counter(lcPredicted, float64(st.GenTokens))
	counter(lcPredictSeconds, predictTime.Seconds())
	counter(lcDecodes, float64(decodes))
	counter(lcTokensMax, float64(tokensMax))
	counter(lcDraftTokens, float64(st.SpecDraftTokens))
	counter(lcDraftAccepted, float64(st.SpecAcceptedTokens))
	counter(lcDrafts, float64(st.SpecDrafts))
	gauge(lcPromptRate, promptRate)
	gauge(lcPredictRate, predictRate)
	gauge(lcProcessing, float64(st.Running))
	gauge(lcDeferred, float64(st.Waiting))
	gauge(lcBusyPerStep, float64(busy)/float64(max(decodes, 1)))
}
