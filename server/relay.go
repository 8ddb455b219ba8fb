package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/server/anthropic"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/relay"
	"github.com/sluicehq/sluice/server/responses"
	"github.com/sluicehq/sluice/server/stream"
)

// Relay mode: the OpenAI routes are served by relaying to upstreams
// (server/relay) through the same stream writer as a local model: the
// upstream's text goes through stream.PumpText (keep-alive, stop strings
// held back, stall clock, coalescing) into the sseWriter and its event log,
// so a reconnect is answered from this server's retained events, never by a
// second upstream generation.

// relayState is a relayed stream retained for a resume: its event log and
// lease (Retained), its text as this side holds it back for stop strings,
// the upstream's side (relay), and whether its log has ended. One request
// at a time holds its lease and may touch it.
type relayState struct {
	*httpedge.Retained
	ts    *stream.TextStream
	relay *relayCursor
	done  bool // the log ends with the stream's last event
}

// relayOpen finds the relayed stream id names, reads Last-Event-ID, takes
// the stream for this reader and checks the log still holds what follows
// that id. ok is false when it has answered the request itself; otherwise
// the caller calls release.
func (s *Server) relayOpen(w http.ResponseWriter, r *http.Request, id string) (
	st *relayState, last int64, ctx context.Context, release func(), ok bool) {
	rc, err := s.store.shared().Open(r, id, func(o httpedge.Resumable) bool { _, ok := o.(*relayState); return ok })
	if err != nil {
		if r.Context().Err() == nil { // else the client left while waiting for the stream
			writeError(w, err)
		}
		return nil, 0, nil, nil, false
	}
	return rc.State.(*relayState), rc.Last, rc.Ctx, rc.Release, true
}

// relayCursor is the upstream side of a relayed stream: where the upstream's
// own stream stands, for a resume after the client left, and how the
// stream is framed for its client.
type relayCursor struct {
	model      string // the served name the client used
	upstreamID string // relay.Stream.UpstreamID; "" when the upstream cannot resume
	lastSeq    int64  // the upstream's last event consumed
	usage      *relay.Usage
	stopSeq    string // the stop sequence the upstream reported matching
	edge       relayEdge
}

// relayEdge frames a relayed stream in its client's API, with the code that
// frames a local one: OpenAI chunks (relayedChat, over chatFramer),
// Anthropic's events (anthropic.Relayed, over its emitter) or the
// Responses events (responses.Relayed, over its emitter). It lives as long
// as the stream: a resumed connection continues the same framing.
//
// Its shape is httpedge.Framer's but for End, which takes the upstream's
// ending: the framer is the emitter stream.PumpText writes to.
type relayEdge interface {
	stream.Emitter
	// Attach points the framer at the connection it writes now; nil: a
	// whole response, whose content it only builds.
	Attach(sse *httpedge.SSE)
	// Start writes the events before the first text.
	Start()
	// End settles the response from the upstream's ending and writes its
	// last events: the ending, or out.Err in-band.
	End(out stream.TextOutcome, end stream.TextEnd)
}

// end is what the upstream said at its end, with the stop string matched
// here when it was this side that stopped the text.
func (c *relayCursor) end(ts *stream.TextStream) stream.TextEnd {
	e := stream.TextEnd{StopSequence: ts.Matched()}
	if e.StopSequence == "" {
		e.StopSequence = c.stopSeq
	}
	if u := c.usage; u != nil {
		e.Usage, e.PromptTokens, e.CompletionTokens = true, u.PromptTokens, u.CompletionTokens
		if u.Details != nil {
			e.CachedTokens = u.Details.CachedTokens
		}
		e.ReasoningTokens = u.ReasoningTokens()
	}
	return e
}

// relayedChat frames chat and completions streams and their whole responses
// in relay mode: the local chatFramer, over an upstream's choice. The
// upstream's reasoning is chat's reasoning_content and reasoning, in delta
// and message alike, and its usage (reasoning tokens included) the usage's.
type relayedChat struct{ *chatFramer }

