package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server/metrics"
)

// edgeCall sends one request as a browser or a client would: host, when
// set, replaces the Host header; header holds name/value pairs. It returns
// the status and the body.
func edgeCall(t *testing.T, method, url, host, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const edgeChat = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`

// TestHostGuard: a loopback-bound server (the default address) answers
// the loopback names only, plus --allowed-hosts, so a page that rebinds
// its own name to 127.0.0.1 cannot read the API; an exposed one checks
// only a configured list. Before the guard every Host was served.
func TestHostGuard(t *testing.T) {
	loop := newRig(t, []string{"a"}, 0, func(c *Config) { c.AllowedHosts = []string{"Sluice.Internal"} })
	for host, want := range map[string]int{
		"localhost": 200, "localhost:8080": 200, "127.0.0.1:9": 200, "127.8.0.1": 200, "[::1]:8080": 200,
		"sluice.internal:443": 200, "evil.example": 403, "evil.example:8080": 403, "localhost.evil.example": 403,
		"10.0.0.1": 403, "[2001:db8::1]:8080": 403, "localhost.": 403,
	} {
		if got, body := edgeCall(t, "POST", loop.url+"/v1/chat/completions", host, edgeChat); got != want {
			t.Errorf("Host %q: %d, want %d (%s)", host, got, want, body)
		} else if want == 403 && !strings.Contains(body, `"code":"host_not_allowed"`) {
			t.Errorf("Host %q: body %s", host, body)
		}
	}
	// /health too ("every route"), and the Messages API in its own shape.
	if got, _ := edgeCall(t, "GET", loop.url+"/health", "evil.example", ""); got != 403 {
		t.Errorf("GET /health with a foreign Host: %d", got)
	}
	_, body := edgeCall(t, "POST", loop.url+"/v1/messages", "evil.example", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	var anth struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &anth); err != nil || anth.Type != "error" || anth.Error.Type != "permission_error" {
		t.Errorf("/v1/messages refusal: %s", body)
	}

	exposed := newRig(t, []string{"a"}, 0, func(c *Config) { c.Addr = ":8080" })
	if got, _ := edgeCall(t, "GET", exposed.url+"/v1/models", "sluice.example.com", ""); got != 200 {
		t.Errorf("exposed server, any Host: %d", got)
	}
	listed := newRig(t, []string{"a"}, 0, func(c *Config) { c.Addr = "0.0.0.0:8080"; c.AllowedHosts = []string{"api.example"} })
	for host, want := range map[string]int{"api.example": 200, "other.example": 403, "127.0.0.1": 200} {
		if got, _ := edgeCall(t, "GET", listed.url+"/v1/models", host, ""); got != want {
			t.Errorf("exposed with --allowed-hosts, Host %q: %d, want %d", host, got, want)
		}
	}
	anyHost := newRig(t, []string{"a"}, 0, func(c *Config) { c.AllowedHosts = []string{"*"} })
	if got, _ := edgeCall(t, "GET", anyHost.url+"/v1/models", "evil.example", ""); got != 200 {
		t.Errorf("--allowed-hosts '*': %d", got)
	}
}

// TestCrossSite: a browser request from a site --cors-origin does not
// allow is refused on every route — the text/plain POST any page can send
// without a preflight first — while clients that are not browsers (no
// Origin, no Sec-Fetch-Site), the server's own page and allowed origins
// pass. Before the guard the text/plain POST was served as JSON (200).
func TestCrossSite(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, func(c *Config) { c.CORSOrigins = []string{"https://app.example"} })
	self := r.url // http://127.0.0.1:PORT, the origin of the server's own page
	const (
		chat = "/v1/chat/completions"
		text = "text/plain;charset=UTF-8"
	)
	navigate := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
	tests := []struct {
		name         string
		method, path string
		header       []string
		want         int
	}{
		{"curl -d (form content type, no Origin)", "POST", chat, []string{"Content-Type", "application/x-www-form-urlencoded"}, 200},
		{"SDK (JSON, no Origin)", "POST", chat, []string{"Content-Type", "application/json"}, 200},
		{"cross-site text/plain POST", "POST", chat, []string{"Content-Type", text, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, 403},
		{"cross-site text/plain POST, browser without Sec-Fetch", "POST", chat, []string{"Content-Type", text, "Origin", "https://evil.example"}, 403},
		{"cross-site form POST navigation", "POST", chat, append([]string{"Content-Type", text, "Origin", "https://evil.example"}, navigate...), 403},
		{"same-site other port", "POST", chat, []string{"Content-Type", text, "Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}, 403},
		{"Origin null (sandbox, file://)", "POST", chat, []string{"Content-Type", text, "Origin", "null"}, 403},
		{"cross-site GET without Origin (img, script)", "GET", "/v1/models", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, 403},
		{"cross-site fetch of /health", "GET", "/health", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"}, 403},
		{"cross-site preflight", "OPTIONS", chat, []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Access-Control-Request-Method", "POST"}, 403},
		{"link to the page from another site", "GET", "/health", navigate, 200},
		{"own page (same-origin)", "POST", chat, []string{"Content-Type", "application/json", "Origin", self, "Sec-Fetch-Site", "same-origin"}, 200},
		{"own page, browser without Sec-Fetch", "POST", chat, []string{"Content-Type", "application/json", "Origin", self}, 200},
		{"address bar", "GET", "/v1/models", []string{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"}, 200},
		{"allowed origin", "POST", chat, []string{"Content-Type", "application/json", "Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"}, 200},
		{"allowed origin's preflight", "OPTIONS", chat, []string{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site", "Access-Control-Request-Method", "POST"}, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = edgeChat
			}
			got, resp := edgeCall(t, tt.method, r.url+tt.path, "", body, tt.header...)
			if got != tt.want {
				t.Fatalf("%d, want %d (%s)", got, tt.want, resp)
			}
			if got == 403 && !strings.Contains(resp, `"code":"cross_site_request"`) {
				t.Errorf("body %s", resp)
			}
		})
	}
	got, resp := edgeCall(t, "POST", r.url+"/v1/messages", "", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		"Content-Type", text, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if got != 403 || !strings.Contains(resp, `"type":"permission_error"`) {
		t.Errorf("/v1/messages cross-site: %d %s", got, resp)
	}
}

// TestMetricsFollowsKey: with keys set, /metrics needs one (its figures
// show the traffic) unless MetricsPublic; /health and /ready stay open.
// Before, /metrics answered anyone.
func TestMetricsFollowsKey(t *testing.T) {
	withMetrics := func(key string, public bool) *testRig {
		r := newRig(t, []string{"a"}, 0, func(c *Config) { c.APIKey, c.MetricsPublic = key, public })
		m, err := metrics.New(prometheus.NewRegistry(), testModel, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Routes are fixed when the handler is built: rebuild it over the
		// route the CLI adds (grpc_flags.go) before serving.
		r.srv.Handle("GET /metrics", m.Handler())
		hs := httptest.NewServer(r.srv.HTTPServer().Handler)
		t.Cleanup(hs.Close)
		r.url = hs.URL
		return r
	}
	keyed := withMetrics("k", false)
	for _, tt := range []struct {
		path, auth string
		want       int
	}{
		{"/metrics", "", 401}, {"/metrics", "Bearer wrong", 401}, {"/metrics", "Bearer k", 200},
		{"/health", "", 200}, {"/ready", "", 200},
	} {
		got, body := edgeCall(t, "GET", keyed.url+tt.path, "", "", "Authorization", tt.auth)
		if got != tt.want {
			t.Errorf("keys set, GET %s (%q): %d, want %d", tt.path, tt.auth, got, tt.want)
		}
		if tt.path == "/metrics" && got == 200 && !strings.Contains(body, "sluice_") {
			t.Errorf("GET /metrics: not the metrics: %.200s", body)
		}
	}
	if got, _ := edgeCall(t, "GET", withMetrics("k", true).url+"/metrics", "", ""); got != 200 {
		t.Errorf("--metrics-public: %d", got)
	}
	if got, _ := edgeCall(t, "GET", withMetrics("", false).url+"/metrics", "", ""); got != 200 {
		t.Errorf("no keys: %d", got)
	}
}

func TestAllowedHostsValidation(t *testing.T) {
	for h, ok := range map[string]bool{
		"*": true, "api.example": true, "10.0.0.5": true, "::1": true, "[::1]": true,
		"": false, "http://api.example": false, "api.example:443": false, "api.example/v1": false,
	} {
		c := DefaultConfig()
		c.ModelID, c.AllowedHosts = "m", []string{h}
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%q: %v", h, err)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "127.0.0.2:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:8080": false, "example.com:80": false, "127.0.0.1": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v", addr, got)
		}
	}
}

// TestRefusalDoesNotWaitForBody: a refused request whose body never
// arrives gets its 403 at once and the connection closes; net/http would
// otherwise read the unread body first, with no deadline.
func TestRefusalDoesNotWaitForBody(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A guard against a server that never answers, not a wait for an event.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100\r\n\r\n{\"mess")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !resp.Close {
		t.Errorf("%d, close %v", resp.StatusCode, resp.Close)
	}
}
