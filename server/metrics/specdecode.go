package metrics

import "github.com/prometheus/client_golang/prometheus"

// specCollector exports speculative decoding's counters (engine spec.go)
// from the same snapshot as statsCollector, and only where speculation is
// configured: absent, not 0, on an engine that never speculates. Each
// series carries the proposer whose drafts it counts (proposer="ngram",
// "draft" or "mtp", the engine's SpecConfig.Method), so acceptance and
// draft cost can be compared across replicas configured differently.
type specCollector struct{ m *Metrics }

var specLabels = []string{"proposer"}

var (
	descSpecDrafts   = prometheus.NewDesc("sluice_spec_decode_num_drafts_total", "Verifications: a sequence's step that carried draft tokens.", specLabels, nil)
	descSpecTokens   = prometheus.NewDesc("sluice_spec_decode_num_draft_tokens_total", "Draft tokens verified; each cost one batch row.", specLabels, nil)
	descSpecAccepted = prometheus.NewDesc("sluice_spec_decode_num_accepted_tokens_total", "Draft tokens accepted (equal to the token the target sampled there).", specLabels, nil)
	descSpecRowCost  = prometheus.NewDesc("sluice_spec_decode_row_cost_ratio", "Fitted cost of one draft row over one sequence's share of a decode step (the straight-line fit; a sequence's draft length maximises its expected tokens per second of the step times learned per row count).", specLabels, nil)
)

func init() {
	vllmAliases = append(vllmAliases,
		vllmAlias{from: "sluice_spec_decode_num_drafts_total", to: "vllm:spec_decode_num_drafts_total"},
		vllmAlias{from: "sluice_spec_decode_num_draft_tokens_total", to: "vllm:spec_decode_num_draft_tokens_total"},
		vllmAlias{from: "sluice_spec_decode_num_accepted_tokens_total", to: "vllm:spec_decode_num_accepted_tokens_total"},
	)
}

func (specCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSpecDrafts, descSpecTokens, descSpecAccepted, descSpecRowCost} {
		ch <- d
	}
}

func (c specCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.snapshot()
	if st == nil || !st.Speculating {
		return
	}
	for _, v := range []struct {
		d *prometheus.Desc
		n int64
	}{{descSpecDrafts, st.SpecDrafts}, {descSpecTokens, st.SpecDraftTokens}, {descSpecAccepted, st.SpecAcceptedTokens}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), st.SpecMethod)
	}
	ch <- prometheus.MustNewConstMetric(descSpecRowCost, prometheus.GaugeValue, st.SpecRowCost, st.SpecMethod)
}
