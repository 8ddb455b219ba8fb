package server

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/server/stream"
)

// openAIErrors answers the mux's own refusals (no route: 404, a route
// without that method: 405) in OpenAI's error shape, as every other error
// of the API is; clients parse one shape. The Allow header the mux sets on
// a 405 is kept.
func openAIErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status != http.StatusMethodNotAllowed {
			writeError(w, fmt.Errorf("%w: %s %s", stream.ErrRouteNotFound, r.Method, r.URL.Path))
			return
		}
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		writeError(w, fmt.Errorf("%w: %s %s (allowed: %s)", stream.ErrMethodNotAllowed, r.Method, r.URL.Path, probe.header.Get("Allow")))
	})
}

// statusProbe records what the mux's fallback handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }
func (p *statusProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

func (p *statusProbe) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}
