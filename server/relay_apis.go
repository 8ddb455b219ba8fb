package server

import (
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

// relayParse is an API's parser in relay mode: parse validates the
// request as a local one is validated (one rule for both modes); then
// relayForward checks what only the relay refuses and names the served
// model, forward (when the API has one) rewrites what the upstream gets,
// and the upstream at path becomes the response's Source.
func (s *Server) relayParse(path string, refused []string,
	parse func(r *http.Request, body []byte) (*httpedge.Parsed, func(map[string]json.RawMessage), error)) func(*http.Request, []byte) (*httpedge.Parsed, error) {
	return func(r *http.Request, body []byte) (*httpedge.Parsed, error) {
		p, forward, err := parse(r, body)
		if err != nil {
			return nil, err
		}
		req, err := s.relayForward(body, p.Gen, path, refused)
		if err != nil {
			return nil, err
		}
		if forward != nil {
			forward(req.Body)
		}
		p.Source = &upstream{relay: s.relay, g: p.Gen, req: req, ts: stream.NewTextOnlyStream(p.Gen.Stop)}
		return p, nil
	}
}

// relayedMessagesAPI is the Messages API in relay mode.
func (s *Server) relayedMessagesAPI() *httpedge.API {
	return &httpedge.API{Name: "messages", Prefix: "msg_", Refuse: refuseMessages, IDHeader: "request-id", EventIDs: true,
		Parse: s.relayParse(relay.PathMessages, nil, func(_ *http.Request, body []byte) (*httpedge.Parsed, func(map[string]json.RawMessage), error) {
			p, err := anthropic.ParseRelayed(body) // a Messages request names nothing stored
			return p, nil, err
		})}
}

// refuseMessages answers a relayed Messages request's failure before the
// first byte: an upstream's refusal of the request as it answered, in
// Anthropic's shape.
func refuseMessages(w http.ResponseWriter, err error) {
	var se *relay.StatusError
	if errors.As(err, &se) && se.PassThrough() {
		anthropic.WriteUpstreamError(w, se.Status, se.Type, se.Code, se.Message)
		return
	}
	anthropic.WriteError(w, err)
}

// relayCountTokens serves POST /v1/messages/count_tokens in relay mode: the
// request is validated as a local one, then the upstream's own count_tokens
// answers it (only the upstream has the model's tokenizer); an upstream
// without the endpoint is a 404 upstream_endpoint_missing in Anthropic's shape.
func (s *Server) relayCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		refuseMessages(w, err)
		return
	}
	g, err := anthropic.ParseCount(body)
	if err != nil {
		refuseMessages(w, err)
		return
	}
	req, err := s.relayForward(body, g, relay.PathCountTokens, nil)
	if err != nil {
		refuseMessages(w, err)
		return
	}
	raw, err := s.relay.Call(r.Context(), req)
	if err != nil {
		if r.Context().Err() == nil { // else the client left: nobody to tell
			refuseMessages(w, err)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// relayedResponsesAPI is the Responses API in relay mode. It keeps
// finished responses in store (the local API's kind of store, the same
// bounds), for GET /v1/responses/{id} and previous_response_id, which the
// upstream never sees (responses.ParseRelayed's forward).
func (s *Server) relayedResponsesAPI(store *responses.Store) *httpedge.API {
	return &httpedge.API{Name: "responses", Prefix: "resp_", Refuse: writeRelayError, EventIDs: true,
		Parse: s.relayParse(relay.PathResponses, nil, func(r *http.Request, body []byte) (*httpedge.Parsed, func(map[string]json.RawMessage), error) {
			return responses.ParseRelayed(r.Context(), body, store)
		})}
}
