package server

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
)

// sseWriter is the Emitter of OpenAI's chat and completions streams: it
// frames chunks (chunkFormat) and hands them to the one SSE writer
// (httpedge.SSE), whose events carry an id: and go through the stream's
// event log, so what a client missed can be replayed.
//
//	id: 7
//	data: {"id":"chatcmpl-…","object":"chat.completion.chunk",…}
//	<blank line>
type sseWriter struct {
	*httpedge.SSE
	ctx     context.Context
	format  *chunkFormat
	payload []byte
	lps     []engine.Logprob // the next Text's logprobs (logprobs.go)
}

var doneData = []byte("[DONE]")

// setSSEHeaders sends the streaming headers and names the stream for a resume.
func setSSEHeaders(w http.ResponseWriter, streamID string) {
	httpedge.SetHeaders(w, map[string]string{streamIDHeader: streamID})
}

func newSSEWriter(ctx context.Context, w http.ResponseWriter, log *httpedge.EventLog, f *chunkFormat, writeTimeout time.Duration, sent int64) *sseWriter {
	return &sseWriter{SSE: httpedge.NewSSE(ctx, w, log, writeTimeout, sent), ctx: ctx, format: f}
}

// event frames payload as the next (unnamed) event.
func (s *sseWriter) event(payload []byte) { s.SSE.Event("", s.format.withUsage(payload)) }

// Text implements stream.Emitter: one content chunk. The ids are not sent
// (OpenAI's chunks carry text); with no text there is no chunk.
func (s *sseWriter) Text(text string, ids []int32) error {
	if len(s.lps) > 0 {
		return s.textLogprobs(text, ids)
	}
	if text == "" {
		return s.Err()
	}
	s.payload = s.format.content(s.payload[:0], text)
	s.event(s.payload)
	return s.Err()
}

// Reasoning implements stream.ReasoningEmitter: one reasoning chunk.
func (s *sseWriter) Reasoning(text string) error {
	if text != "" {
		s.payload = s.format.reasoning(s.payload[:0], text)
		s.event(s.payload)
	}
	return s.Err()
}

// KeepAlive implements stream.Emitter: a comment, which clients ignore and proxies see.
func (s *sseWriter) KeepAlive() error {
	s.Comment("keep-alive")
	return s.Err()
}

func (s *sseWriter) role() {
	s.payload = s.format.role(s.payload[:0])
	s.event(s.payload)
}

func (s *sseWriter) finish(reason string) {
	s.payload = s.format.finish(s.payload[:0], reason)
	s.event(s.payload)
}

func (s *sseWriter) usage(u Usage) {
	s.payload = s.format.usage(s.payload[:0], u)
	s.event(s.payload)
}

// error records an in-band error; done must follow.
func (s *sseWriter) error(err error) {
	body, _ := toAPIError(err).MarshalJSON() // always marshals
	s.event(body)
}

func (s *sseWriter) done() { s.event(doneData) }
