package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Relayed frames a Messages stream whose text an upstream generates (relay
// mode, server/relay) in the same events as a local stream; the relay's
// stream writer (stream.PumpText) stands where Pump stands. It holds the
// message across connections: a resumed stream ends with the same message.
// It is the local framer (emitter: Attach, Start, End, Body) with the
// upstream's ids, signatures and redacted thinking (relayEmitter). Its
// input tokens are the upstream's and arrive with the end (message_delta's
// usage, which the SDKs read into the final message). Anthropic counts
// thinking in output_tokens, with no reasoning count of its own: the
// upstream's, if any, has no place here.
type Relayed struct{ relayEmitter }

// ParseRelayed validates a Messages request as a local one is validated (one
// rule for both modes) and returns it with the framer of its relayed
// response; the relay adds the upstream (Parsed.Source).
func ParseRelayed(body []byte) (*httpedge.Parsed, error) {
	g, err := parse(body, false)
	if err != nil {
		return nil, err
	}
	// The reply may open with a thinking block (whether the upstream's
	// model reasons is known only from its stream) or, with tools, a
	// tool_use: the text block waits for text, as a local stream's does
	// for a model that reasons.
	return &httpedge.Parsed{Gen: g, Frame: func(h httpedge.Head) httpedge.Framer {
		return &Relayed{relayEmitter{&emitter{m: &message{ID: h.ID, Model: h.Model, lazy: true}}}}
	}}, nil
}

// ParseCount validates a count_tokens request as a local one is validated
// (relay mode forwards it to the upstream's count_tokens).
func ParseCount(body []byte) (*stream.GenRequest, error) { return parse(body, true) }

// startEvents writes a stream's first events, local or relayed:
// message_start, the text block's start (unless the message is lazy) and a
// ping.
func startEvents(em *emitter, m *message) {
	em.event("message_start", map[string]any{"type": "message_start", "message": m.body()})
	if !m.lazy {
		em.openBlock(&block{typ: "text"})
	}
	_ = em.KeepAlive()
}

// relayEmitter is the local emitter but for the calls' ids and the
// thinking's signature: the upstream's toolu_ ids are kept as it gave them,
// since the client's tool_result answers one of them to that upstream, and
// so is its signature of a thinking block, since the client sends the block
// back to that upstream, which checks it (Anthropic's own does). A thinking
// block the upstream did not sign (none does that speaks Messages, but the
// block must have one) gets this server's seal, as a local one does.
type relayEmitter struct{ *emitter }

// Reasoning implements stream.ReasoningEmitter: the upstream's thinking.
// An empty text opens the block: one whose display is omitted has none.
func (e relayEmitter) Reasoning(text string) error {
	if text == "" && e.last("thinking") == nil {
		e.openBlock(&block{typ: "thinking"})
		return e.err()
	}
	return e.emitter.Reasoning(text)
}

// Redacted passes on the upstream's redacted_thinking block as it came:
// its data is the upstream's own encryption of the thinking, which the
// client must send back unchanged. (A local model's thinking is never
// redacted.)
func (e relayEmitter) Redacted(data string) error {
	e.openBlock(&block{typ: "redacted_thinking", text: []byte(data)})
	return e.err()
}

// Signed sets the upstream's signature on the thinking block, written by
// its signature_delta when the block closes.
func (e relayEmitter) Signed(sig string) error {
	b := e.last("thinking")
	if b == nil {
		b = &block{typ: "thinking"}
		e.openBlock(b)
	}
	b.sig = sig
	return e.err()
}

// ToolCall implements stream.ToolEmitter.
func (e relayEmitter) ToolCall(d stream.ToolCallDelta) error {
	if d.ID != "" {
		e.openBlock(&block{typ: "tool_use", id: d.ID, name: d.Name})
		d.ID = "" // opened: the local emitter only appends the input
	}
	return e.emitter.ToolCall(d)
}

// endEvents writes a finished stream's last events: the open block's stop,
// message_delta with the stop reason and usage, message_stop.
func endEvents(em *emitter, m *message) {
	em.closeOpen()
	delta := map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": m.StopSequence},
		"usage": m.usage()}
	if m.edits != nil {
		delta["context_management"] = contextManagement(m.edits)
	}
	em.event("message_delta", delta)
	em.event("message_stop", map[string]string{"type": "message_stop"})
}

// WriteUpstreamError sends an upstream's refusal of the client's request
// (relay mode) as it answered it, in Anthropic's shape; only valid before
// the first byte. An upstream without the endpoint is a not_found_error.
func WriteUpstreamError(w http.ResponseWriter, status int, typ, code, message string) {
	switch {
	case code == "upstream_endpoint_missing" || typ == "" || typ == "upstream_error":
		typ = anthropicType(status)
	case typ == "invalid_request_error" && status == http.StatusNotFound:
		typ = "not_found_error"
	}
	writeJSONStatus(w, status, map[string]any{"type": "error",
		"error": map[string]string{"type": typ, "message": message, "code": code}})
}

// anthropicType is Anthropic's error type for an HTTP status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	return "api_error"
}

func writeJSONStatus(w http.ResponseWriter, status int, v map[string]any) {
	body, _ := json.Marshal(v) // maps of strings always marshal
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
