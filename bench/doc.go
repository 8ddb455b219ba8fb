// Package bench owns Sluice's load generator: a streaming OpenAI-compatible
// client that times every request (TTFT, each inter-token gap, TPOT,
// end-to-end), the runners that drive it (fixed concurrency or Poisson
// arrivals, bounded in count and time), the arithmetic that turns per-request
// results into percentiles, throughput and goodput, a Prometheus scraper that
// samples a server's /metrics while a run goes on, and the built-in scenarios
// (sweep, abandon, streams-1000).
//
// It speaks only HTTP to the server under test, so it measures any
// OpenAI-compatible server (Sluice, llama.cpp's llama-server, vLLM) the same
// way, and imports nothing from the server side of this module.
//
// Timing: every timestamp comes from Client.Now (time.Now by default), read
// once when a request is sent and once per SSE data event received; tests
// inject a scripted clock to check the arithmetic exactly.
//
// Units: durations are time.Duration in Go and seconds (float) in JSON;
// throughputs are per second of wall time of the run.
//
// Concurrency: a Client is safe for concurrent use if its Now is. Runners
// collect results on one goroutine; the progress counters are atomic.
package bench
