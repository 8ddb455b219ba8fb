// Package anthropic serves the Anthropic Messages API (POST /v1/messages and
// /v1/messages/count_tokens) over the stream core, for Claude Code and the
// Anthropic SDKs. It is a thin adapter, an API of the HTTP driver
// (httpedge.Env.Serve): a parser (the request becomes a stream.GenRequest)
// and a framer (emitter); the driver and the stream core do the work every
// transport shares (template, limits, seed, stop-string hold-back,
// keep-alive, stall timeout, disconnect → abort, resume). This package only
// frames the result in Anthropic's events and errors in Anthropic's shape,
// whose types come from the one error table (stream.Class.Anthropic).
//
// A stream is:
//
//	event: message_start         {"type":"message_start","message":{…,"content":[],"usage":{…}}}
//	event: content_block_start   {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
//	event: ping                  also the keep-alive, while nothing else is sent
//	event: content_block_delta   {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"…"}}  …
//	event: content_block_stop
//	event: message_delta         {"type":"message_delta","delta":{"stop_reason":…,"stop_sequence":…},"usage":{…}}
//	event: message_stop
//
// With tools offered (tools.go) the blocks follow the reply: a text block
// opens when text comes, and each call is a tool_use block
// (content_block_start with the id and name, input_json_delta deltas,
// content_block_stop), the message ending with stop_reason tool_use.
//
// An error after the first byte is an "error" event, and the stream ends.
package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Handler serves the Messages API routes.
type Handler struct {
	env *httpedge.Env
	api *httpedge.API
}

// New returns the handler over the server's facilities: the Messages API is
// its parser and its framer (emitter); the driver (httpedge.Env.Serve) does
// the rest.
func New(env *httpedge.Env) *Handler {
	return &Handler{env: env, api: &httpedge.API{Name: "messages", Prefix: "msg_", Parse: parseMessages, Refuse: WriteError, IDHeader: "request-id"}}
}

// Messages serves POST /v1/messages.
// The same POST carrying X-Sluice-Stream-Id and Last-Event-ID resumes a
// stream.
func (h *Handler) Messages(w http.ResponseWriter, r *http.Request) { h.env.Serve(w, r, h.api) }

// parseMessages is the Messages API's parser: the request, and the framer
// of its message.
func parseMessages(_ *http.Request, body []byte) (*httpedge.Parsed, error) {
	g, leftOut, err := parseLeftOut(body, false)
	if err != nil {
		return nil, err
	}
	var display struct {
		Thinking *struct{ Display string } `json:"thinking"`
	}
	_ = json.Unmarshal(body, &display) // parse read it
	omit := display.Thinking != nil && display.Thinking.Display == "omitted"
	return &httpedge.Parsed{Gen: g, Frame: func(hd httpedge.Head) httpedge.Framer {
		// A model that reasons opens with a thinking block: the text block
		// waits for text.
		lazy := hd.Lazy || hd.Backend.Reasoning.On()
		return &emitter{m: &message{ID: hd.ID, Model: hd.Model, InputTokens: hd.PromptTokens(), lazy: lazy, edits: g.ContextEdits, omitThinking: omit, warnings: leftOut}}
	}}, nil
}

// CountTokens serves POST /v1/messages/count_tokens: the prompt's length
// after the chat template, as the model would be given it.
func (h *Handler) CountTokens(w http.ResponseWriter, r *http.Request) {
	b, p, err := h.env.Read(w, r, func(_ *http.Request, body []byte) (*httpedge.Parsed, error) {
		g, err := parse(body, true)
		return &httpedge.Parsed{Gen: g}, err
	})
	if err != nil {
		WriteError(w, err)
		return
	}
	ids, err := stream.TokenizePrompt(b, p.Gen, false) // the template writes any BOS itself
	if err != nil {
		WriteError(w, err)
		return
	}
	writeJSON(w, map[string]int{"input_tokens": len(ids)})
}

// message is the Messages API's response object, built up as the stream goes.
type message struct {
	ID, Model                 string
	InputTokens, OutputTokens int
	// CachedTokens of the prompt came from the prefix cache: reported as
	// cache_read_input_tokens, and not in input_tokens (Anthropic's sum:
	// the prompt is input + cache_read + cache_creation).
	CachedTokens int
	// edits are the request's context_management (nil: none asked).
	edits *stream.ContextEdits
	// omitThinking: thinking.display "omitted", a thinking block's text is
	// left out (its signature still seals it).
	omitThinking bool
	// warnings say what of the request was left out (server tools): the
	// message's sluice_warnings, as on the Responses API.
	warnings                 []string
	StopReason, StopSequence *string

	blocks []*block // the content so far, in order
	open   bool     // the last block is still being written
	// lazy: the reply may start with a tool_use (tools offered), so the
	// text block waits for text instead of opening with the stream.
	lazy bool
}

