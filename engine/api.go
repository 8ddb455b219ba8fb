package engine

// This file is the engine's public contract, shared by the server (HTTP/SSE,
// gRPC), the CLI and the bench tool. Implementation lives beside it.

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// Sentinel errors returned by Submit. The server maps them to HTTP/gRPC codes in one table.
var (
	// ErrQueueFull: the waiting queue is at its limit (HTTP 429, gRPC ResourceExhausted).
	ErrQueueFull = errors.New("engine: queue full")
	// ErrTenantQueueFull: the waiting queue is full and the request's
	// Tenant holds its share of it while others wait; tenants under their
	// share are still accepted (Config.MaxQueue). It wraps ErrQueueFull.
	ErrTenantQueueFull = fmt.Errorf("%w: tenant at its share", ErrQueueFull)
	// ErrPromptTooLong: prompt + max tokens exceed the model context (HTTP 400, gRPC InvalidArgument).
	ErrPromptTooLong = errors.New("engine: prompt too long")
	// ErrInvalidRequest: a request field is out of range (HTTP 400).
	ErrInvalidRequest = errors.New("engine: invalid request")
	// ErrClosed: the engine is shutting down (HTTP 503, gRPC Unavailable).
	ErrClosed = errors.New("engine: closed")
)

// Model is what the engine runs: one forward step over a batch.
type Model interface {
	// Forward runs every row of b and returns the logits of b.LogitRows,
	// [len(b.LogitRows), VocabSize()] row-major. The returned slice is valid
	// until the next call.
	Forward(b *kernels.Batch) ([]float32, error)
	VocabSize() int
	// ContextLen is the longest sequence (prompt + output) the model accepts.
	ContextLen() int
}

// SamplingParams select how the next token is drawn from the logits.
// The zero value is greedy decoding.
type SamplingParams struct {
	Temperature       float32 // 0 = greedy
	TopK              int     // 0 = off
	TopP              float32 // 0 or 1 = off
	MinP              float32 // 0 = off
	RepetitionPenalty float32 // 0 or 1 = off (llama.cpp / HF style, divides positive logits)
	PresencePenalty   float32
	FrequencyPenalty  float32
	// PenaltyLastN bounds the window the penalties look at (0 = 64).
	PenaltyLastN int
	// Seed makes sampling reproducible: the same seed and prompt give the same output.
	// Nil picks a random seed.
	Seed *uint64
}

// Request is one generation.
type Request struct {
	ID         string  // caller's id, for logs and metrics
	Prompt     []int32 // token ids, BOS included if the model wants one
	MaxTokens  int     // output tokens; 0 = up to the context length
	Sampling   SamplingParams
	StopTokens []int32 // ids that end the sequence besides the model's end-of-generation ids
	Priority   int     // higher runs first; FCFS within a priority
	// Resume continues an interrupted generation: these tokens were already
	// produced (and delivered) and are re-admitted after the prompt; the sampler
	// state continues from them. They are not sent again.
	Resume []int32
	// Logprobs asks for each delivered token's Token.Logprob, with
	// TopLogprobs (0 to MaxTopLogprobs) alternatives (logprobs.go).
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs, when set, asks for the logprob of every prompt token
	// given the ones before it (vLLM's prompt_logprobs), which the engine
	// writes into it during the prefill (logprobs.go). Such a request never
	// reads the prefix cache: a cached position has no logits. A Resume
	// leaves it alone (its prompt was computed by the first submission).
	PromptLogprobs *PromptLogprobs
	// LogitBias adds to a token's logit before sampling (-100 to 100; -100
	// in effect bans it); MinTokens forbids the end-of-generation and stop
	// ids until that many tokens are out; IgnoreEOS keeps generating past an
	// end-of-generation token, which is delivered (controls.go).
	LogitBias map[int32]float32
	MinTokens int
	IgnoreEOS bool
	// Constraint, when set, restricts every sampled token (structured
	// outputs, forced tool calls); see Constraint. For a Resume it must
	// already have been advanced past the Resume tokens.
	Constraint Constraint
	// Tenant names who sent the request: an opaque, non-secret key id
	// ("" when the server runs without keys). The waiting queue is shared
	// fairly between tenants: none holds more than its share of MaxQueue
	// while others wait, and admission takes turns between them.
	Tenant string
	// CacheSalt partitions the prefix cache: it seeds the hash chain of the
	// prompt's blocks, so requests with different salts never share a
	// cached block and CachedTokens reveals nothing across salts; equal
	// salts share as before. "" is the unsalted cache.
	CacheSalt string
}

// FinishReason says why a sequence ended.
type FinishReason string

const (
	FinishStop   FinishReason = "stop"   // end-of-generation or a stop token id
	FinishLength FinishReason = "length" // MaxTokens or the context length reached
	FinishAbort  FinishReason = "abort"  // see AbortCause
	FinishError  FinishReason = "error"  // the step failed for this sequence
)

// AbortCause says who ended an aborted sequence.
type AbortCause string

const (
	CauseNone             AbortCause = ""
	CauseClientDisconnect AbortCause = "client_disconnect" // the request context was cancelled
	CauseStopString       AbortCause = "stop_string"       // the stream writer found a stop string
	CauseStall            AbortCause = "stall"             // the writer's stall timeout fired
	CauseShutdown         AbortCause = "shutdown"          // the engine is closing
)

// Token is one generated token as delivered to the reader.
type Token struct {
	ID    int32
	Index int // 0-based position in the output (Resume tokens count)
	// Logprob is set when the request asked for logprobs (logprobs.go).
	Logprob *Logprob
}

// Result is a finished sequence's outcome, readable once Tokens() is closed.
type Result struct {
	Finish           FinishReason
	Cause            AbortCause // set when Finish == FinishAbort
	Err              error      // set when Finish == FinishError
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int // prompt tokens served from the prefix cache
}
