package metrics

import "github.com/prometheus/client_golang/prometheus"

// statsCollector exports the engine's Stats snapshot: the gauges and the
// counters the loop keeps itself. One snapshot per scrape, so the KV figures
// of one scrape always add up (free + used + cached = total).
type statsCollector struct{ m *Metrics }

var (
	descRunning  = prometheus.NewDesc("sluice_requests_running", "Sequences admitted (holding KV blocks) after the last step.", nil, nil)
	descWaiting  = prometheus.NewDesc("sluice_requests_waiting", "Sequences queued for admission, preempted ones included, after the last step.", nil, nil)
	descKVUsage  = prometheus.NewDesc("sluice_kv_cache_usage_ratio", "KV blocks held by live sequences over all blocks, 0 to 1; cached-but-idle blocks count as free.", nil, nil)
	descKVTotal  = prometheus.NewDesc("sluice_kv_blocks_total", "KV blocks in the pool.", nil, nil)
	descKVFree   = prometheus.NewDesc("sluice_kv_blocks_free", "KV blocks neither held by a sequence nor kept for the prefix cache.", nil, nil)
	descKVCached = prometheus.NewDesc("sluice_kv_blocks_cached", "KV blocks held by no sequence but kept for prefix reuse (evictable).", nil, nil)
	descGen      = prometheus.NewDesc("sluice_generation_tokens_total", "Tokens sampled (a stop token included).", nil, nil)
	descPreempt  = prometheus.NewDesc("sluice_preemptions_total", "Sequences preempted (blocks freed, to be recomputed) for lack of KV blocks.", nil, nil)
	descHits     = prometheus.NewDesc("sluice_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache at admission instead of computed.", nil, nil)
	descD2H      = prometheus.NewDesc("sluice_backend_device_to_host_bytes_total", "Bytes the backend copied from the device to the host (logits rows, token ids, logprobs); only when tokens are sampled on the device.", nil, nil)
	descStates   = prometheus.NewDesc("sluice_state_slots", "Recurrent-state slots of a hybrid model (Qwen3.5's DeltaNet layers): used by sequences and their checkpoints, cached for prefix reuse (evictable), total; only for a model with recurrent state.", []string{"state"}, nil)
	descSlotSize = prometheus.NewDesc("sluice_state_slot_bytes", "Memory of one recurrent-state slot, every recurrent layer; only for a model with recurrent state.", nil, nil)
)

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsage, descKVTotal, descKVFree, descKVCached, descGen, descPreempt, descHits, descD2H, descStates, descSlotSize} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.snapshot()
	usage := 0.0
	if st.KV.Total > 0 {
		usage = float64(st.KV.Used) / float64(st.KV.Total)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(descRunning, float64(st.Running))
	gauge(descWaiting, float64(st.Waiting))
	gauge(descKVUsage, usage)
	gauge(descKVTotal, float64(st.KV.Total))
	gauge(descKVFree, float64(st.KV.Free))
	gauge(descKVCached, float64(st.KV.Cached))
	counter(descGen, st.GenTokens)
	counter(descPreempt, st.Preemptions)
	counter(descHits, st.PrefixHitTokens)
	if st.DeviceToHost { // absent, not 0, where nothing is copied back (the CPU backend)
		counter(descD2H, st.DeviceToHostBytes)
	}
	// Absent, not 0, for a model without recurrent state: a zero total would
	// read on a dashboard as a hybrid pool with nothing left, and an
	// attention-only model has no such pool to run out of.
	if st.KV.StatesTotal > 0 {
		ch <- prometheus.MustNewConstMetric(descStates, prometheus.GaugeValue, float64(st.KV.StatesUsed), "used")
		ch <- prometheus.MustNewConstMetric(descStates, prometheus.GaugeValue, float64(st.KV.StatesCached), "cached")
		ch <- prometheus.MustNewConstMetric(descStates, prometheus.GaugeValue, float64(st.KV.StatesTotal), "total")
		gauge(descSlotSize, float64(st.StateSlotBytes))
	}
}
