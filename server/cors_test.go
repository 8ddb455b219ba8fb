package server

import (
	"net/http"
	"strings"
	"testing"
)

func options(t *testing.T, url, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, url, nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, x-api-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORS: preflights from a configured origin are answered without a key,
// requests from it get Access-Control-Allow-Origin (errors too, so a page
// can read them) and still need the key; other origins get no allow header;
// with no origin configured there is no CORS at all.
func TestCORS(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, func(c *Config) {
		c.CORSOrigins = []string{"https://app.example", "http://localhost:5173"}
		c.APIKey = "k"
	})
	pre := options(t, r.url+"/v1/chat/completions", "https://app.example")
	h := pre.Header
	if pre.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-api-key" || h.Get("Access-Control-Max-Age") == "" {
		t.Errorf("preflight: %d %v", pre.StatusCode, h)
	}
	if other := options(t, r.url+"/v1/chat/completions", "https://evil.example"); other.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("refused origin allowed: %v", other.Header)
	}
	noKey := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, "Origin", "http://localhost:5173")
	if noKey.StatusCode != 401 || noKey.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("error response lacks the allow header: %v", noKey.Header)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", r.url+"/v1/models", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Sluice-Stream-Id") {
		t.Errorf("GET /v1/models: %d %v", resp.StatusCode, resp.Header)
	}

	wild := newRig(t, []string{"a"}, 0, func(c *Config) { c.CORSOrigins = []string{"*"} })
	if p := options(t, wild.url+"/v1/messages", "https://anything.example"); p.StatusCode != 204 ||
		p.Header.Get("Access-Control-Allow-Origin") != "https://anything.example" {
		t.Errorf("* preflight: %d %v", p.StatusCode, p.Header)
	}

	off := newRig(t, []string{"a"}, 0, nil)
	if p := options(t, off.url+"/v1/chat/completions", "https://app.example"); p.StatusCode == 204 || p.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off: %d %v", p.StatusCode, p.Header)
	}
}

func TestCORSOriginValidation(t *testing.T) {
	for o, ok := range map[string]bool{
		"*": true, "https://a.example": true, "http://localhost:8080": true,
		"a.example": false, "https://a.example/": false, "https://a.example/path": false, "ftp://a": false, "": false,
	} {
		c := DefaultConfig()
		c.ModelID, c.CORSOrigins = "m", []string{o}
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("%q: %v", o, err)
		}
	}
}
