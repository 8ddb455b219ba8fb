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
// It travels as tool-call deltas with the indexes below: stream.TextEvent
// has no field for it, and the tool-call path of stream.PumpText is the one
// that keeps the upstream's order against the text (held-back text goes out
// before it) and bypasses the stop strings, as reasoning must (a stop string
// ends the answer, not the thinking). The server's relay edges take these
// deltas off before any call reaches a framer.
const (
	// ReasoningIndex: Arguments is reasoning text. An empty one opens the
	// reasoning without text (a thinking block whose display is omitted).
	ReasoningIndex = -1
	// SignatureIndex: Arguments is the upstream's own seal of the reasoning
	// so far (a Messages signature, a Responses encrypted_content), which
	// the client gets unchanged so that it round-trips to that upstream.
	SignatureIndex = -2
	// RedactedIndex: Arguments is a Messages redacted_thinking block's
	// data, which the client must send back as it came.
	RedactedIndex = -3
)

// reasoningDelta is an event carrying reasoning text (raw: a JSON string,
// joined across events as text is).
func (p *parser) reasoningDelta(raw json.RawMessage, data []byte) (ev stream.TextEvent, send, done bool, err error) {
	b, ok := decodeString(raw)
	if !ok {
		return p.malformed("the reasoning is not a string: %.120q", data)
	}
	text := p.rjoiner.Add(b)
	p.timing(text != "") // reasoning is output: it times TTFT and ITL as text does
	return p.reasoningEvent(ReasoningIndex, text), true, false, nil
}

// reasoningEvent is an event of one reasoning delta.
func (p *parser) reasoningEvent(index int, s string) stream.TextEvent {
	return stream.TextEvent{Seq: p.seq, Tools: []stream.ToolCallDelta{{Index: index, Arguments: s}}}
}

// signature is an event of the upstream's seal.
func (p *parser) signature(sig string) (ev stream.TextEvent, send, done bool, err error) {
	if sig == "" {
		return ev, true, false, nil
	}
	return p.reasoningEvent(SignatureIndex, sig), true, false, nil
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
