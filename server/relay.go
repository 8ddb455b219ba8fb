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

// Relay mode: the APIs are served by the HTTP driver (httpedge.Env.Serve)
// as locally, their parsers and framers the local ones', with an upstream
// (server/relay) as the Source of every response instead of the engine: the
// upstream's text goes through stream.PumpText (keep-alive, stop strings
// held back, stall clock, coalescing) into the framer and the stream's
// event log, so a reconnect is answered from this server's retained events,
// and continued only through the upstream's own resume, never by a second
// upstream generation.

// upstream is the relay as one response's httpedge.Source: the request as
// forwarded, the text as this side holds it back for stop strings, and
// where the upstream's own stream stands, for a resume after the client
// left. The holder of the response's lease owns it.
type upstream struct {
	relay      *relay.Relay
	g          *stream.GenRequest
	req        relay.Request
	ts         *stream.TextStream
	upstreamID string // relay.Stream.UpstreamID; "" when the upstream cannot resume
	lastSeq    int64  // the upstream's last event consumed
	usage      *relay.Usage
	stopSeq    string // the stop sequence the upstream reported matching
	gap        error  // why the upstream could not resume (Continue)
}

// Start opens the upstream's stream. A non-streaming request asks for one
// too: its silence is bounded by the stall clock, the client's leaving
// closes it, and stop strings are enforced here.
func (u *upstream) Start(ctx context.Context) (httpedge.Generation, error) {
	src, err := u.relay.Open(ctx, u.req)
	if err != nil {
		return nil, err
	}
	u.upstreamID = src.UpstreamID()
	return &upstreamGen{u, src, ctx}, nil
}

// Continue resumes the upstream's own stream after its last event consumed,
// when it has one (an upstream Sluice continues the same chat generation
// from its prefix cache); otherwise Rest ends the stream with a
// resume_gap: a second upstream generation is never started.
func (u *upstream) Continue(ctx context.Context) (httpedge.Generation, error) {
	src, err := u.relay.Resume(ctx, u.req.Model, u.upstreamID, u.lastSeq)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err // the client left (or another took over) while the upstream was asked
	case err != nil:
		u.gap = err
		return nil, nil
	}
	return &upstreamGen{u, src, ctx}, nil
}

// Rest is the in-band resume_gap of a stream the upstream could not resume.
func (u *upstream) Rest(httpedge.Framer) stream.Ending {
	return u.ending(stream.TextOutcome{Err: fmt.Errorf(
		"%w: the upstream's generation was cancelled when the client left and cannot be resumed (%v); no second generation is started",
		stream.ErrResumeGap, u.gap)})
}

func (u *upstream) Keeps() int { return u.g.RetainedBytes() }

// ending is the Ending of an upstream's text outcome: what the upstream
// reported at its end, with the stop string matched here when it was this
// side that stopped the text.
func (u *upstream) ending(out stream.TextOutcome) stream.Ending {
	e := stream.Ending{Finish: out.Finish, Err: out.Err, ClientGone: out.ClientGone, StopSequence: u.ts.Matched()}
	if e.StopSequence == "" {
		e.StopSequence = u.stopSeq
	}
	if us := u.usage; us != nil {
		e.Usage, e.PromptTokens, e.CompletionTokens = true, us.PromptTokens, us.CompletionTokens
		if us.Details != nil {
			e.CachedTokens = us.Details.CachedTokens
		}
		e.ReasoningTokens = us.ReasoningTokens()
	}
	return e
}

// upstreamGen is one upstream stream of a response: the first, or one an
// upstream's resume continues.
type upstreamGen struct {
	*upstream
	src *relay.Stream
	ctx context.Context
}

func (g *upstreamGen) Context() context.Context { return g.ctx }

