// Package server owns Sluice's OpenAI-compatible HTTP API: the OpenAI JSON
// schema (parsed into a stream.GenRequest), SSE framing and the chunk JSON,
// OpenAI's error shape over the stream core's one error table, resume, and
// the http.Server with its shutdown. Everything that is not OpenAI's wire
// shape (validation rules, Prepare, Submit, Pump, TextStream) is the
// transport-neutral core in server/stream, which the gRPC endpoint and the
// other adapters share.
//
// Chat and completions are an API of the HTTP driver (internal/httpedge,
// Env.Serve), as Messages and Responses are: a parser (ParseRequest) and a
// framer (chatFramer: an sseWriter per connection, or a collector for a
// non-streaming response); the driver prepares, submits, pumps and ends.
// Several choices (n, a list of prompts) are framed here (choices.go). No
// handler touches engine state.
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
// (httpedge.Retained.Acquire); the store itself is guarded by a mutex.
package server
