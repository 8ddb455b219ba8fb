package httpedge

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// The HTTP driver: an API is a parser (wire JSON → one stream.GenRequest)
// and a framer (the generation's events → its wire shape); everything
// between them is written here once, for every API it drives.
//
//	Env.Serve(w, r, api)
//	    X-Sluice-Stream-Id + Last-Event-ID → Env.Resume
//	    read: LoadBackend, ReadBody, api.Parse, CheckModel      (api.Refuse answers each failure)
//	    several choices → api.Choices (OpenAI's n and prompt lists)
//	    stream.Prepare → req (id api.Prefix…) → api's Framer for it
//	    whole:  Backend.Submit → Pump into the Framer (no writer) → Framer.End → Framer.Body
//	    stream: lease → Backend.Submit → kept for a resume → headers → Framer.Start
//	            → Pump → Framer.End (the ending, or the error in-band), unless the client's
//	            leaving cut it short: then it stays resumable
//	Env.Resume / ResumeAfter: the lease → stream.Continue → replay the log → Pump, or the ending
//
// A new request field is one more stream.GenRequest field, set by each
// parser through the core's one rule (stream.Params and its setters); a new
// output kind (reasoning text beside the reply) is one more Emitter call the
// stream core makes, found on the Framer by type assertion as logprobs are
// (stream.LogprobEmitter), framed by each API once, and driven here for
// all. The abort policy is the Backend's
// (stream.Backend.WithAbortOnDisconnect), set once where the server
// attaches it. Relay mode runs the same parsers against an upstream
// (server/relay.go) and frames with the same framers' code (chatFramer,
// the Messages and Responses emitters); its loop over stream.PumpText, and
// its resume through the upstream's cursor, are the one generation source
// not yet behind this driver.

// API is one HTTP API the driver serves: its parser, its error shape and
// how its streams look.
type API struct {
	// Name tells its retained streams from other APIs': a resume finds only
	// a stream an API of the same name started (chat and completions share
	// one).
	Name string
	// Prefix starts the ids of its responses ("chatcmpl-", "msg_", "resp_").
	Prefix string
	// Parse reads a request body of r's tenant.
	Parse func(r *http.Request, body []byte) (*Parsed, error)
	// Refuse answers an error before the first byte in the API's shape.
	Refuse func(w http.ResponseWriter, err error)
	// IDHeader, when set, names the response id in a header of that name
	// too (Anthropic's request-id).
	IDHeader string
	// EventIDs: a stream's events carry ids, and its headers its stream id,
	// even when the server keeps no streams (OpenAI's SSE contract here).
	EventIDs bool
	// Choices, when set, serves a request for several choices (n > 1, a
	// list of prompts); without it the parser refuses them.
	Choices func(w http.ResponseWriter, r *http.Request, b *stream.Backend, g *stream.GenRequest)
}

// Parsed is a request as an API's parser leaves it: the generation request,
// and the framer of its response once it is prepared.
type Parsed struct {
	Gen   *stream.GenRequest
	Frame func(h Head) Framer
}

// Head is what a response's framer is made from: known once the request is
// prepared, before any token.
type Head struct {
	ID      string
	Model   string // the name the response reports (Env.ModelName)
	Backend *stream.Backend
	Req     engine.Request // as prepared: its prompt's tokens
	// Lazy: the reply may open with a tool call (tools offered), so a text
	// part waits for text instead of opening with the stream.
	Lazy bool
}

// PromptTokens is the prompt's length in tokens.
func (h Head) PromptTokens() int { return len(h.Req.Prompt) }

// Framer frames one response in its API's wire shape, building it up as the
// generation goes: the content a whole response returns, the events of a
// stream. It lives as long as the response, so a resumed stream continues
// the same framing (open blocks, sequence numbers) on a new connection.
type Framer interface {
	stream.ToolEmitter
	// Attach points the framer at the connection it writes now; nil: a
	// whole response, whose content it only builds.
	Attach(sse *SSE)
	// Start writes what precedes the first text.
	Start()
	// End settles the response from how its generation ended and writes its
	// last events: the ending, or out.Err in-band.
	End(out stream.Outcome, ts *stream.TextStream)
	// Body is the whole response's JSON, after End.
	Body() []byte
}

