// Package metrics owns Sluice's Prometheus figures: the collectors behind
// GET /metrics, the engine observer that feeds them, and the optional vLLM
// compatibility view (--metrics-compat=vllm) that routers such as the
// Kubernetes Gateway API Inference Extension read, and llama-server's names
// (--metrics-compat=llamacpp, llamacpp.go) that its dashboards read.
//
// Sources:
//
//	engine loop ──Observer (OnFirstToken, OnToken, OnFinish, OnReclaim, OnStep)──▶ histograms, request counters
//	engine.Stats snapshot (published once per step) ──read at scrape──▶ gauges, token/preemption/prefix counters
//
// The gauges come from the snapshot the loop publishes, never from a read of
// engine state, so a scrape cannot block or race the loop.
//
// Units: every duration is in seconds, every size in blocks or tokens, the
// KV usage ratio in [0, 1]. Bucket boundaries are documented beside each
// histogram in buckets.go.
//
// Concurrency: scrapes may run concurrently with everything. The Observer
// methods must be called from one goroutine (the engine loop calls them so):
// they keep per-sequence token times in a map without a lock. They do no I/O.
// The llama.cpp figures the observer accumulates (prompt time, decode
// count, throughput windows) are shared with scrapes under one mutex.
package metrics