// chatAPI is chat (or completions) as relayAPI serves it.
func chatAPI(chat bool) relayAPIShape {
	api := relayAPIShape{path: relay.PathCompletions, prefix: "cmpl-", refused: relayRefused, refuse: writeRelayError}
	if chat {
		api.path, api.prefix = relay.PathChat, "chatcmpl-"
	}
	api.parse = func(_ context.Context, body []byte, id string) (*stream.GenRequest, relayFramer, error) {
		g, err := ParseRequest(body, chat)
		if err != nil {
			return nil, nil, err
		}
		if g.NumChoices() > 1 { // the relay re-frames one upstream choice
			param := "n"
			if len(g.Batch) > 0 {
				param = "prompt"
			}
			return nil, nil, httpedge.Unsupported(param, "%s: several choices (n > 1, a list of prompts) are not supported in relay mode", param)
		}
		return g, relayedChat{&chatFramer{g: g, h: httpedge.Head{ID: id}, relayed: true}}, nil
	}
	return api
}

// SetModel names the served model once the relay chose it.
func (e relayedChat) SetModel(name string) {
	e.h.Model, e.format = name, newChunkFormat(e.g.Chat, e.h.ID, name, time.Now().Unix())
}

// Signed implements stream.SealEmitter. Chat has no seal of reasoning to
// pass on: an OpenAI-compatible upstream sends none.
func (e relayedChat) Signed(string) error {
	if e.sw == nil {
		return nil
	}
	return e.sw.Err()
}

// End writes the finish and usage chunks, or the in-band error, then
// [DONE]; for a whole response it settles Body.
func (e relayedChat) End(out stream.TextOutcome, end stream.TextEnd) {
	// An upstream that counted nothing has no usage chunk to relay.
	e.end(out.Finish, out.Err, usageOf(end), e.g.IncludeUsage && end.Usage, nil)
}

// SetRelay puts the server in relay mode: /ready answers 200 at once and
// the API routes relay to r's upstreams. It must be called before Handler,
// HTTPServer or Serve.
func (s *Server) SetRelay(r *relay.Relay) error {
	if r == nil || len(r.Models()) == 0 {
		return errors.New("server: a relay needs upstreams")
	}
	s.relay = r
	return nil
}

func (s *Server) relayHandler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /ready", s.relayReady)
	mux.Handle("GET /v1/models", s.api(s.relayModels))
	store := responses.NewStore(storedResponses, storedResponseBytes)
	for _, api := range []relayAPIShape{chatAPI(true), chatAPI(false), responsesAPI(store)} {
		mux.Handle("POST "+api.path, s.api(func(w http.ResponseWriter, r *http.Request) { s.relayAPI(w, r, api) }))
	}
	mux.Handle("POST /v1/messages", s.guard(func(w http.ResponseWriter, r *http.Request) { s.relayAPI(w, r, messagesAPI) }, anthropic.WriteError))
	mux.Handle("POST /v1/messages/count_tokens", s.guard(s.relayCountTokens, anthropic.WriteError))
	s.relayResponses(mux, store)
	mux.Handle("GET /v1/streams/{id}", s.api(func(w http.ResponseWriter, r *http.Request) { s.relayResume(w, r, r.PathValue("id")) }))
	for pattern, h := range s.extra {
		mux.Handle(pattern, h)
	}
	return mux
}

func (s *Server) relayReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	select {
	case <-s.drain:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"shutting down"}`))
	default:
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	}
}

func (s *Server) relayModels(w http.ResponseWriter, _ *http.Request) {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i, name := range s.relay.Models() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%s,"object":"model","created":%d,"owned_by":"sluice-relay"}`, appendJSONString(nil, name), s.started.Unix())
	}
	b.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(b.String()))
}

