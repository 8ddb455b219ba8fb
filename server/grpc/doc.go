// Package grpcserver owns Sluice's gRPC endpoint (sluice serve --grpc-addr):
// two services over one engine, plus the standard health service and server
// reflection (so grpcurl works without .proto files).
//
//   - sluice.v1.Inference: text, token-id or chat prompts; chunks carry the
//     text delta and the token ids; Tokenize, Detokenize, ListModels, Abort.
//   - vllm.grpc.engine.VllmEngine: wire-compatible with the service the
//     SGLang model gateway drives vLLM through (token ids in and out).
//
// Both are thin adapters over the HTTP server's stream writer: a request
// becomes an engine.Request, and server.Pump drains the sequence through a
// server.TextStream (incremental detokenize, stop-string hold-back) into an
// Emitter that frames protobuf messages instead of SSE events. Cancellation
// therefore takes the same path as an SSE disconnect: the call's context is
// done (client cancel, deadline, lost connection detected by keepalive, or
// an Abort RPC naming the request) → Pump aborts the sequence → the engine
// frees its KV blocks before the next step.
//
// Unlike SSE writes, a gRPC Send has no per-write deadline: a client that
// stays connected but stops reading blocks its own stream at HTTP/2 flow
// control, and its sequence runs on into its buffer up to max_tokens (the
// engine never waits on it). Keepalive pings catch dead connections, not
// slow readers; clients should set a call deadline.
//
// Errors map to status codes in one table (errors.go). Before the first
// response message an error is only a status; after it, an in-band error
// message precedes the same status.
//
// Concurrency: one goroutine per call owns its TextStream and Emitter; the
// table of in-flight request ids is guarded by a mutex.
package grpcserver
