package httpedge

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// The HTTP driver: an API is a parser (wire JSON → one stream.GenRequest)
// and a framer (the generation's events → its wire shape); everything
// between them is written here once, for every API it drives, whatever
// generates the response: the local engine, or in relay mode an upstream
// provider (the Source the parser brings).
//
//	Env.Serve(w, r, api)
//	    X-Sluice-Stream-Id + Last-Event-ID → Env.Resume
//	    read: LoadBackend, ReadBody, api.Parse, CheckModel      (api.Refuse answers each failure)
//	    local: stream.Prepare → req (id api.Prefix…) → the local Source;
//	           the api's Framer for the response's Head
//	           several choices (OpenAI's n and prompt lists): api.Choices
//	           → a Source submitting them all and a Framer of every choice
//	    whole:  Source.Start → Generation.Pump into the Framer (no writer) → Framer.End → Framer.Body
//	    stream: lease → Source.Start → kept for a resume → headers → Framer.Start
//	            → Pump → Framer.End (the ending, or the error in-band), unless the client's
//	            leaving cut it short: then it stays resumable
//	Env.Resume / ResumeAfter: the lease → Source.Continue → replay the log → Pump,
//	    or the ending (Source.Rest)
//
// A new request field is one more stream.GenRequest field, set by each
// parser through the core's one rule (stream.Params and its setters); a new
// output kind (reasoning text beside the reply) is one more Emitter call the
// stream core makes, found on the Framer by type assertion as logprobs are
// (stream.LogprobEmitter), framed by each API once, and driven here for
// all. The abort policy is the Backend's
// (stream.Backend.WithAbortOnDisconnect), set once where the server
// attaches it; an upstream's is its relay.Request's. Every generation ends
// in one stream.Ending, which each framer settles its response from.

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
	// Choices, when set, prepares a request for several choices (n > 1, a
	// list of prompts) on the local engine as response id: the Source that
	// generates them all and the Framer of the response, which the driver
	// then serves as it does one choice's. Without it the parser refuses
	// them.
	Choices func(b *stream.Backend, g *stream.GenRequest, id string) (Source, Framer, error)
}

// Parsed is a request as an API's parser leaves it: the generation request,
// the framer of its response once it is prepared, and in relay mode the
// upstream that generates it.
type Parsed struct {
	Gen   *stream.GenRequest
	Frame func(h Head) Framer
	// Source generates the response instead of the local engine (relay
	// mode: the upstream behind the request as forwarded); nil: the local
	// engine, whose Source the driver makes once the request is prepared.
	Source Source
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
	// last events: the ending, or end.Err in-band.
	End(end stream.Ending)
	// Body is the whole response's JSON, after End.
	Body() []byte
}

// Pumper is a Framer that is told how every connection's generation ended,
// the ones a disconnect cut short included (End sees only the last).
// Found by type assertion.
type Pumper interface {
	Pumped(end stream.Ending)
}

// Source is what generates one response: the local engine (local, made by
// the driver) or an upstream provider (relay mode, brought by the parser).
// It lives as long as the response, holding what a resume continues from
// (the tokens produced, the upstream's cursor). The holder of the
// response's lease owns it.
type Source interface {
	// Start begins the generation under ctx: a stream's lease, a whole
	// response's request. An error comes before any output, for the API to
	// refuse.
	Start(ctx context.Context) (Generation, error)
	// Continue goes on with a generation a disconnect cut short, under ctx
	// (the reconnect's lease): nil with a nil error when there is nothing
	// left to generate, and only the ending (Rest) is missing.
	Continue(ctx context.Context) (Generation, error)
	// Rest is the ending of a resumed stream Continue had no generation
	// for, with what the source still held written to f first.
	Rest(f Framer) stream.Ending
	// Keeps is what the source retains for a resume beside the event log,
	// in bytes (Retained.Keeps).
	Keeps() int
}

// Generation is one connection's share of a response's generation.
type Generation interface {
	// Context ends with the generation: what its stream writes under.
	Context() context.Context
	// Pump drains the generation into f under cfg's timing until it ends,
	// the client leaves or drain closes, and says how it ended.
	Pump(f Framer, cfg stream.PumpConfig, drain <-chan struct{}) stream.Ending
}

// run is one response of a driven API, retained for a reconnect: its
// source, and its framer. The holder of Retained's lease owns it.
type run struct {
	*Retained
	api  *API
	src  Source
	f    Framer
	done bool // the log ends with the final event: nothing left to generate
}