// block is one content block: text, or a tool_use whose input is the
// call's arguments as the model wrote them.
type block struct {
	typ      string // "text", "thinking" or "tool_use"
	text     []byte // text, thinking; tool_use: the input JSON so far
	id, name string // tool_use
	sig      string // thinking: the sealed text, once the block is done
	omit     bool   // thinking: the text is not shown
}

// signature is a thinking block's: its text sealed (httpedge.Seal), made
// once, so a stream's signature_delta and the message agree.
func (b *block) signature() string {
	if b.sig == "" {
		b.sig = httpedge.Seal(string(b.text))
	}
	return b.sig
}

// json is the block in the message's content.
func (b *block) json() map[string]any {
	switch b.typ {
	case "text":
		return map[string]any{"type": "text", "text": string(b.text)}
	case "thinking":
		shown := string(b.text)
		if b.omit {
			shown = ""
		}
		return map[string]any{"type": "thinking", "thinking": shown, "signature": b.signature()}
	case "redacted_thinking": // relayed only: text is the upstream's data
		return map[string]any{"type": "redacted_thinking", "data": string(b.text)}
	}
	input := json.RawMessage(b.text)
	if !json.Valid(input) {
		// A call whose JSON broke off (the parse keeps a call once it is
		// named) has no input to show but the empty one.
		input = json.RawMessage("{}")
	}
	return map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": input}
}

// complete records how a generation ended, local or an upstream's (relay
// mode): its token counts (the whole prompt and its cached part, which
// never exceeds it, so that usage() reports input_tokens without the cache
// reads, Anthropic's sum, never below 0) and its stop reason: end_turn
// (the model's end of turn), tool_use (it called a tool), stop_sequence
// (naming it), max_tokens, or a reason of an upstream's own that has no
// finish of the core's ("refusal", "pause_turn") as the upstream gave it.
func (m *message) complete(finish string, n stream.Ending) {
	m.InputTokens, m.OutputTokens, m.CachedTokens = n.PromptTokens, n.CompletionTokens, min(n.CachedTokens, n.PromptTokens)
	stopSequence := n.StopSequence
	reason := finish
	switch {
	case finish == "length":
		reason = "max_tokens"
	case finish == "tool_calls":
		reason = "tool_use"
	case stopSequence != "":
		reason = "stop_sequence"
		m.StopSequence = &stopSequence
	case finish == "stop" || finish == "":
		reason = "end_turn"
	}
	m.StopReason = &reason
}

func (m *message) usage() map[string]int {
	return map[string]int{"input_tokens": m.InputTokens - m.CachedTokens, "output_tokens": m.OutputTokens,
		"cache_read_input_tokens": m.CachedTokens, "cache_creation_input_tokens": 0}
}

// body is the message object: the non-streaming response, or (with no
// stop reason yet) message_start's message, whose content is empty.
func (m *message) body() map[string]any {
	content := []map[string]any{}
	if m.StopReason != nil {
		for _, b := range m.blocks {
			content = append(content, b.json())
		}
	}
	body := map[string]any{
		"id": m.ID, "type": "message", "role": "assistant", "model": m.Model,
		"content": content, "stop_reason": m.StopReason, "stop_sequence": m.StopSequence,
		"usage": m.usage(),
	}
	if m.edits != nil {
		body["context_management"] = contextManagement(m.edits)
	}
	if len(m.warnings) > 0 {
		body["sluice_warnings"] = m.warnings
	}
	return body
}

// emitter is the Messages API's framer (httpedge.Framer): it builds the
// message's content blocks and frames them as events. Text goes to the
// text block open at the end (text_delta), opening one after a tool_use;
// a call is a tool_use block of its own (input_json_delta); a block stops
// when the next one starts or the message ends. The keep-alive is
// Anthropic's ping event. With no sse (a whole response) it only builds the
// content. The state is the message's, so the emitter of each connection
// (and the relay's) continues it.
type emitter struct {
	sse     *httpedge.SSE
	m       *message
	payload []byte
}

// Attach implements httpedge.Framer.
func (e *emitter) Attach(sse *httpedge.SSE) { e.sse = sse }

// Start implements httpedge.Framer: message_start, the text block's start
// (unless lazy) and a ping.
func (e *emitter) Start() { startEvents(e, e.m) }

