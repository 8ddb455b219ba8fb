package httpedge

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// SSE is the one Server-Sent Events writer of every HTTP stream: OpenAI's
// chat and completions chunks (unnamed events), the Anthropic Messages and
// OpenAI Responses streams (named events). Each event is framed
//
//	id: 7            only on a resumable stream (NewSSE)
//	event: NAME      only for a named event
//	data: JSON
//	<blank line>
//
// and goes through the stream's EventLog, so what a client missed can be
// replayed; Flush writes the frames this connection has not seen yet and
// flushes them to the socket under a write deadline kept between
// WriteTimeout/2 and WriteTimeout ahead of now (there is no whole-response
// timeout: a long stream must not be cut). After a failed write every Flush
// returns the error and nothing more is written.
type SSE struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	ctx          context.Context
	writeTimeout time.Duration
	deadline     time.Time
	noDeadline   bool // the ResponseWriter cannot take deadlines
	log          *EventLog
	ids          bool   // frames carry "id:" (a resumable stream)
	sent         int64  // last event id written to this connection
	comment      string // a comment waiting for the next Flush
	frame        []byte
	err          error
}

// ErrClientGone marks a write refused because the client left.
var ErrClientGone = errors.New("client gone")

// SetHeaders sends the streaming headers. The body is never compressed:
// gzip buffers by design, and no middleware adds it.
func SetHeaders(w http.ResponseWriter, header map[string]string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range header {
		h.Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
}

// StartSSE sends the streaming headers and returns a writer whose events
// carry no id and are kept only until written; ctx ends when the client
// leaves.
func StartSSE(ctx context.Context, w http.ResponseWriter, writeTimeout time.Duration, header map[string]string) *SSE {
	SetHeaders(w, header)
	s := NewSSE(ctx, w, NewEventLog(0), writeTimeout, 0)
	s.ids = false
	return s
}

// NewSSE is a writer of a resumable stream (the headers are the caller's):
// every event carries its id in log, and this connection has seen the
// events up to sent (0 for a new stream, Last-Event-ID for a resume).
func NewSSE(ctx context.Context, w http.ResponseWriter, log *EventLog, writeTimeout time.Duration, sent int64) *SSE {
	return &SSE{w: w, rc: http.NewResponseController(w), ctx: ctx, writeTimeout: writeTimeout, log: log, ids: true, sent: sent}
}

// Context ends when the client leaves.
func (s *SSE) Context() context.Context { return s.ctx }

// Event frames payload (one line of JSON) as the next event, named when name
// is not "", and records it in the log.
func (s *SSE) Event(name string, payload []byte) {
	f := s.frame[:0]
	if s.ids {
		f = append(f, "id: "...)
		f = strconv.AppendInt(f, s.log.NextID(), 10)
		f = append(f, '\n')
	}
	if name != "" {
		f = append(f, "event: "...)
		f = append(f, name...)
		f = append(f, '\n')
	}
	f = append(f, "data: "...)
	f = append(f, payload...)
	f = append(f, "\n\n"...)
	s.log.Add(f)
	s.frame = f
	if s.err != nil { // nobody will flush: keep the log within its cap
		s.log.Trim(s.log.LastID())
	}
}

// Comment sends an SSE comment with the next Flush, after the events, which
// clients ignore and proxies see (the keep-alive). It is one line with no
// blank line after it: a blank line ends an event, and a decoder that keeps
// the last event id (the OpenAI and Anthropic Python SDKs share one)
// dispatches a blank line after an id'd event as an event with empty data,
// which the OpenAI SDK then fails to parse as JSON. The comment becomes part
// of the next event's block instead, where every decoder skips it.
func (s *SSE) Comment(text string) { s.comment = text }

// Err is the first write failure, nil while the client reads.
func (s *SSE) Err() error { return s.err }

// Sent is the id of the last event written to this connection.
func (s *SSE) Sent() int64 { return s.sent }

// Flush writes every frame this connection has not seen, then the pending
// comment, and flushes them to the socket.
func (s *SSE) Flush() error {
	if s.err != nil {
		return s.err
	}
	if s.ctx.Err() != nil {
		s.err = ErrClientGone
		return s.err
	}
	frames, err := s.log.After(s.sent)
	if err != nil {
		s.err = err // frames were dropped before this client saw them
		return err
	}
	if len(frames) == 0 && s.comment == "" {
		return nil
	}
	if err := s.extendDeadline(); err != nil {
		s.err = err
		return err
	}
	if _, err = s.w.Write(frames); err == nil && s.comment != "" {
		s.frame = append(append(append(s.frame[:0], ": "...), s.comment...), '\n')
		_, err = s.w.Write(s.frame)
	}
	if err == nil {
		err = s.rc.Flush()
	}
	s.comment = ""
	s.sent = s.log.LastID()
	s.log.Trim(s.sent)
	if err != nil {
		s.err = errors.Join(ErrClientGone, err)
	}
	return s.err
}

// extendDeadline keeps the connection's write deadline between WriteTimeout/2
// and WriteTimeout ahead of now: each write is bounded without re-arming the
// deadline on every token.
func (s *SSE) extendDeadline() error {
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
