// Package grpcserver owns Sluice's gRPC endpoint (sluice serve --grpc-addr):
// two services over one engine, plus the standard health service and server
// reflection (so grpcurl works without .proto files; behind the key when keys are set).
//
//   - sluice.v1.Inference: text, token-id or chat prompts; chunks carry the
//     text delta and the token ids; Tokenize, Detokenize, ListModels, Abort.
//   - vllm.grpc.engine.VllmEngine: wire-compatible with the service the
//     SGLang model gateway drives vLLM through (token ids in and out).
//
// Both are thin adapters over the stream core (server/stream), as the HTTP
// API is: a request becomes a stream.GenRequest under the same rules,
// stream.Prepare tokenizes it, and stream.Pump drains the sequence through
// a TextStream that decodes with the prompt as context (so the text equals
// HTTP's) into an Emitter that frames protobuf messages, each with its text
// and token ids. Cancellation takes the same path as an SSE disconnect: the
// call's context ends (client cancel, deadline, a lost connection found by
// keepalive, or an Abort RPC naming the request), and the engine, which
// watches it, frees the sequence's KV blocks before the next step.
//
// Unlike SSE writes, a gRPC Send has no per-write deadline: a client that
// stays connected but stops reading blocks its own stream at HTTP/2 flow
// control, and its sequence runs on into its buffer up to max_tokens (the
// engine never waits on it). Keepalive pings catch dead connections, not
// slow readers; clients should set a call deadline.
//
// Errors map to status codes through the stream core's one table. Before
// the first response message an error is only a status; after it, an
// in-band error message precedes the same status.
//
// Concurrency: one goroutine per call owns its TextStream and Emitter; the
// table of in-flight request ids is guarded by a mutex.
package grpcserver
