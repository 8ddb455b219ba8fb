package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRelayCountTokens: POST /v1/messages/count_tokens is validated here and
// answered by the upstream's own count_tokens (its model's tokenizer); an
// upstream without the endpoint, one that fails, one that stalls and one
// that answers something other than JSON each give a clear error in
// Anthropic's shape, and a request refused here never reaches the upstream.
func TestRelayCountTokens(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"system":"be brief"}`
	for _, c := range []struct {
		name     string
		body     string
		script   func(w http.ResponseWriter, r *http.Request, f *fakeUpstream)
		status   int
		typ      string // Anthropic's error type; "" for a 200
		contains string
		requests int64
	}{
		{"the upstream's count", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			if r.URL.Path != "/v1/messages/count_tokens" {
				http.Error(w, "wrong path "+r.URL.Path, http.StatusTeapot)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"input_tokens":12}`)
		}, http.StatusOK, "", `{"input_tokens":12}`, 1},
		{"an upstream without the endpoint", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) { http.NotFound(w, r) },
			http.StatusNotFound, "not_found_error", "has no /v1/messages/count_tokens endpoint", 1},
		{"an upstream that fails", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			w.WriteHeader(http.StatusInternalServerError)
		},
			http.StatusBadGateway, "api_error", "upstream_unavailable", 1},
		{"an upstream that refuses the request", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`)
		}, http.StatusBadRequest, "invalid_request_error", "prompt is too long", 1},
		{"an answer that is not JSON", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) { fmt.Fprint(w, "twelve") },
			http.StatusBadGateway, "api_error", "not a JSON object", 1},
		{"a body that never ends", body, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			fmt.Fprint(w, `{"input_tokens":`)
			flush(w)
			f.waitGone(r)
		}, http.StatusGatewayTimeout, "api_error", "did not finish its answer", 1},
		{"refused here", `{"model":"m","messages":[]}`, nil, http.StatusBadRequest, "invalid_request_error", "messages", 0},
		{"an unknown model", strings.Replace(body, `"m"`, `"other"`, 1), nil, http.StatusNotFound, "not_found_error", "other", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				if c.script == nil {
					t.Error("the upstream was asked")
					return
				}
				c.script(w, r, f)
			})
			rig := newRelay(t, up, fast)
			start := time.Now()
			resp, err := http.Post(rig.url+"/v1/messages/count_tokens", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(raw), c.contains) {
				t.Fatalf("%d %s, want %d containing %q", resp.StatusCode, raw, c.status, c.contains)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("answered after %v: the call's timeouts are 1.6 s together", d)
			}
			if n := up.requests.Load(); n != c.requests {
				t.Errorf("%d upstream requests, want %d", n, c.requests)
			}
			if c.requests > 0 {
				sent := <-up.bodies
				if sent["model"] != "m" || sent["stream"] != nil || sent["system"] != "be brief" {
					t.Errorf("upstream body %v: the client's fields, no stream", sent)
				}
			}
			if c.typ == "" {
				return
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
			}
			if json.Unmarshal(raw, &e) != nil || e.Type != "error" || e.Error.Type != c.typ || e.Error.Message == "" {
				t.Errorf("error %s, want Anthropic's shape with type %s", raw, c.typ)
			}
		})
	}
}
