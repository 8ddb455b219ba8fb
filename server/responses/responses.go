// Package responses serves the OpenAI Responses API (POST /v1/responses,
// GET and DELETE /v1/responses/{id}) over the stream core. It is a thin
// adapter like the chat one: the request becomes a stream.GenRequest, and
// stream.Prepare, Submit and Pump bring the guarantees every transport
// shares (stop-string and UTF-8 hold-back, keep-alive comments, the stall
// timeout, a disconnect aborting the sequence at once). This package frames
// the result as a Response object and its typed stream events:
//
//	response.created → response.in_progress → response.output_item.added →
//	response.content_part.added → response.output_text.delta … →
//	response.output_text.done → response.content_part.done →
//	response.output_item.done → response.completed (or response.incomplete
//	when max_output_tokens cut it; error + response.failed when it failed)
//
// With tools offered (tools.go) the output is items in the reply's order: a
// message item opens when text comes, and each call is a function_call item
// (output_item.added → response.function_call_arguments.delta … →
// .done → output_item.done).
//
// Each event carries a sequence_number from 0. Responses with store true
// (the default, as OpenAI's) are kept in a bounded in-memory Store, so
// previous_response_id can continue a conversation.
package responses

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Handler serves the Responses API routes.
type Handler struct {
	env   *httpedge.Env
	store *Store
}

// New returns the handler over the server's facilities and store.
func New(env *httpedge.Env, store *Store) *Handler { return &Handler{env: env, store: store} }

// Create serves POST /v1/responses.
// The same POST carrying X-Sluice-Stream-Id and Last-Event-ID resumes a
// stream (resume.go).
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(httpedge.StreamIDHeader); id != "" && r.Header.Get(httpedge.LastEventIDHeader) != "" {
		h.resume(w, r, id)
		return
	}
	b, err := h.env.LoadBackend()
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	body, err := httpedge.ReadBody(w, r, h.env.MaxBodyBytes)
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	tenant := auth.Tenant(r.Context())
	p, err := parse(body, h.store.history(tenant))
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	g := p.gen
	if err := h.env.CheckModel(g.Model); err != nil {
		h.env.WriteError(w, err)
		return
	}
	req, err := stream.Prepare(b, g)
	if err != nil {
		h.env.WriteError(w, formatNames(err))
		return
	}
	req.ID = stream.NewID("resp_")
	resp := newResponse(req.ID, h.env.ModelName(g.Model), p.wire, g, len(req.Prompt))
	resp.tenant = tenant
	ts := stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)
	// After Prepare, which fixed the template's call format.
	tools := stream.NewToolStream(g)
	if g.Stream {
		h.stream(w, r, b, &streamState{Retained: h.env.NewRetainedFor(req.ID), p: p, req: req, ts: ts, resp: resp, tools: tools})
		return
	}
	gen, err := b.Submit(r.Context(), req)
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	c := &emitter{resp: resp, lazy: tools != nil} // no sse: no events, only the output
	startEvents(c, resp)
	out := tools.End(stream.Pump(gen, ts, tools.Use(c), h.env.PumpConfig(false), h.env.Drain))
	switch {
	case out.ClientGone:
		return
	case out.Err != nil:
		h.env.WriteError(w, out.Err)
		return
	}
	c.finish()
	resp.end(out, ts)
	raw := h.store.keep(resp, p)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// Get serves GET /v1/responses/{id}: a stored response.
// With stream=true it is the stream instead (resume.go).
func (h *Handler) Get(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("stream") == "true" {
		h.streamGet(w, r, r.PathValue("id"))
		return
	}
	st, ok := h.store.get(auth.Tenant(r.Context()), r.PathValue("id"))
	if !ok {
		h.env.WriteError(w, notFound(r.PathValue("id")))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(st.body)
}

// Delete serves DELETE /v1/responses/{id}.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !h.store.delete(auth.Tenant(r.Context()), id) {
		h.env.WriteError(w, notFound(id))
		return
	}
	raw, _ := json.Marshal(map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

func notFound(id string) error {
	return fmt.Errorf("%w: response %q (never stored, store false, or expired)", stream.ErrResponseNotFound, id)
}

// stream serves a streaming response. Everything up to the empty text
// part goes out at once: the client knows it was accepted. The stream is
// retained for a reconnect (resume.go) when the server keeps streams.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, b *stream.Backend, st *streamState) {
	gen, release, err := h.env.Submit(r, b, st, st.req)
	if gen == nil {
		if err != nil {
			h.env.WriteError(w, err)
		}
		return // else the client left before we started
	}
	defer release()
	st.em = emitter{sse: h.env.OpenSSE(gen.Context(), w, st.Retained, nil), resp: st.resp, lazy: st.tools != nil}
	em := &st.em
	startEvents(em, st.resp)
	_ = em.sse.Flush() // a failure shows in the emitter's next call, which Pump sees
	h.pump(st, gen)
}

// pump drains gen into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (h *Handler) pump(st *streamState, gen *stream.Generation) {
	out := st.tools.End(stream.Pump(gen, st.ts, st.tools.Use(&st.em), h.env.PumpConfig(true), h.env.Drain))
	if out.CutShort {
		return
	}
	h.end(st, out)
}

