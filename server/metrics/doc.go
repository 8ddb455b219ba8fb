// Package metrics owns Sluice's Prometheus figures: the collectors behind
// GET /metrics, the engine observer that feeds them, and the optional vLLM
// compatibility view (--metrics-compat=vllm) that routers such as the
// Kubernetes Gateway API Inference Extension read.
//
// Sources:
//
//	engine loop ──OnStep (once per step)────────▶ gauges, step/batch histograms
//	            ──OnQueued/OnFirstToken/OnToken─▶ latency histograms, token counters
//	            ──OnFinish/OnReclaim────────────▶ request counters, reclaim histogram
//
// The gauges are the snapshot the loop publishes after each step, never a
// read of engine state, so a scrape cannot block or race the loop.
//
// Units: every duration is in seconds, every size in blocks or tokens, the
// KV usage ratio in [0, 1]. Bucket boundaries are documented beside each
// histogram in buckets.go.
//
// Concurrency: every method is safe for concurrent use (the Prometheus
// collectors are); the observer methods run on the engine loop's goroutine
// and do no I/O and take no lock the HTTP side can hold for long.
package metrics
