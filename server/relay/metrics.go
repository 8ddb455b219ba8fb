package relay

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server/metrics"
)

// Error kinds of sluice_relay_upstream_errors_total. Each is pre-created
// per upstream so rate() sees the first one.
const (
	KindConnect   = "connect"    // the upstream could not be reached
	KindTimeout   = "timeout"    // connect or first-byte timeout
	KindStatus4xx = "status_4xx" // refused the request before its first byte
	KindStatus5xx = "status_5xx" // failed before its first byte
	KindStall     = "stall"      // went silent mid-stream
	KindMalformed = "malformed"  // sent a chunk that is not an OpenAI chunk
	KindInBand    = "in_band"    // reported an error inside its stream
)

var errorKinds = []string{KindConnect, KindTimeout, KindStatus4xx, KindStatus5xx, KindStall, KindMalformed, KindInBand}

// Metrics are the relay's figures, every series labelled upstream=<host>.
// TTFT and ITL are measured where the relay receives the upstream's chunks:
// what a client of the relay sees, less its own network.
type Metrics struct {
	ttft, itl   *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	truncated   *prometheus.CounterVec
	cancelled   *prometheus.CounterVec
	afterGone   *prometheus.CounterVec
	retries     *prometheus.CounterVec
	streams     *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	queued      *prometheus.GaugeVec
	queueRefuse *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	up := []string{"upstream"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(up, labels...))
	}
	m := &Metrics{
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_relay_time_to_first_token_seconds",
			Help: "Relay: client request to the upstream's first chunk with text.", Buckets: metrics.TTFTBuckets}, up),
		itl: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_relay_inter_token_latency_seconds",
			Help: "Relay: gap between consecutive upstream chunks with text.", Buckets: metrics.ITLBuckets}, up),
		errors:    counter("sluice_relay_upstream_errors_total", "Relay: upstream failures by kind.", "kind"),
		truncated: counter("sluice_relay_upstream_truncated_total", "Relay: upstream streams that ended without [DONE]."),
		cancelled: counter("sluice_relay_upstream_cancelled_total", "Relay: upstream streams closed because their client left."),
		afterGone: counter("sluice_relay_tokens_after_client_left_total", "Relay: upstream chunks with text or tool calls received after the client left (wasted; ~0 when the relay cancels)."),
		retries:   counter("sluice_relay_retries_total", "Relay: requests tried again after a failure before the upstream answered."),
		streams:   counter("sluice_relay_streams_total", "Relay: upstream streams opened."),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_relay_streams_in_flight",
			Help: "Relay: upstream streams open now."}, up),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_relay_requests_queued",
			Help: "Relay: requests waiting for one of the upstream's stream slots."}, up),
		queueRefuse: counter("sluice_relay_queue_full_total", "Relay: requests refused with 429 because the upstream's slots and queue were full."),
	}
	for _, c := range []prometheus.Collector{m.ttft, m.itl, m.errors, m.truncated, m.cancelled, m.afterGone, m.retries, m.streams, m.inFlight, m.queued, m.queueRefuse} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// touch creates an upstream's series at zero, the histograms too: a
// dashboard's TTFT panel shows the upstream before its first stream.
func (m *Metrics) touch(label string) {
	m.ttft.WithLabelValues(label)
	m.itl.WithLabelValues(label)
	for _, k := range errorKinds {
		m.errors.WithLabelValues(label, k)
	}
	for _, c := range []*prometheus.CounterVec{m.truncated, m.cancelled, m.afterGone, m.retries, m.streams, m.queueRefuse} {
		c.WithLabelValues(label)
	}
	m.inFlight.WithLabelValues(label)
	m.queued.WithLabelValues(label)
}
