package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// sseWriter is the SSE Emitter. Every event carries an id: and goes through
// the stream's eventLog, so what a client missed can be replayed; Flush
// writes the frames this connection has not seen yet.
//
//	id: 7
//	data: {"id":"chatcmpl-…","object":"chat.completion.chunk",…}
//	<blank line>
type sseWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	ctx          context.Context
	writeTimeout time.Duration
	log          *eventLog
	format       *chunkFormat
	sent         int64     // last event id written to this connection
	keepAlive    bool      // a keep-alive comment waits for the next Flush
	err          error     // first write failure; nothing is written after it
	deadline     time.Time // the connection's current write deadline
	noDeadline   bool      // the ResponseWriter cannot take deadlines
	frame        []byte
	payload      []byte
	lps          []engine.Logprob // the next Text's logprobs (logprobs.go)
}

// errClientGone marks a write refused because the client left.
var errClientGone = errors.New("server: client gone")

var (
	keepAliveComment = []byte(": keep-alive\n\n")
	doneData         = []byte("[DONE]")
)

// setSSEHeaders sends the streaming headers. The body is never compressed:
// gzip buffers by design, and no middleware in this package adds it.
func setSSEHeaders(w http.ResponseWriter, streamID string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set(streamIDHeader, streamID)
	w.WriteHeader(http.StatusOK)
}

func newSSEWriter(ctx context.Context, w http.ResponseWriter, log *eventLog, f *chunkFormat, writeTimeout time.Duration, sent int64) *sseWriter {
	return &sseWriter{
		w: w, rc: http.NewResponseController(w), ctx: ctx,
		writeTimeout: writeTimeout, log: log, format: f, sent: sent,
	}
}

// event frames payload as the next event and records it in the log.
func (s *sseWriter) event(payload []byte) {
	f := append(s.frame[:0], "id: "...)
	f = strconv.AppendInt(f, s.log.nextID(), 10)
	f = append(f, "\ndata: "...)
	f = append(f, payload...)
	f = append(f, "\n\n"...)
	s.log.add(f)
	s.frame = f
	if s.err != nil { // nobody will flush: keep the log within its cap
		s.log.trim(s.log.lastID())
	}
}

// Text implements stream.Emitter: one content chunk. The ids are not sent
// (OpenAI's chunks carry text); with no text there is no chunk.
func (s *sseWriter) Text(text string, ids []int32) error {
	if len(s.lps) > 0 {
		return s.textLogprobs(text, ids)
	}
	if text == "" {
		return s.err
	}
	s.payload = s.format.content(s.payload[:0], text)
	s.event(s.payload)
	return s.err
}

// KeepAlive implements stream.Emitter: a comment, which clients ignore and proxies see.
func (s *sseWriter) KeepAlive() error {
	s.keepAlive = true
	return s.err
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

// extendDeadline keeps the connection's write deadline between WriteTimeout/2
// and WriteTimeout ahead of now: each write is bounded without re-arming the
// deadline on every token.
func (s *sseWriter) extendDeadline() error {
	if s.writeTimeout <= 0 || s.noDeadline {
		return nil
	}
	now := time.Now()
	if s.deadline.Sub(now) > s.writeTimeout/2 {
		return nil
	}
	s.deadline = now.Add(s.writeTimeout)
	err := s.rc.SetWriteDeadline(s.deadline)
	if errors.Is(err, http.ErrNotSupported) {
		s.noDeadline, err = true, nil
	}
	return err
}

// Flush implements stream.Emitter: it writes every frame this connection has not
// seen, under a write deadline kept at most WriteTimeout ahead (a long stream
// has no overall write timeout; see extendDeadline), and flushes them to the
// socket.
func (s *sseWriter) Flush() error {
	if s.err != nil {
		return s.err
	}
	if s.ctx.Err() != nil {
		s.err = errClientGone
		return s.err
	}
	frames, err := s.log.after(s.sent)
	if err != nil {
		s.err = err // frames were dropped before this client saw them
		return err
	}
	if len(frames) == 0 && !s.keepAlive {
		return nil
	}
	if err := s.extendDeadline(); err != nil {
		s.err = err
		return err
	}
	if _, err = s.w.Write(frames); err == nil && s.keepAlive {
		_, err = s.w.Write(keepAliveComment)
	}
	if err == nil {
		err = s.rc.Flush()
	}
	s.keepAlive = false
	s.sent = s.log.lastID()
	s.log.trim(s.sent)
	if err != nil {
		s.err = errors.Join(errClientGone, err)
	}
	return s.err
}
