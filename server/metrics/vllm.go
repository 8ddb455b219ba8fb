package metrics

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// vllmAlias is one vLLM name exported as a copy of a Sluice family. vLLM
// labels the model "model_name"; relabel lists other label renames.
type vllmAlias struct {
	from, to string
	relabel  map[string]string
}

// vllmAliases are the names the Gateway API Inference Extension's model
// server protocol lists for vLLM (TotalQueuedRequests, TotalRunningRequests,
// KVCacheUtilization, BlockSize) plus the latency and token families
// dashboards built for vLLM plot. Checked against the protocol document
// (docs/proposals/003-model-server-protocol) and vLLM v1's metric names.
// Histograms keep Sluice's buckets (vLLM's differ; readers use quantiles).
var vllmAliases = []vllmAlias{
	{from: "sluice_requests_running", to: "vllm:num_requests_running"},
	{from: "sluice_requests_waiting", to: "vllm:num_requests_waiting"},
	// Same fraction 0-1 despite "perc"; the gpu_ name is what vLLM < 0.10 and
	// the inference extension's early releases read.
	{from: "sluice_kv_cache_usage_ratio", to: "vllm:kv_cache_usage_perc"},
	{from: "sluice_kv_cache_usage_ratio", to: "vllm:gpu_cache_usage_perc"},
	{from: "sluice_time_to_first_token_seconds", to: "vllm:time_to_first_token_seconds"},
	{from: "sluice_inter_token_latency_seconds", to: "vllm:inter_token_latency_seconds"},
	{from: "sluice_request_duration_seconds", to: "vllm:e2e_request_latency_seconds"},
	{from: "sluice_request_queue_seconds", to: "vllm:request_queue_time_seconds"},
	{from: "sluice_prompt_tokens_total", to: "vllm:prompt_tokens_total"},
	{from: "sluice_generation_tokens_total", to: "vllm:generation_tokens_total"},
	{from: "sluice_preemptions_total", to: "vllm:num_preemptions_total"},
	// vLLM counts both in tokens: queried = prompt tokens looked up.
	{from: "sluice_prefix_cache_hit_tokens_total", to: "vllm:prefix_cache_hits_total"},
	{from: "sluice_prompt_tokens_total", to: "vllm:prefix_cache_queries_total"},
	{from: "sluice_requests_total", to: "vllm:request_success_total", relabel: map[string]string{"finish_reason": "finished_reason"}},
}

// vllmCacheConfig is vLLM's info gauge (value 1) whose labels carry the KV
// geometry; the inference extension's prefix-aware scorer reads block_size.
const vllmCacheConfig = "vllm:cache_config_info"

// vllmView gathers src once and appends the vLLM-named copies, so both name
// sets in one scrape come from the same instant.
type vllmView struct {
	src       prometheus.Gatherer
	blockSize int
}

func (v vllmView) Gather() ([]*dto.MetricFamily, error) {
	fams, err := v.src.Gather()
	byName := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	out := fams
	for _, a := range vllmAliases {
		if f, ok := byName[a.from]; ok {
			out = append(out, renamed(f, a))
		}
	}
	if f, ok := byName["sluice_kv_blocks_total"]; ok && len(f.GetMetric()) > 0 {
		out = append(out, cacheConfigInfo(f.GetMetric()[0].GetGauge().GetValue(), v.blockSize))
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, err // a partial gather keeps its error, as promhttp expects
}

func renamed(f *dto.MetricFamily, a vllmAlias) *dto.MetricFamily {
	c := proto.CloneOf(f)
	c.Name = proto.String(a.to)
	c.Help = proto.String(f.GetHelp() + " (alias of " + a.from + ")")
	for _, m := range c.GetMetric() {
		for _, lp := range m.GetLabel() {
			switch to, ok := a.relabel[lp.GetName()]; {
			case ok:
				lp.Name = proto.String(to)
			case lp.GetName() == "model":
				lp.Name = proto.String("model_name")
			}
		}
		slices.SortFunc(m.Label, func(x, y *dto.LabelPair) int { return strings.Compare(x.GetName(), y.GetName()) })
	}
	return c
}

func cacheConfigInfo(blocks float64, blockSize int) *dto.MetricFamily {
	return &dto.MetricFamily{
		Name: proto.String(vllmCacheConfig),
		Help: proto.String("KV cache geometry in labels (vLLM compatibility); value is always 1."),
		Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{
			Label: []*dto.LabelPair{
				{Name: proto.String("block_size"), Value: proto.String(strconv.Itoa(blockSize))},
				{Name: proto.String("num_gpu_blocks"), Value: proto.String(fmt.Sprint(int64(blocks)))},
			},
			Gauge: &dto.Gauge{Value: proto.Float64(1)},
		}},
	}
}
