package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/server/stream"
)

// bodyTimeoutError is a request body that did not arrive within
// Config.BodyTimeout. It is stream.ErrBodyTimeout, a 408 (request_timeout):
// the client was too slow, its request was not malformed, and a client that
// retries on 408 may send it again. The message names the limit and the flag.
type bodyTimeoutError struct{ d time.Duration }

func (e bodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %v (--body-timeout)", e.d)
}

func (bodyTimeoutError) Unwrap() error { return stream.ErrBodyTimeout }

// withBodyTimeout puts a read deadline on the connection when the handler
// starts, for its request's body. It bounds the body alone and never the
// response: net/http clears the connection's read deadline itself the
// moment the body reaches its end (before its background read, which
// watches for the client leaving, starts), so a stream may then run for
// hours. A body that stops short keeps the deadline, and so does the
// discard of its unread rest that net/http does before writing the error's
// headers: that fails at once and the connection is closed. The next
// request on a kept-alive connection gets ReadHeaderTimeout's deadline from
// net/http.
//
// A request with no body (GET, Content-Length 0) is left alone.
func (s *Server) withBodyTimeout(h http.Handler) http.Handler {
	d := s.cfg.BodyTimeout
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)); err == nil {
			r.Body = deadlineBody{r.Body, d}
		} // else a writer without deadlines (a test recorder): nothing to bound
		h.ServeHTTP(w, r)
	})
}

// deadlineBody turns the deadline's error into a bodyTimeoutError.
type deadlineBody struct {
	io.ReadCloser
	d time.Duration
}

func (b deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = bodyTimeoutError{b.d}
	}
	return n, err
}