// Pump relays the upstream's events to f under the upstream's stall
// timeout. The client's leaving cuts the stream short unless the upstream
// had already finished: then it ends, so the log holds the ending for a
// reconnect.
func (g *upstreamGen) Pump(f httpedge.Framer, cfg stream.PumpConfig, drain <-chan struct{}) stream.Ending {
	cfg.StallTimeout = g.src.StallTimeout()
	out := stream.PumpText(g.ctx, g.src, g.ts, f, cfg, drain)
	if errors.Is(out.Err, stream.ErrStall) {
		g.src.Stalled()
	}
	if out.LastSeq > 0 {
		g.lastSeq = out.LastSeq
	}
	if us := g.src.Usage(); us != nil {
		g.usage = us
	}
	if q := g.src.StopSequence(); q != "" {
		g.stopSeq = q
	}
	if out.ClientGone && g.src.Done() {
		out.Finish = "stop"
	}
	end := g.ending(out)
	end.CutShort = out.ClientGone && !g.src.Done()
	return end
}

// relayedChat frames chat and completions streams and their whole responses
// in relay mode: the local chatFramer, over an upstream's choice. The
// upstream's reasoning is chat's reasoning_content and reasoning, in delta
// and message alike, and its usage (reasoning tokens included) the usage's.
type relayedChat struct{ *chatFramer }

// relayedChatAPI is chat (or completions) in relay mode.
func (s *Server) relayedChatAPI(chat bool) *httpedge.API {
	api := &httpedge.API{Name: "openai", Prefix: "cmpl-", Refuse: writeRelayError, EventIDs: true}
	path := relay.PathCompletions
	if chat {
		api.Prefix, path = "chatcmpl-", relay.PathChat
	}
	api.Parse = s.relayParse(path, relayRefused, func(_ *http.Request, body []byte) (*httpedge.Parsed, func(map[string]json.RawMessage), error) {
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
		return &httpedge.Parsed{Gen: g, Frame: func(h httpedge.Head) httpedge.Framer {
			return relayedChat{&chatFramer{g: g, h: h, format: newChunkFormat(g.Chat, h.ID, h.Model, time.Now().Unix()), relayed: true}}
		}}, nil, nil
	})
	return api
}

// Signed implements stream.SealEmitter. Chat has no seal of reasoning to
// pass on: an OpenAI-compatible upstream sends none.
func (e relayedChat) Signed(string) error {
	if e.sw == nil {
		return nil
	}
	return e.sw.Err()
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
	env := s.relayEnv()
	store := responses.NewStore(storedResponses, storedResponseBytes)
	chat := s.relayedChatAPI(true)
	for path, api := range map[string]*httpedge.API{relay.PathChat: chat, relay.PathCompletions: s.relayedChatAPI(false),
		relay.PathResponses: s.relayedResponsesAPI(store)} {
		mux.Handle("POST "+path, s.api(func(w http.ResponseWriter, r *http.Request) { env.Serve(w, r, api) }))
	}
	messages := s.relayedMessagesAPI()
	mux.Handle("POST /v1/messages", s.guard(func(w http.ResponseWriter, r *http.Request) { env.Serve(w, r, messages) }, anthropic.WriteError))
	mux.Handle("POST /v1/messages/count_tokens", s.guard(s.relayCountTokens, anthropic.WriteError))
	// GET and DELETE /v1/responses/{id}: the relay's own stored responses,
	// and with stream=true the stream from this server's event log
	// (starting_after a sequence number), continued or ended as any resume.
	h := responses.New(env, store)
	mux.Handle("GET /v1/responses/{id}", s.api(h.Get))
	mux.Handle("DELETE /v1/responses/{id}", s.api(h.Delete))
	// Any relayed API's stream, as this route has always resumed them.
	mux.Handle("GET /v1/streams/{id}", s.api(func(w http.ResponseWriter, r *http.Request) { env.ResumeAny(w, r, chat, r.PathValue("id")) }))
	for pattern, h := range s.extra {
		mux.Handle(pattern, h)
	}
	return mux
}

// relayEnv is the HTTP driver's Env in relay mode: the server's, without a
// local model to load or check (every parser brings its upstream Source).
func (s *Server) relayEnv() *httpedge.Env {
	env := *s.env
	env.Backend, env.CheckModel, env.ModelName = nil, nil, nil
	return &env
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
