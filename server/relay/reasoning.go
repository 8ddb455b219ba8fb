package relay

import (
	"encoding/json"

	"github.com/sluicehq/sluice/server/stream"
)

// Reasoning through the relay: an upstream's reasoning (chat's
// reasoning_content or reasoning deltas, a Messages thinking block and its
// signature, a Responses reasoning item and its encrypted_content) is read
// beside the text and reaches the client's edge as that API's reasoning.
//
// It travels in stream.TextEvent.Reasoning, which stream.PumpText writes in
// the upstream's order against the text and past the stop strings.

// reasoningDelta is an event carrying reasoning text (raw: a JSON string,
// joined across events as text is).
func (p *parser) reasoningDelta(raw json.RawMessage, data []byte) (ev stream.TextEvent, send, done bool, err error) {
	b, ok := decodeString(raw)
	if !ok {
		return p.malformed("the reasoning is not a string: %.120q", data)
	}
	text := p.rjoiner.Add(b)
	p.timing(text != "") // reasoning is output: it times TTFT and ITL as text does
	return p.reasoningEvent(stream.ReasoningText, text), true, false, nil
}

// reasoningEvent is an event of one reasoning delta.
func (p *parser) reasoningEvent(kind stream.ReasoningKind, s string) stream.TextEvent {
	return stream.TextEvent{Seq: p.seq, Reasoning: []stream.ReasoningDelta{{Kind: kind, Text: s}}}
}

// signature is an event of the upstream's seal.
func (p *parser) signature(sig string) (ev stream.TextEvent, send, done bool, err error) {
	if sig == "" {
		return ev, true, false, nil
	}
	return p.reasoningEvent(stream.ReasoningSeal, sig), true, false, nil
}

// ReasoningTokens are the upstream's reasoning tokens (0 when it reports
// none: an Anthropic upstream counts thinking in output_tokens only).
func (u *Usage) ReasoningTokens() int {
	if u == nil || u.CompletionDetails == nil {
		return 0
	}
	return u.CompletionDetails.ReasoningTokens
}

func (u *Usage) reasoning(n int) {
	if n > 0 {
		u.CompletionDetails = &completionDetails{n}
	}
}

type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}