// relayRefused are request fields whose output the relay cannot carry
// through its stream writer (logprobs, several choices, the legacy
// function_call deltas): refused, never silently dropped. tools,
// tool_choice and parallel_tool_calls go upstream as given and its calls
// come back as deltas of their own (stream.TextEvent.Tools).
var relayRefused = []string{"functions", "function_call", "logprobs", "top_logprobs", "echo", "best_of", "suffix"}

// relayForward is what the relay sends for the validated request g: the
// client's fields as it wrote them, to its served model (g.Model is set to
// the first served name when the client gave none). A field in refused is
// refused, never dropped.
func (s *Server) relayForward(body []byte, g *stream.GenRequest, path string, refused []string) (relay.Request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return relay.Request{}, stream.InvalidParam("", "request body must be a JSON object")
	}
	for _, f := range refused {
		if v, ok := fields[f]; ok && string(v) != "null" && string(v) != "false" {
			return relay.Request{}, &stream.ParamError{Param: f, Sentinel: stream.ErrUnsupported,
				Message: fmt.Sprintf("%s is not supported in relay mode: the relay re-frames the upstream's text and would drop it", f)}
		}
	}
	if !s.relay.Serves(g.Model) {
		return relay.Request{}, fmt.Errorf("%w: %q (this relay serves %s)", stream.ErrModelNotFound, g.Model, strings.Join(s.relay.Models(), ", "))
	}
	if g.Model == "" {
		g.Model = s.relay.Models()[0]
	}
	return relay.Request{Path: path, Model: g.Model, Body: fields, Detach: !s.cfg.AbortOnDisconnect}, nil
}

// relayLog is a relayed stream's event log: retained for a resume when the
// server keeps resumable streams.
func (s *Server) relayLog() *httpedge.EventLog {
	if s.store == nil {
		return httpedge.NewEventLog(0)
	}
	return httpedge.NewEventLog(s.cfg.ResumeStreamBytes)
}

// relayStream opens the upstream stream and relays it to the client in
// st's edge; a failure before the first byte is answered in api's shape.
func (s *Server) relayStream(w http.ResponseWriter, r *http.Request, st *relayState, req relay.Request, api relayAPIShape) {
	ctx, release, err := st.Acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	src, err := s.relay.Open(ctx, req)
	if err != nil {
		api.refuse(w, err)
		return
	}
	st.relay.upstreamID = src.UpstreamID()
	if s.store != nil {
		s.store.Add(st)
	}
	h := map[string]string{streamIDHeader: st.ID}
	if api.requestID {
		h["request-id"] = st.ID
	}
	httpedge.SetHeaders(w, h)
	sse := httpedge.NewSSE(ctx, w, st.Log, s.cfg.WriteTimeout, 0)
	st.relay.edge.Attach(sse)
	st.relay.edge.Start()
	_ = sse.Flush() // headers and the first events now: the upstream accepted
	s.relayPump(st, src, sse)
}

// relayPump drains an upstream stream into the client's and ends it, unless
// the client left first: then the stream stays resumable.
func (s *Server) relayPump(st *relayState, src *relay.Stream, sse *httpedge.SSE) {
	pc := s.pumpConfig(true)
	pc.StallTimeout = src.StallTimeout()
	st.relay.edge.Attach(sse)
	out := stream.PumpText(sse.Context(), src, st.ts, st.relay.edge, pc, s.drain)
	if errors.Is(out.Err, stream.ErrStall) {
		src.Stalled()
	}
	if out.LastSeq > 0 {
		st.relay.lastSeq = out.LastSeq
	}
	if u := src.Usage(); u != nil {
		st.relay.usage = u
	}
	if q := src.StopSequence(); q != "" {
		st.relay.stopSeq = q
	}
	if out.ClientGone && !src.Done() {
		return
	}
	if out.ClientGone { // the upstream had finished: the log gets the ending for a reconnect
		out.Finish = "stop"
	}
	s.relayEnd(st, sse, out)
}

