package stream

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Engine is what the stream core needs from *engine.Engine (the loader
// adapts it: *engine.Engine returns a concrete *Sequence). Submit applies
// backpressure at the edge: ErrQueueFull, ErrClosed, ErrPromptTooLong and
// ErrInvalidRequest come back before any token. The sequence ends with
// CauseClientDisconnect when ctx is done: the engine is the one owner of
// that cancellation.
type Engine interface {
	Submit(ctx context.Context, req engine.Request) (Sequence, error)
	// MaxSequenceLen is the longest prompt + output the engine accepts: the
	// model's context or the KV pool's capacity, whichever is smaller.
	MaxSequenceLen() int
}

// Sequence is one generation's output as the engine delivers it. Tokens is
// closed exactly once by the engine; Result is valid after that. Admitted is
// closed when the engine first schedules the sequence (never, if it ends
// while queued); it must not be nil. Progress receives a signal (coalesced,
// never blocking the engine) whenever a step computed some of the
// sequence's prompt; nil means the engine reports none. Abort asks the
// engine to end the sequence and free its blocks at the next step
// boundary; it may be called at any time, more than once.
type Sequence interface {
	Tokens() <-chan engine.Token
	Admitted() <-chan struct{}
	Progress() <-chan struct{}
	Result() engine.Result
	Abort(cause engine.AbortCause)
}

// Emitter frames a stream for one transport (SSE, gRPC). Text and KeepAlive
// buffer; Flush sends. Text carries the ids of every token consumed since
// the previous Text: ids can run ahead of text (a held-back stop-string
// prefix, a partial UTF-8 character) and never lag it; text may be empty
// when only ids are left at the end. The ids slice is valid only during the
// call. After a send fails the Emitter keeps accepting calls (a resumable
// stream still records what the client missed) and every Flush returns the
// error.
type Emitter interface {
	Text(text string, ids []int32) error
	KeepAlive() error
	Flush() error
}

// LogprobEmitter is an Emitter that also frames the tokens' logprobs
// (requests that ask for them). Found by type assertion. Pump calls
// Logprobs just before each Text with one entry per id that Text carries,
// in order; the slice is valid only during the call.
type LogprobEmitter interface {
	Logprobs(lps []engine.Logprob)
}

// TokenByter is a Tokenizer that gives one token's bytes (a piece of a UTF-8
// character, possibly), which logprobs report per token. Found by type
// assertion.
type TokenByter interface {
	TokenBytes(id int32) []byte
}

// TokenText is a token's bytes as logprobs show them: a piece of a
// character becomes U+FFFD (as vLLM shows it); the bytes themselves go
// beside it so a client can join split characters.
func TokenText(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// Detokenizer turns token ids into text incrementally. Add returns only text
// that is complete UTF-8 and that the merge of later tokens cannot change;
// Flush returns whatever is left at the end. *tokenizer.Decoder satisfies it.
type Detokenizer interface {
	Add(id int32) string
	Flush() string
}

// Tokenizer is what the stream core needs from the model's tokenizer.
type Tokenizer interface {
	// Encode tokenizes text; addSpecial adds the model's BOS (and the like).
	Encode(text string, addSpecial bool) ([]int32, error)
	// ChatPrompt renders messages through the model's chat template, with
	// the generation prompt for the assistant's turn appended.
	ChatPrompt(msgs []ChatMessage) (string, error)
	// NewDetokenizer starts an incremental decoder for one stream.
	NewDetokenizer() Detokenizer
}

// PromptDetokenizer is a Tokenizer that can start a decoder after the
// prompt's last tokens, so the first generated token decodes as it would
// inside the text (a SentencePiece "▁Paris" after a prompt is " Paris", at
// the start of a text "Paris"). Found by type assertion.
type PromptDetokenizer interface {
	NewDetokenizerAfter(prompt []int32) Detokenizer
}

// NewDetokenizerFor starts the decoder of a stream that follows prompt.
// Every transport decodes through it, so they all render the same text.
func NewDetokenizerFor(tok Tokenizer, prompt []int32) Detokenizer {
	if pd, ok := tok.(PromptDetokenizer); ok {
		return pd.NewDetokenizerAfter(prompt)
	}
	return tok.NewDetokenizer()
}

// Backend is a loaded model as the transports drive it.
type Backend struct {
	Engine     Engine
	Tokenizer  Tokenizer
	ContextLen int      // the model's context: what model listings report
	Grammars   Grammars // nil: a request for structured outputs is refused (structured.go)
	// Force is a test option (sluice serve --force-tool-call, forcetool.go); nil: off.
	Force *ForcedCall
	// Reasoning is the model's reasoning markup (reasonstream.go); the
	// zero value: a model that does not reason.
	Reasoning ReasoningMarkup

	// detached: the engine is not shown a client's leaving (the abort
	// policy, WithAbortOnDisconnect). Set once, where a server attaches the
	// backend, so no call site carries it.
	detached bool
}

// WithAbortOnDisconnect is b under an abort policy: with abort false
// (--abort-on-disconnect=false, the benchmark's naive mode) every
// generation b starts runs on when its client leaves; Pump still sees the
// client go. b itself is returned when the policy is already abort's.
func (b *Backend) WithAbortOnDisconnect(abort bool) *Backend {
	if b.detached == !abort {
		return b
	}
	c := *b
	c.detached = !abort
	return &c
}

// Submit starts req on b's engine under b's abort policy (see Submit).
func (b *Backend) Submit(ctx context.Context, req engine.Request) (*Generation, error) {
	return Submit(ctx, b.Engine, req, !b.detached)
}

// SubmitChoices is SubmitChoices on b's engine under b's abort policy.
func (b *Backend) SubmitChoices(ctx context.Context, reqs []engine.Request, n int) ([]*Generation, error) {
	return SubmitChoices(ctx, b.Engine, reqs, n, !b.detached)
}

// Limit is the longest prompt + output a request may ask for.
func (b *Backend) Limit() int { return min(b.ContextLen, b.Engine.MaxSequenceLen()) }
