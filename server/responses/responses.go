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
// Each event carries a sequence_number from 0. Responses with store true
// (the default, as OpenAI's) are kept in a bounded in-memory Store, so
// previous_response_id can continue a conversation.
package responses

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

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
	p, err := parse(body, h.store.conversation)
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
		h.env.WriteError(w, err)
		return
	}
	req.ID = stream.NewID("resp_")
	resp := newResponse(req.ID, h.env.ModelName(g.Model), p.wire, len(req.Prompt))
	ts := stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)
	if g.Stream {
		h.stream(w, r, b, &streamState{Retained: h.env.NewRetainedFor(req.ID), p: p, req: req, ts: ts, resp: resp})
		return
	}
	gen, err := stream.Submit(r.Context(), b.Engine, req, h.env.AbortOnDisconnect)
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	var c collector
	out := stream.Pump(gen, ts, &c, h.env.PumpConfig(false), h.env.Drain)
	switch {
	case out.ClientGone:
		return
	case out.Err != nil:
		h.env.WriteError(w, out.Err)
		return
	}
	resp.end(out, ts, string(c.text))
	raw := h.keep(resp, p)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// keep stores a finished response when asked to and returns its JSON.
func (h *Handler) keep(resp *response, p *parsed) []byte {
	raw, _ := json.Marshal(resp) // strings, numbers and maps of strings always marshal
	if resp.Store {
		conv := append(slices.Clone(p.conv), stream.ChatMessage{Role: "assistant", Content: resp.text()})
		h.store.put(resp.ID, raw, conv)
	}
	return raw
}

// Get serves GET /v1/responses/{id}: a stored response.
// With stream=true it is the stream instead (resume.go).
func (h *Handler) Get(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("stream") == "true" {
		h.streamGet(w, r, r.PathValue("id"))
		return
	}
	st, ok := h.store.get(r.PathValue("id"))
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
	if !h.store.delete(id) {
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
	ctx, release, err := st.Acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	gen, err := stream.Submit(ctx, b.Engine, st.req, h.env.AbortOnDisconnect)
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	if h.env.Streams != nil {
		h.env.Streams.Add(st)
	}
	resp := st.resp
	st.em = emitter{sse: h.env.OpenSSE(gen.Context(), w, st.Retained, nil), itemID: resp.Output[0].ID}
	em := &st.em
	startEvents(em, resp)
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
// client is gone) and stores the response.
func (h *Handler) end(st *streamState, out stream.Outcome) {
	em, resp := &st.em, st.resp
	st.done = true
	if out.Err != nil {
		failEvents(em, resp, out.Err)
		_ = em.sse.Flush()
		return
	}
	resp.end(out, st.ts, string(em.text))
	h.keep(resp, st.p)
	endEvents(em, resp)
	_ = em.sse.Flush()
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// emitter is the stream.Emitter of a Responses stream: text becomes
// response.output_text.delta events, the keep-alive an SSE comment.
type emitter struct {
	sse     *httpedge.SSE
	itemID  string
	seq     int
	text    []byte // everything sent, for the done events
	payload []byte
}

// event buffers one typed event; fields get "type" and "sequence_number".
func (e *emitter) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	raw, _ := json.Marshal(fields) // the response types always marshal
	e.sse.Event(typ, raw)
}

func (e *emitter) Text(text string, _ []int32) error {
	if text == "" {
		return e.sse.Err()
	}
	e.text = append(e.text, text...)
	// Built by hand: this is the one event per token.
	e.payload = append(e.payload[:0], `{"type":"response.output_text.delta","sequence_number":`...)
	e.payload = fmt.Appendf(e.payload, "%d", e.seq)
	e.seq++
	e.payload = append(e.payload, `,"output_index":0,"content_index":0,"item_id":`...)
	e.payload = appendJSON(e.payload, e.itemID)
	e.payload = append(e.payload, `,"delta":`...)
	e.payload = appendJSON(e.payload, text)
	e.payload = append(e.payload, `,"logprobs":[]}`...)
	e.sse.Event("response.output_text.delta", e.payload)
	return e.sse.Err()
}

func (e *emitter) KeepAlive() error {
	e.sse.Comment("keep-alive")
	return e.sse.Err()
}

func (e *emitter) Flush() error { return e.sse.Flush() }

func appendJSON(dst []byte, s string) []byte {
	raw, _ := json.Marshal(s) // a string always marshals
	return append(dst, raw...)
}

// collector is the Emitter of a non-streaming response.
type collector struct{ text []byte }

func (c *collector) Text(s string, _ []int32) error { c.text = append(c.text, s...); return nil }
func (c *collector) KeepAlive() error               { return nil }
func (c *collector) Flush() error                   { return nil }