// Pumper is a Framer that is told how every connection's generation ended,
// the ones a disconnect cut short included (End sees only the last).
// Found by type assertion.
type Pumper interface {
	Pumped(out stream.Outcome)
}

// run is one response of a driven API, retained for a reconnect: the
// request as submitted (seed fixed), the TextStream holding every token
// consumed, the reply's tool-call parse and its framer. The holder of
// Retained's lease owns it.
type run struct {
	*Retained
	api    *API
	g      *stream.GenRequest
	req    engine.Request
	ts     *stream.TextStream
	tools  *stream.ToolStream   // nil without tools
	reason *stream.ReasonStream // nil for a model without reasoning markup
	f      Framer
	done   bool // the log ends with the final event: nothing left to generate
}

// Read is the driver's first step, for a route that parses a request
// without generating (count_tokens): the loaded model, the body read and
// parsed, the model checked.
func (e *Env) Read(w http.ResponseWriter, r *http.Request, parse func(*http.Request, []byte) (*Parsed, error)) (*stream.Backend, *Parsed, error) {
	b, err := e.LoadBackend()
	if err != nil {
		return nil, nil, err
	}
	body, err := ReadBody(w, r, e.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	p, err := parse(r, body)
	if err != nil {
		return nil, nil, err
	}
	if err := e.CheckModel(p.Gen.Model); err != nil {
		return nil, nil, err
	}
	return b, p, nil
}

// Serve serves one POST of api: a new response, or with
// X-Sluice-Stream-Id and Last-Event-ID the resume of one.
func (e *Env) Serve(w http.ResponseWriter, r *http.Request, api *API) {
	if id := r.Header.Get(StreamIDHeader); id != "" && r.Header.Get(LastEventIDHeader) != "" {
		e.Resume(w, r, api, id)
		return
	}
	b, p, err := e.Read(w, r, api.Parse)
	if err != nil {
		api.Refuse(w, err)
		return
	}
	g := p.Gen
	if api.Choices != nil && g.NumChoices() > 1 {
		api.Choices(w, r, b, g)
		return
	}
	req, err := stream.Prepare(b, g)
	if err != nil {
		api.Refuse(w, err)
		return
	}
	req.ID = stream.NewID(api.Prefix)
	// After Prepare, which fixed the template's call format.
	tools := stream.NewToolStream(g)
	st := &run{api: api, g: g, req: req, tools: tools, reason: stream.NewReasonStream(b, g, req.Prompt),
		ts: stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop),
		f:  p.Frame(Head{ID: req.ID, Model: e.ModelName(g.Model), Backend: b, Req: req, Lazy: tools != nil})}
	if g.Stream {
		st.Retained = e.NewRetainedFor(req.ID)
		st.Retained.Keeps(g.RetainedBytes(req))
		e.stream(w, r, b, st)
		return
	}
	e.whole(w, r, b, st)
}

// whole answers with the whole response once the generation has ended.
func (e *Env) whole(w http.ResponseWriter, r *http.Request, b *stream.Backend, st *run) {
	gen, err := b.Submit(r.Context(), st.req)
	if err != nil {
		st.api.Refuse(w, err)
		return
	}
	st.f.Attach(nil)
	st.f.Start()
	out := st.pump(gen, e.PumpConfig(false), e.Drain)
	switch {
	case out.ClientGone:
		return
	case out.Err != nil:
		st.api.Refuse(w, out.Err)
		return
	}
	st.f.End(out, st.ts)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(st.f.Body())
}

// stream serves a streaming response. What precedes the first text goes out
// at once: the client knows it was accepted. The stream is retained for a
// reconnect when the server keeps streams.
func (e *Env) stream(w http.ResponseWriter, r *http.Request, b *stream.Backend, st *run) {
	gen, release, err := e.Submit(r, b, st, st.req)
	if gen == nil {
		if err != nil {
			st.api.Refuse(w, err)
		}
		return // else the client left before we started
	}
	defer release()
	st.f.Attach(e.openSSE(gen.Context(), w, st))
	st.f.Start()
	_ = st.f.Flush() // a failure shows in the framer's next call, which Pump sees
	e.pump(st, gen)
}

