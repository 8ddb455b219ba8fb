package server

import (
	"net/http"

	"github.com/sluicehq/sluice/server/anthropic"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/responses"
	"github.com/sluicehq/sluice/server/stream"
)

// edgeEnv lends the adapters of server/anthropic and server/responses what
// they need from the server, so neither reaches into it.
func (s *Server) edgeEnv() *httpedge.Env {
	return &httpedge.Env{
		Backend: s.backend.Load,
		CheckModel: func(name string) error {
			return stream.CheckModel(name, s.cfg.ModelID, s.cfg.Aliases)
		},
		ModelName:    s.modelName,
		Pump:         s.pumpConfig(true),
		Drain:        s.drain,
		MaxBodyBytes: s.cfg.MaxBodyBytes,
		WriteTimeout: s.cfg.WriteTimeout,
		WriteError:   writeError,
		Streams:      s.store.shared(),
		StreamBytes:  s.cfg.ResumeStreamBytes,
	}
}

// The Responses API's store keeps this many responses within this many
// bytes (the least recently used go first): enough for the conversations
// a few hundred clients continue, small beside the KV pool.
const (
	storedResponses     = 4096
	storedResponseBytes = 64 << 20
)

// moreRoutes adds the APIs beyond OpenAI's chat and completions.
func (s *Server) moreRoutes(mux *http.ServeMux) {
	env := s.env
	msgs := anthropic.New(env)
	mux.Handle("POST /v1/messages", s.guard(msgs.Messages, anthropic.WriteError))
	mux.Handle("POST /v1/messages/count_tokens", s.guard(msgs.CountTokens, anthropic.WriteError))
	resp := responses.New(env, responses.NewStore(storedResponses, storedResponseBytes))
	mux.Handle("POST /v1/responses", s.api(resp.Create))
	mux.Handle("GET /v1/responses/{id}", s.api(resp.Get))
	mux.Handle("DELETE /v1/responses/{id}", s.api(resp.Delete))
	mux.Handle("POST /tokenize", s.api(s.handleTokenize))
	mux.Handle("POST /detokenize", s.api(s.handleDetokenize))
}

// guard checks the API key, from "Authorization: Bearer" or x-api-key, and
// refuses in the route's own error shape. The key's tenant goes into the
// request's context (auth.Tenant): what the request creates is that key's.
func (s *Server) guard(h http.HandlerFunc, refuse func(http.ResponseWriter, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := s.keys.IdentifyHeader(r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		if !ok {
			refuse(w, stream.ErrUnauthorized)
			return
		}
		if !s.checkFields(w, r, refuse) { // fields.go
			return
		}
		h(w, r.WithContext(s.keys.WithTenant(r.Context(), tenant)))
	})
}
