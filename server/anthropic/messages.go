// Package anthropic serves the Anthropic Messages API (POST /v1/messages and
// /v1/messages/count_tokens) over the stream core, for Claude Code and the
// Anthropic SDKs. It is a thin adapter: the request becomes a
// stream.GenRequest, and stream.Prepare, Submit and Pump do the work every
// transport shares (template, limits, seed, stop-string hold-back,
// keep-alive, stall timeout, disconnect → abort); this package only frames
// the result in Anthropic's events and errors in Anthropic's shape, whose
// types come from the one error table (stream.Class.Anthropic).
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
// An error after the first byte is an "error" event, and the stream ends.
package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Handler serves the Messages API routes.
type Handler struct{ env *httpedge.Env }

// New returns the handler over the server's facilities.
func New(env *httpedge.Env) *Handler { return &Handler{env: env} }

// Messages serves POST /v1/messages.
// The same POST carrying X-Sluice-Stream-Id and Last-Event-ID resumes a
// stream (resume.go).
func (h *Handler) Messages(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(httpedge.StreamIDHeader); id != "" && r.Header.Get(httpedge.LastEventIDHeader) != "" {
		h.resume(w, r, id)
		return
	}
	b, g, err := h.request(w, r, false)
	if err != nil {
		WriteError(w, err)
		return
	}
	req, err := stream.Prepare(b, g)
	if err != nil {
		WriteError(w, err)
		return
	}
	req.ID = stream.NewID("msg_")
	m := &message{ID: req.ID, Model: h.env.ModelName(g.Model), InputTokens: len(req.Prompt)}
	ts := stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)
	if g.Stream {
		h.stream(w, r, b, &streamState{Retained: h.env.NewRetainedFor(req.ID), g: g, req: req, ts: ts, m: m})
		return
	}
	gen, err := stream.Submit(r.Context(), b.Engine, req, h.env.AbortOnDisconnect)
	if err != nil {
		WriteError(w, err)
		return
	}
	var c collector
	out := stream.Pump(gen, ts, &c, h.env.PumpConfig(false), h.env.Drain)
	switch {
	case out.ClientGone:
		return
	case out.Err != nil:
		WriteError(w, out.Err)
		return
	}
	m.end(out, ts)
	writeJSON(w, m.body(string(c.text)))
}

// CountTokens serves POST /v1/messages/count_tokens: the prompt's length
// after the chat template, as the model would be given it.
func (h *Handler) CountTokens(w http.ResponseWriter, r *http.Request) {
	b, g, err := h.request(w, r, true)
	if err != nil {
		WriteError(w, err)
		return
	}
	text, err := b.Tokenizer.ChatPrompt(g.Messages)
	if err != nil {
		WriteError(w, stream.InvalidParam("messages", "applying the chat template: %v", err))
		return
	}
	ids, err := b.Tokenizer.Encode(text, false) // the template writes any BOS itself
	if err != nil {
		WriteError(w, stream.InvalidParam("messages", "tokenizing: %v", err))
		return
	}
	writeJSON(w, map[string]int{"input_tokens": len(ids)})
}

func (h *Handler) request(w http.ResponseWriter, r *http.Request, count bool) (*stream.Backend, *stream.GenRequest, error) {
	b, err := h.env.LoadBackend()
	if err != nil {
		return nil, nil, err
	}
	body, err := httpedge.ReadBody(w, r, h.env.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	g, err := parse(body, count)
	if err != nil {
		return nil, nil, err
	}
	if err := h.env.CheckModel(g.Model); err != nil {
		return nil, nil, err
	}
	return b, g, nil
}

// stream serves a streaming response. message_start, the text block's start
// and a ping go out at once: the client knows it was accepted. The stream is
// retained for a reconnect (resume.go) when the server keeps streams.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, b *stream.Backend, st *streamState) {
	ctx, release, err := st.Acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	gen, err := stream.Submit(ctx, b.Engine, st.req, h.env.AbortOnDisconnect)
	if err != nil {
		WriteError(w, err)
		return
	}
	if h.env.Streams != nil {
		h.env.Streams.Add(st)
	}
	st.em.sse = h.env.OpenSSE(gen.Context(), w, st.Retained, map[string]string{"request-id": st.m.ID})
	em := &st.em
	startEvents(em, st.m)
	_ = em.sse.Flush() // a failure shows in the emitter's next call, which Pump sees
	h.pump(st, gen)
}