// relayEnd writes the stream's last events in its edge and marks it done.
func (s *Server) relayEnd(st *relayState, sse *httpedge.SSE, out stream.TextOutcome) {
	st.relay.edge.Attach(sse)
	st.relay.edge.End(out, st.relay.end(st.ts))
	st.done = true
	_ = sse.Flush()
}

// relayResume replays the events after Last-Event-ID from this server's log.
// A stream that the client's leaving cut short (its upstream stream was
// closed at once) continues through the upstream's own resume when it has
// one (an upstream Sluice continues the same chat generation from its
// prefix cache); otherwise it ends with an in-band resume_gap error in the
// stream's API: a second upstream generation is never started.
func (s *Server) relayResume(w http.ResponseWriter, r *http.Request, id string) {
	st, last, ctx, release, ok := s.relayOpen(w, r, id)
	if !ok {
		return
	}
	s.relayContinue(ctx, w, st, id, last, release)
}

// relayContinue replays st's events after last and continues or ends it
// (relayResume), under the lease release gives back.
func (s *Server) relayContinue(ctx context.Context, w http.ResponseWriter, st *relayState, id string, last int64, release func()) {
	defer release()
	var src *relay.Stream
	var cause error
	if !st.done {
		if src, cause = s.relay.Resume(ctx, st.relay.model, st.relay.upstreamID, st.relay.lastSeq); cause != nil && ctx.Err() != nil {
			return
		}
	}
	setSSEHeaders(w, id)
	sse := httpedge.NewSSE(ctx, w, st.Log, s.cfg.WriteTimeout, last)
	_ = sse.Flush() // the replay
	switch {
	case st.done:
	case src != nil:
		s.relayPump(st, src, sse)
	default:
		s.relayEnd(st, sse, stream.TextOutcome{Err: fmt.Errorf(
			"%w: the upstream's generation was cancelled when the client left and cannot be resumed (%v); no second generation is started",
			stream.ErrResumeGap, cause)})
	}
}

// relayWhole serves a non-streaming request. The upstream is still asked
// for a stream: its silence is bounded by the stall clock, the client's
// leaving closes it, and stop strings are enforced here. Its events go to
// f attached to no connection, as a streamed response's go to f on one, so
// both are framed by the same code; refuse answers a failure in the client's API.
func (s *Server) relayWhole(w http.ResponseWriter, r *http.Request, g *stream.GenRequest, req relay.Request,
	f relayFramer, refuse func(http.ResponseWriter, error)) {
	src, err := s.relay.Open(r.Context(), req)
	if err != nil {
		refuse(w, err)
		return
	}
	ts := stream.NewTextOnlyStream(g.Stop)
	f.Attach(nil)
	out := stream.PumpText(r.Context(), src, ts, f, stream.PumpConfig{StallTimeout: src.StallTimeout()}, s.drain)
	if errors.Is(out.Err, stream.ErrStall) {
		src.Stalled()
	}
	if out.ClientGone {
		return
	}
	if out.Err != nil {
		refuse(w, out.Err)
		return
	}
	cur := relayCursor{usage: src.Usage(), stopSeq: src.StopSequence()}
	f.End(out, cur.end(ts))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(f.Body())
}

// usageOf is the OpenAI usage of what the upstream reported.
func usageOf(end stream.TextEnd) Usage {
	return Usage{PromptTokens: end.PromptTokens, CompletionTokens: end.CompletionTokens,
		TotalTokens: end.PromptTokens + end.CompletionTokens, CachedTokens: end.CachedTokens, ReasoningTokens: end.ReasoningTokens}
}

// writeRelayError answers a failure before the first byte. An upstream that
// refused the client's request (400, 404, 422...) is quoted as it answered;
// the rest take their row of the one table.
func writeRelayError(w http.ResponseWriter, err error) {
	var se *relay.StatusError
	if errors.As(err, &se) && se.PassThrough() {
		code := se.Code
		writeError(w, &APIError{Status: se.Status, Message: se.Message, Type: se.Type, Param: se.Param, Code: &code})
		return
	}
	writeError(w, err)
}