// End implements httpedge.Framer: the error event, or the open block's
// stop, message_delta and message_stop.
func (e *emitter) End(end stream.Ending) {
	if end.Err != nil {
		if e.sse != nil {
			e.sse.Event("error", errorBody(end.Err))
		}
		return
	}
	e.finish() // an empty reply is an empty text block
	e.m.complete(end.Finish, end)
	endEvents(e, e.m)
}

// Body implements httpedge.Framer: the message object.
func (e *emitter) Body() []byte {
	raw, _ := json.Marshal(e.m.body()) // maps of strings and numbers always marshal
	return raw
}

func (e *emitter) event(name string, v any) {
	if e.sse == nil {
		return
	}
	body, _ := json.Marshal(v) // maps of strings and numbers always marshal
	e.sse.Event(name, body)
}

func (e *emitter) err() error {
	if e.sse == nil {
		return nil
	}
	return e.sse.Err()
}

// openBlock stops the open block and starts b.
func (e *emitter) openBlock(b *block) {
	e.closeOpen()
	m := e.m
	m.blocks, m.open = append(m.blocks, b), true
	start := map[string]any{"type": "text", "text": ""}
	switch b.typ {
	case "tool_use":
		start = map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}
	case "thinking":
		start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case "redacted_thinking":
		start = b.json()
	}
	e.event("content_block_start", map[string]any{"type": "content_block_start", "index": len(m.blocks) - 1,
		"content_block": start})
}

func (e *emitter) closeOpen() {
	if b := e.last("thinking"); b != nil {
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": len(e.m.blocks) - 1,
			"delta": map[string]string{"type": "signature_delta", "signature": b.signature()}})
	}
	if e.m.open {
		e.m.open = false
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": len(e.m.blocks) - 1})
	}
}

// last is the open block when it has type typ.
func (e *emitter) last(typ string) *block {
	if n := len(e.m.blocks); e.m.open && e.m.blocks[n-1].typ == typ {
		return e.m.blocks[n-1]
	}
	return nil
}

// finish makes sure the content has a block: an empty reply is an empty
// text block.
func (e *emitter) finish() {
	if len(e.m.blocks) == 0 {
		e.openBlock(&block{typ: "text"})
	}
}

func (e *emitter) Text(text string, _ []int32) error {
	if text == "" {
		return e.err()
	}
	b := e.last("text")
	if b == nil {
		b = &block{typ: "text"}
		e.openBlock(b)
	}
	b.text = append(b.text, text...)
	if e.sse == nil {
		return nil
	}
	// Built by hand: this is the one event per token.
	e.payload = fmt.Appendf(e.payload[:0], `{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":`, len(e.m.blocks)-1)
	e.payload = appendJSONString(e.payload, text)
	e.payload = append(e.payload, `}}`...)
	e.sse.Event("content_block_delta", e.payload)
	return e.sse.Err()
}

// Reasoning implements stream.ReasoningEmitter: the model's reasoning is a
// thinking block (thinking_delta events), closed by its signature_delta;
// with display omitted the deltas are left out and only the signature goes.
func (e *emitter) Reasoning(text string) error {
	if text == "" {
		return e.err()
	}
	b := e.last("thinking")
	if b == nil {
		b = &block{typ: "thinking", omit: e.m.omitThinking}
		e.openBlock(b)
	}
	b.text = append(b.text, text...)
	if !b.omit {
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": len(e.m.blocks) - 1,
			"delta": map[string]string{"type": "thinking_delta", "thinking": text}})
	}
	return e.err()
}

// ToolCall implements stream.ToolEmitter: a call's first delta (its id and
// name) starts a tool_use block, the rest are input_json_delta fragments
// of its input. The id is Anthropic's kind, toolu_….
func (e *emitter) ToolCall(d stream.ToolCallDelta) error {
	if d.ID != "" {
		e.openBlock(&block{typ: "tool_use", id: "toolu_" + strings.TrimPrefix(d.ID, "call_"), name: d.Name})
	}
	b := e.last("tool_use")
	if b == nil || d.Arguments == "" {
		return e.err() // ToolStream starts every call before its arguments
	}
	b.text = append(b.text, d.Arguments...)
	e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": len(e.m.blocks) - 1,
		"delta": map[string]string{"type": "input_json_delta", "partial_json": d.Arguments}})
	return e.err()
}

func (e *emitter) KeepAlive() error {
	if e.sse == nil {
		return nil
	}
	e.sse.Event("ping", []byte(`{"type":"ping"}`))
	return e.sse.Err()
}

func (e *emitter) Flush() error {
	if e.sse == nil {
		return nil
	}
	return e.sse.Flush()
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