// pump drains gen into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (h *Handler) pump(st *streamState, gen *stream.Generation) {
	out := stream.Pump(gen, st.ts, &st.em, h.env.PumpConfig(true), h.env.Drain)
	if out.CutShort {
		return
	}
	h.end(st, out)
}

// end writes the stream's last events (recorded for a replay even when the
// client is gone): the error event, or the block's stop, message_delta and
// message_stop.
func (h *Handler) end(st *streamState, out stream.Outcome) {
	em, m := &st.em, st.m
	st.done = true
	if out.Err != nil {
		em.sse.Event("error", errorBody(out.Err))
		_ = em.sse.Flush()
		return
	}
	m.end(out, st.ts)
	endEvents(em, m)
	_ = em.sse.Flush()
}

// message is the Messages API's response object, built up as the stream goes.
type message struct {
	ID, Model                 string
	InputTokens, OutputTokens int
	StopReason, StopSequence  *string
}

// end records how the generation ended: end_turn (the model's end of
// turn), stop_sequence (naming it) or max_tokens.
func (m *message) end(out stream.Outcome, ts *stream.TextStream) {
	m.OutputTokens = len(ts.IDs())
	reason := "end_turn"
	switch {
	case out.Finish == "length":
		reason = "max_tokens"
	case ts.Matched() != "":
		reason = "stop_sequence"
		s := ts.Matched()
		m.StopSequence = &s
	}
	m.StopReason = &reason
}

func (m *message) usage() map[string]int {
	return map[string]int{"input_tokens": m.InputTokens, "output_tokens": m.OutputTokens}
}

// body is the message object: the non-streaming response, or (with no text
// and no stop reason yet) message_start's message.
func (m *message) body(text string) map[string]any {
	content := []map[string]string{}
	if m.StopReason != nil {
		content = append(content, map[string]string{"type": "text", "text": text})
	}
	return map[string]any{
		"id": m.ID, "type": "message", "role": "assistant", "model": m.Model,
		"content": content, "stop_reason": m.StopReason, "stop_sequence": m.StopSequence,
		"usage": m.usage(),
	}
}

// emitter is the stream.Emitter of a Messages stream: text becomes
// text_delta events of block 0, the keep-alive is Anthropic's ping event.
type emitter struct {
	sse     *httpedge.SSE
	payload []byte
}

func (e *emitter) event(name string, v any) {
	body, _ := json.Marshal(v) // maps of strings and numbers always marshal
	e.sse.Event(name, body)
}

// deltaPrefix and deltaSuffix frame a text_delta around its JSON string:
// the one event per token is built without reflection.
const (
	deltaPrefix = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`
	deltaSuffix = `}}`
)

func (e *emitter) Text(text string, _ []int32) error {
	if text != "" {
		e.payload = append(e.payload[:0], deltaPrefix...)
		e.payload = appendJSONString(e.payload, text)
		e.payload = append(e.payload, deltaSuffix...)
		e.sse.Event("content_block_delta", e.payload)
	}
	return e.sse.Err()
}

func (e *emitter) KeepAlive() error {
	e.sse.Event("ping", []byte(`{"type":"ping"}`))
	return e.sse.Err()
}

func (e *emitter) Flush() error { return e.sse.Flush() }

// collector is the Emitter of a non-streaming response.
type collector struct{ text []byte }

func (c *collector) Text(s string, _ []int32) error { c.text = append(c.text, s...); return nil }
func (c *collector) KeepAlive() error               { return nil }
func (c *collector) Flush() error                   { return nil }

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