// pump drains gen into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (e *Env) pump(st *run, gen *stream.Generation) {
	out := st.pump(gen, e.PumpConfig(true), e.Drain)
	if out.CutShort {
		return
	}
	e.end(st, out)
}

// pump drains gen through the reply's text and tool-call parse into the
// framer.
func (st *run) pump(gen *stream.Generation, cfg stream.PumpConfig, drain <-chan struct{}) stream.Outcome {
	em := st.reason.Use(st.tools.Use(st.f), st.f)
	out := st.tools.End(st.reason.End(stream.Pump(gen, st.ts, em, cfg, drain)))
	if p, ok := st.f.(Pumper); ok {
		p.Pumped(out)
	}
	return out
}

// openSSE sends a new stream's headers and returns its writer (OpenSSE;
// with api.EventIDs the ids are on even when no stream is retained).
func (e *Env) openSSE(ctx context.Context, w http.ResponseWriter, st *run) *SSE {
	if st.api.EventIDs && e.Streams == nil {
		SetHeaders(w, st.api.header(st.ID, true))
		return NewSSE(ctx, w, st.Log, e.WriteTimeout, 0)
	}
	return e.OpenSSE(ctx, w, st.Retained, st.api.header(st.ID, false))
}

// end writes the stream's last events (recorded for a replay even when the
// client is gone).
func (e *Env) end(st *run, out stream.Outcome) {
	st.done = true
	st.f.End(out, st.ts)
	_ = st.f.Flush()
}

// Resume replays the events of api's stream id after Last-Event-ID and,
// when the generation was cut short by a disconnect, continues it from the
// tokens already produced (stream.Continue): the client sees one response,
// generated once.
func (e *Env) Resume(w http.ResponseWriter, r *http.Request, api *API, id string) {
	rc, err := e.Streams.Open(r, id, api.owns)
	e.reconnect(w, api, rc, err)
}

// ResumeAfter is Resume for a client that names the last event it has
// itself (the Responses API's starting_after).
func (e *Env) ResumeAfter(w http.ResponseWriter, r *http.Request, api *API, id string, last int64) {
	rc, err := e.Streams.OpenAfter(r, id, last, api.owns)
	e.reconnect(w, api, rc, err)
}

func (e *Env) reconnect(w http.ResponseWriter, api *API, rc *Reconnect, err error) {
	if err != nil {
		api.Refuse(w, err)
		return
	}
	defer rc.Release()
	st := rc.State.(*run)
	gen, ctx, err := e.Continue(rc, st.done, st.g, st.req, st.ts.IDs())
	if err != nil {
		api.Refuse(w, err)
		return
	}
	SetHeaders(w, api.header(st.ID, true))
	st.f.Attach(e.Replay(ctx, w, rc))
	switch {
	case gen != nil:
		e.pump(st, gen)
	case !st.done: // every token was produced before the cut: only the ending is missing
		e.end(st, st.endProduced())
	}
}

// owns reports whether a retained stream is one of api's.
func (api *API) owns(s Resumable) bool {
	st, ok := s.(*run)
	return ok && st.api.Name == api.Name
}

// header is the streaming headers beyond the standard ones: the id under
// IDHeader, and under StreamIDHeader when withStreamID (OpenSSE adds that
// itself when the stream is retained).
func (api *API) header(id string, withStreamID bool) map[string]string {
	h := map[string]string{}
	if api.IDHeader != "" {
		h[api.IDHeader] = id
	}
	if withStreamID {
		h[StreamIDHeader] = id
	}
	return h
}

// endProduced ends a resumed stream whose every token was produced before
// the disconnect: the text the TextStream still held goes through the
// reasoning split and the tool parse, and the stream ends as at the token
// limit.
func (st *run) endProduced() stream.Outcome {
	_ = st.reason.Use(st.tools.Use(st.f), st.f).Text(st.ts.Finish(), nil) // a failed write shows in the ending's
	return st.tools.End(st.reason.End(stream.Outcome{Finish: "length"}))
}
