// Package server owns Sluice's OpenAI-compatible HTTP API: request parsing and
// validation, the mapping from engine errors to HTTP status codes, and the
// stream writer that turns a sequence's tokens into Server-Sent Events.
//
// The stream writer is split in two so the gRPC endpoint can reuse it:
//
//	engine.Sequence ─▶ TextStream (incremental detokenize + stop-string hold-back)
//	                 ─▶ Pump (keep-alive, stall timeout, coalescing, disconnect → abort)
//	                 ─▶ Emitter (framing: SSE here, protobuf messages for gRPC)
//
// Handlers are thin adapters over the sequence stream: they submit a request,
// drain the sequence's token channel and never touch engine state. Everything
// they need from the engine comes through the Engine and Sequence interfaces.
//
// Resume: each streaming response's events are retained for a bounded window
// (ResumeStore). A client that lost its connection reconnects with the
// response id and Last-Event-ID and receives exactly the events it missed; a
// generation cut short by the disconnect (its KV blocks were freed at once) is
// continued through engine.Request.Resume with the same sampler seed, so the
// output equals the one an uninterrupted stream would have produced.
//
// Concurrency: one goroutine per request owns its TextStream and Emitter. A
// resumable stream's state is owned by whichever request holds its lease
// (streamState.acquire); the store itself is guarded by a mutex.
package server
