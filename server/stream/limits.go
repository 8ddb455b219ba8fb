package stream

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// Limits every transport's requests meet, checked first thing in Prepare
// (after the transport parsed its wire shape, before any template or
// tokenizer work), so one rule holds for HTTP, gRPC and every API shape.
// Each is far above what a real request needs and low enough that a hostile
// one costs the server little: the chat template, the tool prompt and the
// tokenizer are linear in what they are given, and Prepare runs on the
// handler's goroutine before any admission control.
const (
	// MaxMessages bounds a chat's turns.
	MaxMessages = 2048
	// MaxTools bounds the tools one request offers (OpenAI's own limit).
	MaxTools = 128
	// MaxPromptBytes bounds the text given to the template and the
	// tokenizer: message contents, tool-call arguments and tool
	// definitions, or a completion's prompt. 1 MiB is ~250k tokens of
	// English, past the contexts Sluice serves: such a prompt would only be
	// refused after paying for its tokenization. It sits below the default
	// --max-body-bytes (4 MiB), so it is the limit a client meets.
	MaxPromptBytes = 1 << 20
	// MaxTokensCap bounds max_tokens and min_tokens before the context is
	// known: no context Sluice serves comes near it, and with it every sum
	// of token counts stays far from overflowing an int.
	MaxTokensCap = 1 << 24
	// MaxLogitBiasEntries bounds logit_bias, OpenAI's documented limit: the
	// engine applies every entry at every step.
	MaxLogitBiasEntries = 300
	// MaxTokenIDs bounds a list of token ids given as a prompt or to
	// /detokenize: longer than any context Sluice serves.
	MaxTokenIDs = 1 << 18
)

// checkLimits refuses a request over one of the limits above, or over the
// stop list's (MaxStops, MaxStopLength: the OpenAI transports check those
// in SetParams; this covers a transport that filled Stop itself), with a
// 400 naming the field.
func (g *GenRequest) checkLimits() error {
	param := "prompt"
	if g.Chat {
		param = "messages"
	}
	if n := len(g.Messages); n > MaxMessages {
		return InvalidParam("messages", "at most %d messages, got %d", MaxMessages, n)
	}
	if n := len(g.Tools.List); n > MaxTools {
		return InvalidParam("tools", "at most %d tools, got %d", MaxTools, n)
	}
	if n := len(g.Stop); n > MaxStops {
		return InvalidParam("stop", "at most %d stop strings, got %d", MaxStops, n)
	}
	for i, s := range g.Stop {
		if s == "" || len(s) > MaxStopLength {
			return InvalidParam("stop", "stop[%d] must be 1 to %d bytes long, got %d", i, MaxStopLength, len(s))
		}
	}
	if n := g.promptBytes(); n > MaxPromptBytes {
		return InvalidParam(param, "the prompt is %s; at most %s are tokenized", byteSize(n), byteSize(MaxPromptBytes))
	}
	return nil
}

// promptBytes is the size of the text Prepare would render and tokenize.
func (g *GenRequest) promptBytes() int {
	n := len(g.Prompt)
	for _, m := range g.Messages {
		n += len(m.Content) + len(m.Reasoning)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range g.Tools.List {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// RetainedBytes is what keeping g and the engine requests made from it for
// a resume holds in memory, about: its text and every token id.
func (g *GenRequest) RetainedBytes(reqs ...engine.Request) int {
	n := g.promptBytes() + 4*len(g.PromptIDs)
	for _, s := range g.Stop {
		n += len(s)
	}
	for _, r := range reqs {
		n += 4*(len(r.Prompt)+len(r.Resume)+len(r.StopTokens)) + 8*len(r.LogitBias)
	}
	return n
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
