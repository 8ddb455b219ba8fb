package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// corsMaxAge is how long a browser may cache a preflight answer, in seconds.
const corsMaxAge = "600"

// withCORS answers browsers from the origins in cfg.CORSOrigins ("*" is any
// origin), which are also the only other sites the edge guard lets a page
// call from (guard.go): a preflight (OPTIONS with Access-Control-Request-Method) is
// answered 204 here, before routing and without an API key, as browsers send
// none on a preflight; any other request from an allowed origin gets its
// Access-Control-Allow-Origin, and still needs its key. With no origins
// configured (the default) nothing changes: no CORS header is ever sent.
func (s *Server) withCORS(h http.Handler) http.Handler {
	origins := s.cfg.CORSOrigins
	if len(origins) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		allowed := origin != "" && s.corsAllows(origin)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if allowed {
			// The origin itself rather than "*": with "*" a browser refuses
			// a request that carries an Authorization header's credentials mode.
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Expose-Headers", "X-Sluice-Stream-Id, Retry-After, Request-Id")
		}
		if !preflight {
			h.ServeHTTP(w, r)
			return
		}
		if allowed {
			hdr.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			hdr.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			// "*" in Allow-Headers does not cover Authorization: name what was asked.
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				hdr.Set("Access-Control-Allow-Headers", req)
			}
			hdr.Set("Access-Control-Max-Age", corsMaxAge)
		}
		// A browser's preflight from another site that --cors-origin does
		// not name never gets here (the edge guard answers it 403,
		// guard.go); what else asks gets the 204 without allow headers.
		w.WriteHeader(http.StatusNoContent)
	})
}

// corsAllows reports whether --cors-origin lets a page on origin call the
// server (the edge guard lets the same origins through, guard.go).
func (s *Server) corsAllows(origin string) bool {
	return slices.Contains(s.cfg.CORSOrigins, "*") || slices.Contains(s.cfg.CORSOrigins, origin)
}

// validCORSOrigin accepts "*" or an origin as browsers send it:
// scheme://host[:port], no path.
func validCORSOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") {
		return fmt.Errorf("cors-origin %q must be * or scheme://host[:port] (no path, no trailing slash)", o)
	}
	return nil
}
