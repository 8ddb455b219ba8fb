package server

import (
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// handleGenerate serves POST /v1/chat/completions and /v1/completions
// through the HTTP driver (httpedge.Env.Serve; chatAPI is their parser and
// framer). The same POST carrying X-Sluice-Stream-Id and Last-Event-ID
// resumes a stream.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request, api *httpedge.API) {
	if id := r.Header.Get(streamIDHeader); id != "" && r.Header.Get(lastEventIDHeader) != "" {
		s.resume(w, r, id)
		return
	}
	s.env.Serve(w, r, api)
}

func (s *Server) pumpConfig(streaming bool) stream.PumpConfig {
	pc := stream.PumpConfig{StallTimeout: s.cfg.StallTimeout}
	if streaming {
		pc.FlushInterval, pc.KeepAlive = s.cfg.FlushInterval, s.cfg.KeepAlive
	}
	return pc
}

func (s *Server) handleStreamGet(w http.ResponseWriter, r *http.Request) {
	s.resume(w, r, r.PathValue("id"))
}

// resume replays the events after Last-Event-ID and, when the generation was
// cut short by a disconnect, continues it from the tokens already produced
// (the driver's Resume, for one choice or several).
func (s *Server) resume(w http.ResponseWriter, r *http.Request, id string) {
	s.env.Resume(w, r, s.chatAPI(true), id)
}

// collector is the Emitter of a non-streaming response.
type collector struct {
	text  []byte
	calls []toolCallJSON   // toolcalls.go
	lps   []engine.Logprob // logprobs.go: one per id of the TextStream
}

func (c *collector) Text(s string, _ []int32) error { c.text = append(c.text, s...); return nil }
func (c *collector) KeepAlive() error               { return nil }
func (c *collector) Flush() error                   { return nil }

// responseID is the id of a chat.completion or text_completion response.
func responseID(chat bool) string {
	if chat {
		return stream.NewID("chatcmpl-")
	}
	return stream.NewID("cmpl-")
}