// end writes the stream's last events (recorded for a replay even when the
// client is gone) and stores the response.
func (h *Handler) end(st *streamState, out stream.Outcome) {
	em, resp := &st.em, st.resp
	st.done = true
	if out.Err != nil {
		failEvents(em, resp, out.Err)
		_ = em.sse.Flush()
		return
	}
	em.finish()
	resp.end(out, st.ts)
	h.store.keep(resp, st.p)
	endEvents(em, resp)
	_ = em.sse.Flush()
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// emitter is the stream.ToolEmitter of a Responses stream: it builds the
// response's output items and frames them as typed events. Text goes to
// the message item open at the end of the output (response.output_text.delta),
// opening one when the last item is a call; a call is a function_call
// item of its own (response.function_call_arguments.delta); each item is
// done when the next one starts or the response ends. With no sse (a
// whole response) it only builds the output.
type emitter struct {
	sse  *httpedge.SSE
	resp *response
	// lazy: the reply may start with a call (tools offered), so the first
	// message item waits for text instead of opening with the stream.
	lazy    bool
	open    any // the item being written, *message or *functionCall; nil: none
	index   int // open's output_index
	seq     int
	payload []byte
}

// event buffers one typed event; fields get "type" and "sequence_number".
func (e *emitter) event(typ string, fields map[string]any) {
	if e.sse == nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	raw, _ := json.Marshal(fields) // the response types always marshal
	e.sse.Event(typ, raw)
}

func (e *emitter) err() error {
	if e.sse == nil {
		return nil
	}
	return e.sse.Err()
}

// openMessage ends the open item and starts a message item with its one
// text part.
func (e *emitter) openMessage() *message {
	e.closeOpen("completed")
	m := e.resp.newMessage()
	e.open, e.index = m, len(e.resp.Output)-1
	e.event("response.output_item.added", map[string]any{"output_index": e.index, "item": m})
	e.event("response.content_part.added", map[string]any{"output_index": e.index, "content_index": 0,
		"item_id": m.ID, "part": newText("")})
	return m
}

// closeOpen ends the open item with status: the text or arguments done
// events, then output_item.done.
func (e *emitter) closeOpen(status string) {
	switch it := e.open.(type) {
	case *message:
		it.Status, it.Content = status, []outputText{newText(string(it.text))}
		text := it.Content[0]
		e.event("response.output_text.done", map[string]any{"output_index": e.index, "content_index": 0,
			"item_id": it.ID, "text": text.Text, "logprobs": []any{}})
		e.event("response.content_part.done", map[string]any{"output_index": e.index, "content_index": 0,
			"item_id": it.ID, "part": text})
		e.event("response.output_item.done", map[string]any{"output_index": e.index, "item": it})
	case *functionCall:
		it.Status = status
		e.event("response.function_call_arguments.done", map[string]any{"output_index": e.index,
			"item_id": it.ID, "name": it.Name, "arguments": it.Arguments})
		e.event("response.output_item.done", map[string]any{"output_index": e.index, "item": it})
	}
	e.open = nil
}

// finish makes sure the output has an item: a reply that was empty (or,
// with tools, held only text the parse dropped) is an empty message.
func (e *emitter) finish() {
	if len(e.resp.Output) == 0 {
		e.openMessage()
	}
}

func (e *emitter) Text(text string, _ []int32) error {
	if text == "" {
		return e.err()
	}
	m, ok := e.open.(*message)
	if !ok {
		m = e.openMessage()
	}
	m.text = append(m.text, text...)
	if e.sse == nil {
		return nil
	}
	// Built by hand: this is the one event per token.
	e.payload = append(e.payload[:0], `{"type":"response.output_text.delta","sequence_number":`...)
	e.payload = fmt.Appendf(e.payload, "%d", e.seq)
	e.seq++
	e.payload = fmt.Appendf(e.payload, `,"output_index":%d,"content_index":0,"item_id":`, e.index)
	e.payload = appendJSON(e.payload, m.ID)
	e.payload = append(e.payload, `,"delta":`...)
	e.payload = appendJSON(e.payload, text)
	e.payload = append(e.payload, `,"logprobs":[]}`...)
	e.sse.Event("response.output_text.delta", e.payload)
	return e.sse.Err()
}

// ToolCall implements stream.ToolEmitter: a call's first delta (its id and
// name) starts a function_call item, the rest are its arguments.
func (e *emitter) ToolCall(d stream.ToolCallDelta) error {
	if d.ID != "" {
		e.closeOpen("completed")
		c := e.resp.newCall(d)
		e.open, e.index = c, len(e.resp.Output)-1
		e.event("response.output_item.added", map[string]any{"output_index": e.index, "item": c})
	}
	c, ok := e.open.(*functionCall)
	if !ok || d.Arguments == "" {
		return e.err() // ToolStream starts every call before its arguments
	}
	c.Arguments += d.Arguments
	e.event("response.function_call_arguments.delta", map[string]any{"output_index": e.index,
		"item_id": c.ID, "delta": d.Arguments})
	return e.err()
}

func (e *emitter) KeepAlive() error {
	if e.sse == nil {
		return nil
	}
	e.sse.Comment("keep-alive")
	return e.sse.Err()
}

func (e *emitter) Flush() error {
	if e.sse == nil {
		return nil
	}
	return e.sse.Flush()
}

func appendJSON(dst []byte, s string) []byte {
	raw, _ := json.Marshal(s) // a string always marshals
	return append(dst, raw...)
}