// Read is the driver's first step, for a route that parses a request
// without generating (count_tokens) too: the loaded model, the body read
// and parsed, the model checked. An Env without a Backend (relay mode) has
// no model to load or check: the parser's Source answers for the model.
func (e *Env) Read(w http.ResponseWriter, r *http.Request, parse func(*http.Request, []byte) (*Parsed, error)) (*stream.Backend, *Parsed, error) {
	var b *stream.Backend
	if e.Backend != nil {
		var err error
		if b, err = e.LoadBackend(); err != nil {
			return nil, nil, err
		}
	}
	body, err := ReadBody(w, r, e.MaxBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	p, err := parse(r, body)
	if err != nil {
		return nil, nil, err
	}
	if b == nil {
		if p.Source == nil {
			return nil, nil, fmt.Errorf("%w: no model to generate with", engine.ErrClosed)
		}
		return nil, p, nil
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
	src, h := p.Source, Head{ID: stream.NewID(api.Prefix), Model: g.Model}
	var f Framer
	switch {
	case src != nil:
	case api.Choices != nil && g.NumChoices() > 1:
		src, f, err = api.Choices(b, g, h.ID)
	default:
		src, h, err = e.local(b, g, h.ID)
	}
	if err != nil {
		api.Refuse(w, err)
		return
	}
	if f == nil {
		f = p.Frame(h)
	}
	st := &run{api: api, src: src, f: f}
	if g.Stream {
		st.Retained = e.NewRetainedFor(h.ID)
		st.Retained.Keeps(src.Keeps())
		e.stream(w, r, st)
		return
	}
	e.whole(w, r, st)
}

// whole answers with the whole response once the generation has ended.
func (e *Env) whole(w http.ResponseWriter, r *http.Request, st *run) {
	gen, err := st.src.Start(r.Context())
	if err != nil {
		st.api.Refuse(w, err)
		return
	}
	st.f.Attach(nil)
	st.f.Start()
	end := st.pump(gen, e.PumpConfig(false), e.Drain)
	switch {
	case end.ClientGone:
		return
	case end.Err != nil:
		st.api.Refuse(w, end.Err)
		return
	}
	st.f.End(end)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(st.f.Body())
}

// stream serves a streaming response. What precedes the first text goes out
// at once: the client knows it was accepted. The stream is retained for a
// reconnect when the server keeps streams.
func (e *Env) stream(w http.ResponseWriter, r *http.Request, st *run) {
	gen, release, err := e.start(r, st)
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

// start begins a new stream's generation under st's lease and, once its
// source took it, keeps st for reconnects when the server retains streams.
// A nil generation with a nil error: the client left before it started,
// and there is no one to answer. release ends the lease.
func (e *Env) start(r *http.Request, st *run) (gen Generation, release func(), err error) {
	ctx, release, err := st.Acquire(r.Context())
	if err != nil {
		return nil, nil, nil
	}
	gen, err = st.src.Start(ctx)
	if err != nil {
		release()
		return nil, nil, err
	}
	if e.Streams != nil {
		e.Streams.Add(st)
	}
	return gen, release, nil
}

// pump drains gen into the stream and ends it, unless the client left
// before the generation finished: then the stream stays resumable.
func (e *Env) pump(st *run, gen Generation) {
	end := st.pump(gen, e.PumpConfig(true), e.Drain)
	if end.CutShort {
		return
	}
	e.end(st, end)
}

// pump drains gen into the framer and tells a Pumper how it ended.
func (st *run) pump(gen Generation, cfg stream.PumpConfig, drain <-chan struct{}) stream.Ending {
	end := gen.Pump(st.f, cfg, drain)
	if p, ok := st.f.(Pumper); ok {
		p.Pumped(end)
	}
	return end
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
func (e *Env) end(st *run, end stream.Ending) {
	st.done = true
	st.f.End(end)
	_ = st.f.Flush()
}

// Resume replays the events of api's stream id after Last-Event-ID and,
// when the generation was cut short by a disconnect, continues it
// (Source.Continue: locally from the tokens already produced, in relay
// mode through the upstream's own resume): the client sees one response,
// generated once.
func (e *Env) Resume(w http.ResponseWriter, r *http.Request, api *API, id string) {
	rc, err := e.Streams.Open(r, id, api.owns)
	e.reconnect(w, api, rc, err)
}

// ResumeAny is Resume for a route that names no API (GET /v1/streams/{id}
// in relay mode): the stream may be any driven API's; api answers in its
// shape and headers.
func (e *Env) ResumeAny(w http.ResponseWriter, r *http.Request, api *API, id string) {
	rc, err := e.Streams.Open(r, id, func(s Resumable) bool { _, ok := s.(*run); return ok })
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
	var gen Generation
	ctx := rc.Ctx
	if !st.done {
		if gen, err = st.src.Continue(rc.Ctx); err != nil {
			api.Refuse(w, err)
			return
		}
		if gen != nil {
			ctx = gen.Context()
		}
	}
	SetHeaders(w, api.header(st.ID, true))
	st.f.Attach(e.Replay(ctx, w, rc))
	switch {
	case gen != nil:
		e.pump(st, gen)
	case !st.done: // nothing left to generate: only the ending is missing
		e.end(st, st.src.Rest(st.f))
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

// local is the local engine as a response's Source: the request as
// submitted (seed fixed), the TextStream holding every token consumed, and
// the reply's reasoning split and tool-call parse.
type local struct {
	e      *Env
	b      *stream.Backend
	g      *stream.GenRequest
	req    engine.Request
	ts     *stream.TextStream
	tools  *stream.ToolStream   // nil without tools
	reason *stream.ReasonStream // nil for a model without reasoning markup
}

// local prepares g on b as response id and returns its source and the
// head of its response.
func (e *Env) local(b *stream.Backend, g *stream.GenRequest, id string) (*local, Head, error) {
	req, err := stream.Prepare(b, g)
	if err != nil {
		return nil, Head{}, err
	}
	req.ID = id
	// After Prepare, which fixed the template's call format.
	tools := stream.NewToolStream(g)
	l := &local{e: e, b: b, g: g, req: req, tools: tools, reason: stream.NewReasonStream(b, g, req.Prompt),
		ts: stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)}
	return l, Head{ID: id, Model: e.ModelName(g.Model), Backend: b, Req: req, Lazy: tools != nil}, nil
}

func (l *local) Start(ctx context.Context) (Generation, error) {
	gen, err := l.b.Submit(ctx, l.req)
	if err != nil {
		return nil, err
	}
	return localGen{l, gen}, nil
}

// Continue submits the rest from the tokens already produced
// (stream.Continue), never sampling one twice.
func (l *local) Continue(ctx context.Context) (Generation, error) {
	b, err := l.e.LoadBackend()
	if err != nil {
		return nil, err
	}
	gen, err := stream.Continue(ctx, b, l.g, l.req, l.ts.IDs())
	if err != nil || gen == nil {
		return nil, err
	}
	return localGen{l, gen}, nil
}

// Rest ends a resumed stream whose every token was produced before the
// disconnect: the text the TextStream still held goes through the
// reasoning split and the tool parse, and the stream ends as at the token
// limit.
func (l *local) Rest(f Framer) stream.Ending {
	_ = l.reason.Use(l.tools.Use(f), f).Text(l.ts.Finish(), nil) // a failed write shows in the ending's
	return l.ending(l.tools.End(l.reason.End(stream.Outcome{Finish: "length"})))
}

func (l *local) Keeps() int { return l.g.RetainedBytes(l.req) }

// ending is the Ending of a local outcome: the stream's own counts.
func (l *local) ending(out stream.Outcome) stream.Ending {
	ids := l.ts.IDs()
	return stream.Ending{Finish: out.Finish, Err: out.Err, ClientGone: out.ClientGone, CutShort: out.CutShort,
		Usage: true, PromptTokens: len(l.req.Prompt), CompletionTokens: len(ids), CachedTokens: out.Result.CachedTokens,
		ReasoningTokens: out.ReasoningTokens, StopSequence: l.ts.Matched(), IDs: ids}
}

// localGen is one submission of a local source to the engine.
type localGen struct {
	*local
	gen *stream.Generation
}

func (g localGen) Context() context.Context { return g.gen.Context() }

// Pump drains the engine's tokens through the reply's text, reasoning and
// tool-call parse into f.
func (g localGen) Pump(f Framer, cfg stream.PumpConfig, drain <-chan struct{}) stream.Ending {
	em := g.reason.Use(g.tools.Use(f), f)
	return g.ending(g.tools.End(g.reason.End(stream.Pump(g.gen, g.ts, em, cfg, drain))))
}
