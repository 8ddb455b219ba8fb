// Package responses serves the OpenAI Responses API (POST /v1/responses,
// GET and DELETE /v1/responses/{id}) over the stream core. It is a thin
// adapter like the chat one, an API of the HTTP driver (httpedge.Env.Serve):
// a parser (the request becomes a stream.GenRequest) and a framer; the
// driver and the stream core bring the guarantees every transport shares
// (stop-string and UTF-8 hold-back, keep-alive comments, the stall timeout,
// a disconnect aborting the sequence at once, resume). This package frames
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
	"slices"

	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Handler serves the Responses API routes.
type Handler struct {
	env   *httpedge.Env
	store *Store
	api   *httpedge.API
}

// New returns the handler over the server's facilities and store: the
// Responses API is its parser and its framer; the driver
// (httpedge.Env.Serve) does the rest.
func New(env *httpedge.Env, store *Store) *Handler {
	h := &Handler{env: env, store: store}
	h.api = &httpedge.API{Name: "responses", Prefix: "resp_", Parse: h.parse, Refuse: func(w http.ResponseWriter, err error) {
		env.WriteError(w, formatNames(err)) // Prepare names text.format as chat's response_format
	}}
	return h
}

// Create serves POST /v1/responses.
// The same POST carrying X-Sluice-Stream-Id and Last-Event-ID resumes a
// stream.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) { h.env.Serve(w, r, h.api) }

// parse is the Responses API's parser: the request of r's tenant, whose
// previous_response_id names one of that tenant's stored responses, and
// the framer of its response, kept as that tenant's.
func (h *Handler) parse(r *http.Request, body []byte) (*httpedge.Parsed, error) {
	tenant := auth.Tenant(r.Context())
	p, err := parse(body, h.store.history(tenant))
	if err != nil {
		return nil, err
	}
	return &httpedge.Parsed{Gen: p.gen, Frame: func(hd httpedge.Head) httpedge.Framer {
		resp := newResponse(hd.ID, hd.Model, p.wire, p.gen, hd.PromptTokens())
		resp.tenant = tenant
		resp.ns, resp.SluiceWarnings, resp.Reasoning = p.tools.ns, p.tools.warnings, p.wire.Reasoning
		resp.sealReasoning = slices.Contains(p.wire.Include, "reasoning.encrypted_content")
		// A model that reasons opens with a reasoning item: the message
		// waits for text.
		lazy := hd.Lazy || hd.Backend.Reasoning.On()
		return &framer{emitter: &emitter{resp: resp, lazy: lazy}, store: h.store, p: p}
	}}, nil
}

// framer is the Responses API's httpedge.Framer: the emitter, and the store
// the finished response is kept in.
type framer struct {
	*emitter
	store *Store
	p     *parsed
	raw   []byte // the stored response, once ended
}

func (f *framer) Attach(sse *httpedge.SSE) { f.sse = sse }

// Start announces the response and, unless lazy, its message item.
func (f *framer) Start() { startEvents(f.emitter, f.resp) }

// End writes error and response.failed, or settles the response from its
// ending (local or an upstream's), keeps it in the store and writes the
// done events and response.completed (or .incomplete).
func (f *framer) End(end stream.Ending) {
	if end.Err != nil {
		failEvents(f.emitter, f.resp, end.Err)
		return
	}
	f.finish() // an empty reply is an empty message
	f.resp.complete(end.Finish, end)
	f.raw = f.store.keep(f.resp, f.p)
	endEvents(f.emitter, f.resp)
}

// Body is the whole response of a non-streaming request, framed by the
// emitter attached to no connection and settled and kept by End.
func (f *framer) Body() []byte { return f.raw }

// startEvents announces the response and, unless the emitter is lazy, its
// message item and text part. Before its output item is announced the
// response has no output: the SDKs index items by the output_item.added
// events.
func startEvents(em *emitter, resp *response) {
	empty := *resp
	empty.Output = []any{}
	em.event("response.created", map[string]any{"response": &empty})
	em.event("response.in_progress", map[string]any{"response": &empty})
	if !em.lazy {
		em.openMessage()
	}
}

// failEvents ends a stream with err: the error event, then response.failed
// keeping the text sent before it.
func failEvents(em *emitter, resp *response, err error) {
	c := stream.Classify(err)
	em.event("error", map[string]any{"code": c.Code, "message": err.Error(), "param": nullable(c.Param)})
	resp.fail(c.Code, err.Error())
	em.event("response.failed", map[string]any{"response": resp})
}

// endEvents ends the open item, then the response, which complete has
// settled.
func endEvents(em *emitter, resp *response) {
	em.closeOpen(resp.Status)
	final := "response.completed"
	if resp.Status == "incomplete" {
		final = "response.incomplete"
	}
	em.event(final, map[string]any{"response": resp})
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
	case *reasoningItem:
		e.closeReasoning(it, status)
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
