package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The edge guard refuses, before routing and on every route, the two kinds
// of request a hostile web page can make a browser send to a server it
// cannot reach itself:
//
//   - DNS rebinding: a page on evil.example re-resolves its own name to
//     127.0.0.1 and then reads the API as same-origin. The browser still
//     sends "Host: evil.example", so a loopback-bound server answers only
//     the loopback names (and --allowed-hosts).
//   - Cross-site requests: a page on any site may POST text/plain (a
//     "simple" request, no preflight) to any address, which the API would
//     parse as JSON. Browsers mark such requests with Origin and
//     Sec-Fetch-Site; only same-origin ones, and origins --cors-origin
//     allows, pass.
//
// Clients that are not browsers (curl, SDKs) send neither Origin nor
// Sec-Fetch-Site and pass unchanged; so does the server's own page.

// hostRule is which Host header names the server answers.
type hostRule struct {
	on    bool            // off: any Host
	names map[string]bool // lower case, no port, no brackets
}

// newHostRule: on a loopback address, the loopback names plus allowed; on
// an exposed one, only a configured list turns the check on (the names a
// remote client uses are not known here). "*" turns it off.
func newHostRule(addr string, allowed []string) hostRule {
	r := hostRule{on: Loopback(addr) || len(allowed) > 0, names: map[string]bool{}}
	for _, h := range allowed {
		if h == "*" {
			return hostRule{}
		}
		r.names[normalHost(h)] = true
	}
	return r
}

// allows reports whether the Host header host may be answered. An empty
// Host (HTTP/1.0) comes from no browser. Only the literal name localhost
// and loopback IP literals pass without a list: an IP literal cannot be
// rebound, and no other name is sure to resolve to this machine.
func (r hostRule) allows(host string) bool {
	if !r.on || host == "" {
		return true
	}
	h := normalHost(host)
	if h == "localhost" || r.names[h] {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// normalHost strips the port and IPv6 brackets and lowers the case.
func normalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// Loopback reports whether addr (host:port) listens on loopback only:
// localhost or a loopback IP. An empty host (":8080") is every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validAllowedHost accepts "*" or a bare host name or IP (a port is
// ignored when matching, so one is refused here rather than silently
// dropped).
func validAllowedHost(h string) error {
	if h == "*" {
		return nil
	}
	if h == "" || (strings.ContainsAny(h, "/:@ \t") && net.ParseIP(strings.Trim(h, "[]")) == nil) {
		return fmt.Errorf("allowed-hosts %q must be * or a host name or IP without scheme, port or path", h)
	}
	return nil
}

// crossSite returns why r is a cross-site browser request the server must
// refuse, or "" when it may pass. Sec-Fetch-Site, which a page cannot set,
// decides where the browser sends it; older browsers send only Origin,
// compared with the Host the request went to (as net/http's
// CrossOriginProtection does). A top-level GET navigation passes: a link
// from another site to the web page opens it for the user, and what it
// shows goes to the user, not to the linking page.
func (s *Server) crossSite(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin != "" && s.corsAllows(origin) {
		return ""
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none": // "none": typed in the address bar, a bookmark
		return ""
	case "":
		if origin == "" {
			return "" // not a browser
		}
		if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
			return ""
		}
	default:
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" {
			return ""
		}
		if origin == "" {
			return fmt.Sprintf("a %s request (Sec-Fetch-Site) is refused; --cors-origin names the origins a page may call this server from", site)
		}
	}
	return fmt.Sprintf("a cross-site request from origin %q is refused; --cors-origin names the origins a page may call this server from", origin)
}

// withEdgeGuard wraps the whole handler (CORS included) in the two checks.
func (s *Server) withEdgeGuard(h http.Handler) http.Handler {
	hosts := newHostRule(s.cfg.Addr, s.cfg.AllowedHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.allows(r.Host) {
			forbid(w, r, "host_not_allowed", fmt.Sprintf(
				"Host %q is not served: this server listens on loopback and answers localhost, 127.0.0.1 and [::1] (--allowed-hosts adds names)", r.Host))
			return
		}
		if why := s.crossSite(r); why != "" {
			forbid(w, r, "cross_site_request", why)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// forbid answers 403 in the route's error shape: Anthropic's on the
// Messages API, OpenAI's elsewhere. Neither check is a row of the stream
// core's error table: both happen here, before any route, and no other
// transport has them. The connection closes after the answer: net/http
// would otherwise read the refused request's unread body first, with no
// deadline (the body timeout is inside the guard), so a body that never
// arrives would hold the 403 back.
func forbid(w http.ResponseWriter, r *http.Request, code, msg string) {
	w.Header().Set("Connection", "close")
	if r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/") {
		body, _ := json.Marshal(map[string]any{
			"type":  "error",
			"error": map[string]string{"type": "permission_error", "message": msg, "code": code},
		})
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(body)
		return
	}
	writeError(w, &APIError{Status: http.StatusForbidden, Message: msg, Type: "invalid_request_error", Code: &code})
}
