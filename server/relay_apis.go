package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice/server/anthropic"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/relay"
	"github.com/sluicehq/sluice/server/responses"
	"github.com/sluicehq/sluice/server/stream"
)

// The Anthropic Messages and OpenAI Responses APIs in relay mode: the
// request, validated as a local one is, goes to the upstream's same
// endpoint; its text comes back through the same stream writer as chat's
// (stream.PumpText) and is framed by the API's own package, so the
// guarantees are chat's: the client's leaving closes the upstream, the
// upstream's timeouts and retries, keep-alives (Anthropic's ping event),
// stop strings held back here, replay from this server's event log, and
// upstream failures as the API's in-band error events.

// relayFramer is an API's framing of a relayed stream and of its whole
// (non-streaming) response.
type relayFramer interface {
	relayEdge
	SetModel(name string)
	// Body is the whole response, once its events went to it attached to
	// no connection (Attach(nil)) and End settled it.
	Body() []byte
}

// relayAPIShape is one API as the relay serves it.
type relayAPIShape struct {
	path    string
	prefix  string   // of the stream ids this server gives
	refused []string // request fields the relay cannot carry (relayForward)
	// parse validates a request of ctx's tenant (auth.Tenant: the stored
	// responses a Responses request may continue are its key's).
	parse func(ctx context.Context, body []byte, id string) (*stream.GenRequest, relayFramer, error)
	// refuse answers an error before the first byte in the API's shape.
	refuse func(http.ResponseWriter, error)
	// requestID: the streaming headers name the stream in request-id too,
	// as Anthropic's do.
	requestID bool
}

// framing adapts an API's parser to relayAPIShape.parse (a failed parse
// returns a nil framer, not a typed nil in the interface).
func framing[F relayFramer](parse func(context.Context, []byte, string) (*stream.GenRequest, F, error)) func(context.Context, []byte, string) (*stream.GenRequest, relayFramer, error) {
	return func(ctx context.Context, body []byte, id string) (*stream.GenRequest, relayFramer, error) {
		g, f, err := parse(ctx, body, id)
		if err != nil {
			return nil, nil, err
		}
		return g, f, nil
	}
}

var messagesAPI = relayAPIShape{
	path: relay.PathMessages, prefix: "msg_",
	parse: framing(func(_ context.Context, body []byte, id string) (*stream.GenRequest, *anthropic.Relayed, error) {
		return anthropic.ParseRelayed(body, id) // a Messages request names nothing stored
	}),
	refuse: func(w http.ResponseWriter, err error) {
		var se *relay.StatusError
		if errors.As(err, &se) && se.PassThrough() {
			anthropic.WriteUpstreamError(w, se.Status, se.Type, se.Code, se.Message)
			return
		}
		anthropic.WriteError(w, err)
	},
	requestID: true,
}

// relayCountTokens serves POST /v1/messages/count_tokens in relay mode: the
// request is validated as a local one, then the upstream's own count_tokens
// answers it (only the upstream has the model's tokenizer); an upstream
// without the endpoint is a 404 upstream_endpoint_missing in Anthropic's shape.
func (s *Server) relayCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		messagesAPI.refuse(w, err)
		return
	}
	g, err := anthropic.ParseCount(body)
	if err != nil {
		messagesAPI.refuse(w, err)
		return
	}
	req, err := s.relayForward(body, g, relay.PathCountTokens, nil)
	if err != nil {
		messagesAPI.refuse(w, err)
		return
	}
	raw, err := s.relay.Call(r.Context(), req)
	if err != nil {
		if r.Context().Err() == nil { // else the client left: nobody to tell
			messagesAPI.refuse(w, err)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// responsesAPI keeps finished responses in store (the local API's kind of
// store, the same bounds), for GET /v1/responses/{id} and
// previous_response_id.
func responsesAPI(store *responses.Store) relayAPIShape {
	return relayAPIShape{
		path: relay.PathResponses, prefix: "resp_", refuse: writeRelayError,
		parse: framing(func(ctx context.Context, body []byte, id string) (*stream.GenRequest, *responses.Relayed, error) {
			return responses.ParseRelayed(ctx, body, id, store)
		}),
	}
}

// relayForwarder is a framer that rewrites the upstream's request
// (responses.Relayed: previous_response_id expanded, store false).
type relayForwarder interface {
	Forward(fields map[string]json.RawMessage)
}

// relayResponses serves GET and DELETE /v1/responses/{id} in relay mode:
// the relay's own stored responses, and with stream=true the stream from
// this server's event log (starting_after a sequence number), continued or
// ended as relayResume does.
func (s *Server) relayResponses(mux *http.ServeMux, store *responses.Store) {
	h := responses.New(s.edgeEnv(), store)
	mux.Handle("GET /v1/responses/{id}", s.api(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "true" {
			h.Get(w, r)
			return
		}
		last, err := responses.StartingAfter(r)
		if err != nil {
			writeError(w, err)
			return
		}
		id := r.PathValue("id")
		rc, err := s.store.shared().OpenAfter(r, id, last, func(o httpedge.Resumable) bool {
			st, ok := o.(*relayState)
			if !ok {
				return false
			}
			_, ok = st.relay.edge.(*responses.Relayed)
			return ok
		})
		if err != nil {
			if r.Context().Err() == nil {
				writeError(w, err)
			}
			return
		}
		s.relayContinue(rc.Ctx, w, rc.State.(*relayState), id, rc.Last, rc.Release)
	}))
	mux.Handle("DELETE /v1/responses/{id}", s.api(h.Delete))
}

// relayAPI serves an API's POST in relay mode; with X-Sluice-Stream-Id and
// Last-Event-ID it resumes.
func (s *Server) relayAPI(w http.ResponseWriter, r *http.Request, api relayAPIShape) {
	if id := r.Header.Get(streamIDHeader); id != "" && r.Header.Get(lastEventIDHeader) != "" {
		s.relayResume(w, r, id)
		return
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		api.refuse(w, err)
		return
	}
	id := stream.NewID(api.prefix)
	g, f, err := api.parse(r.Context(), body, id)
	if err != nil {
		api.refuse(w, err)
		return
	}
	req, err := s.relayForward(body, g, api.path, api.refused)
	if err != nil {
		api.refuse(w, err)
		return
	}
	if fw, ok := f.(relayForwarder); ok {
		fw.Forward(req.Body)
	}
	f.SetModel(g.Model)
	if !g.Stream {
		s.relayWhole(w, r, g, req, f, api.refuse)
		return
	}
	st := &relayState{Retained: httpedge.NewRetained(id, s.relayLog()), ts: stream.NewTextOnlyStream(g.Stop),
		relay: &relayCursor{model: g.Model, edge: f}}
	st.Keeps(g.RetainedBytes())
	s.relayStream(w, r, st, req, api)
}
