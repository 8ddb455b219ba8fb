package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/relay"
	"github.com/sluicehq/sluice/server/stream"
)

// Relay mode: the OpenAI routes are served by relaying to upstreams
// (server/relay) through the same stream writer as a local model: the
// upstream's text goes through stream.PumpText (keep-alive, stop strings
// held back, stall clock, coalescing) into the sseWriter and its event log,
// so a reconnect is answered from this server's retained events, never by a
// second upstream generation.

// relayCursor is the upstream side of a relayed stream: where the upstream's
// own stream stands, for a resume after the client left.
type relayCursor struct {
	model      string // the served name the client used
	upstreamID string // relay.Stream.UpstreamID; "" when the upstream cannot resume
	lastSeq    int64  // the upstream's last event consumed
	usage      *relay.Usage
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
	mux.Handle("POST /v1/chat/completions", s.api(func(w http.ResponseWriter, r *http.Request) { s.relayGenerate(w, r, true) }))
	mux.Handle("POST /v1/completions", s.api(func(w http.ResponseWriter, r *http.Request) { s.relayGenerate(w, r, false) }))
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
// through its stream writer (tool-call deltas, logprobs, several choices):
// refused, never silently dropped.
var relayRefused = []string{"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "logprobs", "top_logprobs", "echo", "best_of", "suffix"}

// relayRequest validates a body as a local request would be (one rule for
// both modes) and returns what the relay forwards.
func (s *Server) relayRequest(body []byte, chat bool) (*stream.GenRequest, relay.Request, error) {
	g, err := ParseRequest(body, chat)
	if err != nil {
		return nil, relay.Request{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, relay.Request{}, stream.InvalidParam("", "request body must be a JSON object")
	}
	for _, f := range relayRefused {
		if v, ok := fields[f]; ok && string(v) != "null" && string(v) != "false" {
			return nil, relay.Request{}, &stream.ParamError{Param: f, Sentinel: stream.ErrUnsupported,
				Message: fmt.Sprintf("%s is not supported in relay mode: the relay re-frames the upstream's text and would drop it", f)}
		}
	}
	if !s.relay.Serves(g.Model) {
		return nil, relay.Request{}, fmt.Errorf("%w: %q (this relay serves %s)", stream.ErrModelNotFound, g.Model, strings.Join(s.relay.Models(), ", "))
	}
	path := "/v1/completions"
	if chat {
		path = "/v1/chat/completions"
	}
	return g, relay.Request{Path: path, Model: g.Model, Body: fields, Detach: !s.cfg.AbortOnDisconnect}, nil
}

// relayGenerate serves POST /v1/chat/completions and /v1/completions in
// relay mode; with X-Sluice-Stream-Id and Last-Event-ID it resumes.
func (s *Server) relayGenerate(w http.ResponseWriter, r *http.Request, chat bool) {
	if id := r.Header.Get(streamIDHeader); id != "" && r.Header.Get(lastEventIDHeader) != "" {
		s.relayResume(w, r, id)
		return
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	g, req, err := s.relayRequest(body, chat)
	if err != nil {
		writeError(w, err)
		return
	}
	if g.Model == "" {
		g.Model = s.relay.Models()[0]
	}
	if !g.Stream {
		s.relayComplete(w, r, g, req)
		return
	}
	id := responseID(chat)
	retain := 0
	if s.store != nil {
		retain = s.cfg.ResumeStreamBytes
	}
	st := newStreamState(id, g, engine.Request{}, newChunkFormat(chat, id, g.Model, time.Now().Unix()), stream.NewTextOnlyStream(g.Stop), httpedge.NewEventLog(retain))
	st.relay = &relayCursor{model: g.Model}
	ctx, release, err := st.acquire(r.Context())
	if err != nil {
		return // the client left before we started
	}
	defer release()
	src, err := s.relay.Open(ctx, req)
	if err != nil {
		writeRelayError(w, err)
		return
	}
	st.relay.upstreamID = src.UpstreamID()
	if s.store != nil {
		s.store.add(st)
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.log, &st.format, s.cfg.WriteTimeout, 0)
	if chat {
		sw.role()
	}
	_ = sw.Flush() // headers and role now: the upstream accepted
	s.relayPump(st, src, sw)
}

// relayPump drains an upstream stream into the client's and ends it, unless
// the client left first: then the stream stays resumable.
func (s *Server) relayPump(st *streamState, src *relay.Stream, sw *sseWriter) {
	pc := s.pumpConfig(true)
	pc.StallTimeout = src.StallTimeout()
	out := stream.PumpText(sw.ctx, src, st.ts, sw, pc, s.drain)
	if errors.Is(out.Err, stream.ErrStall) {
		src.Stalled()
	}
	if out.LastSeq > 0 {
		st.relay.lastSeq = out.LastSeq
	}
	if u := src.Usage(); u != nil {
		st.relay.usage = u
	}
	if out.ClientGone && !src.Done() {
		return
	}
	if out.ClientGone { // the upstream had finished: the log gets the ending for a reconnect
		out.Finish = "stop"
	}
	s.relayEnd(st, sw, out)
}

// relayEnd writes the last events: finish and usage chunks, or the in-band
// error; then [DONE].
func (s *Server) relayEnd(st *streamState, sw *sseWriter, out stream.TextOutcome) {
	if out.Err != nil {
		sw.error(out.Err)
	} else {
		sw.finish(out.Finish)
		if u := st.relay.usage; st.gen.IncludeUsage && u != nil {
			sw.usage(relayUsage(u))
		}
	}
	sw.done()
	st.done = true
	_ = sw.Flush()
}

func relayUsage(u *relay.Usage) Usage {
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.Details != nil {
		out.CachedTokens = u.Details.CachedTokens
	}
	return out
}

// relayResume replays the events after Last-Event-ID from this server's log.
// A stream that the client's leaving cut short (its upstream stream was
// closed at once) continues through the upstream's own resume when it has
// one (an upstream Sluice continues the same generation from its prefix
// cache); otherwise it ends with an in-band resume_gap error: a second
// upstream generation is never started.
func (s *Server) relayResume(w http.ResponseWriter, r *http.Request, id string) {
	st, last, ctx, release, ok := s.openResume(w, r, id, true)
	if !ok {
		return
	}
	defer release()
	var src *relay.Stream
	var cause error
	if !st.done {
		if src, cause = s.relay.Resume(ctx, st.relay.model, st.relay.upstreamID, st.relay.lastSeq); cause != nil && ctx.Err() != nil {
			return
		}
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.log, &st.format, s.cfg.WriteTimeout, last)
	_ = sw.Flush() // the replay
	switch {
	case st.done:
	case src != nil:
		s.relayPump(st, src, sw)
	default:
		s.relayEnd(st, sw, stream.TextOutcome{Err: fmt.Errorf(
			"%w: the upstream's generation was cancelled when the client left and cannot be resumed (%v); no second generation is started",
			stream.ErrResumeGap, cause)})
	}
}

// relayComplete serves a non-streaming request. The upstream is still asked
// for a stream: its silence is bounded by the stall clock, the client's
// leaving closes it, and stop strings are enforced here.
func (s *Server) relayComplete(w http.ResponseWriter, r *http.Request, g *stream.GenRequest, req relay.Request) {
	src, err := s.relay.Open(r.Context(), req)
	if err != nil {
		writeRelayError(w, err)
		return
	}
	var c collector
	out := stream.PumpText(r.Context(), src, stream.NewTextOnlyStream(g.Stop), &c, stream.PumpConfig{StallTimeout: src.StallTimeout()}, s.drain)
	if errors.Is(out.Err, stream.ErrStall) {
		src.Stalled()
	}
	if out.ClientGone {
		return
	}
	if out.Err != nil {
		writeError(w, out.Err)
		return
	}
	var u Usage
	if src.Usage() != nil {
		u = relayUsage(src.Usage())
	}
	writeJSON(w, completionBody(g.Chat, responseID(g.Chat), g.Model, string(c.text), out.Finish, u))
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
