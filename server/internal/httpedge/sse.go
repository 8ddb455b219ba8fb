package httpedge

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// SSE writes named events ("event: NAME\ndata: JSON\n\n"), the framing of
// the Anthropic Messages and OpenAI Responses streams. Event and Comment
// buffer; Flush writes the buffer and flushes it to the socket under a write
// deadline kept between WriteTimeout/2 and WriteTimeout ahead of now (there
// is no whole-response timeout: a long stream must not be cut). After a
// failed write every Flush returns the error and nothing more is written.
type SSE struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	ctx          context.Context
	writeTimeout time.Duration
	deadline     time.Time
	noDeadline   bool // the ResponseWriter cannot take deadlines
	buf          []byte
	err          error
}

// ErrClientGone marks a write refused because the client left.
var ErrClientGone = errors.New("client gone")

// StartSSE sends the streaming headers and returns the writer; ctx ends when
// the client leaves. The body is never compressed: gzip buffers by design.
func StartSSE(ctx context.Context, w http.ResponseWriter, writeTimeout time.Duration, header map[string]string) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range header {
		h.Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, rc: http.NewResponseController(w), ctx: ctx, writeTimeout: writeTimeout}
}

// Event buffers one event; payload is one line of JSON.
func (s *SSE) Event(name string, payload []byte) {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, "\n\n"...)
}

// Comment buffers an SSE comment, which clients ignore and proxies see.
func (s *SSE) Comment(text string) {
	s.buf = append(s.buf, ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, "\n\n"...)
}

// Err is the first write failure, nil while the client reads.
func (s *SSE) Err() error { return s.err }

// Flush writes what was buffered.
func (s *SSE) Flush() error {
	if s.err != nil {
		s.buf = s.buf[:0]
		return s.err
	}
	if s.ctx.Err() != nil {
		s.err = ErrClientGone
		return s.err
	}
	if len(s.buf) == 0 {
		return nil
	}
	err := s.extendDeadline()
	if err == nil {
		_, err = s.w.Write(s.buf)
	}
	if err == nil {
		err = s.rc.Flush()
	}
	s.buf = s.buf[:0]
	if err != nil {
		s.err = errors.Join(ErrClientGone, err)
	}
	return s.err
}

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
