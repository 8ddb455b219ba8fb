// Package relay forwards OpenAI-compatible requests (chat, completions,
// Responses) and Anthropic Messages requests to the same endpoint of an
// upstream server (another Sluice, vLLM, llama.cpp's server, a hosted API)
// and hands its stream back as text for the stream core (stream.TextSource),
// so the client gets Sluice's streaming guarantees whoever generates. Each
// API's stream is read in its own shape (shapes.go): its text deltas, its
// finish, its usage and the event that ends it properly.
//
//	client ─▶ server (the HTTP driver: parse, SSE, event log, resume) ─▶ Relay.Open ─HTTP/SSE─▶ upstream
//	        ◀─ PumpText (keep-alive, stop hold-back, stall, coalescing) ◀─ Stream (TextSource)
//
// The server drives a relayed response with the same loop as a local one
// (httpedge.Env.Serve): an upstream is the response's Source, as the engine
// is a local one's; Relay.Resume is its Continue.
//
// What it owns: choosing an upstream for a served model name; the bounded
// admission per upstream (ErrQueueFull past it); the upstream request, under
// the client's context, with explicit connect, first-byte and stall timeouts
// and retries only before the upstream answered (nothing has reached the
// client then, so a retry is idempotent); parsing the upstream's SSE into
// text, usage and its stream cursor; per-upstream metrics.
//
// Concurrency: a Relay is safe for concurrent use. Each Stream has one reader
// goroutine, which owns the upstream response body and ends when the body
// does: at [DONE], EOF, an error, or Close (which cancels the request, so the
// upstream sees its TCP connection close at once).
package relay
