package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// The two keys of the tenant tests.
const keyA, keyB = "sk-tenant-a", "sk-tenant-b"

// twoKeyRig is a server with the keys A and B, as --api-key-file with two
// lines makes it.
func twoKeyRig(t *testing.T) *testRig {
	t.Helper()
	keys, err := auth.New([]string{keyA, keyB}, "")
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, []string{"a", "b", "c"}, time.Millisecond, func(c *Config) { c.Keys = keys })
}

// call sends method path with key's bearer token, body (JSON, when not
// empty) and the header name/value pairs; it returns the status and body.
func (r *testRig) call(t *testing.T, key, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, r.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
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

// stream posts a streaming request with key, reads it to its end and
// returns its stream id.
func (r *testRig) streamAs(t *testing.T, key, path, body string) string {
	t.Helper()
	resp := r.post(t, path, body, "Authorization", "Bearer "+key)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s as %s: %d %s", path, key, resp.StatusCode, b)
	}
	id := resp.Header.Get(streamIDHeader)
	if id == "" {
		t.Fatalf("%s: no %s header", path, streamIDHeader)
	}
	ssetest.ReadNamed(t, bufio.NewReader(resp.Body), 0)
	return id
}

// reach is one way a client names an object by its id.
type reach struct {
	name, method, path, body string
	header                   []string
	ok                       int // the owner's status
}

// TestTenantsStreams: with two keys, B cannot replay, resume or take over a
// stream A created, on any API and by any route that names a stream; B
// gets exactly what an id that never existed gets. A still can.
func TestTenantsStreams(t *testing.T) {
	rig := twoKeyRig(t)
	chat := `{"messages":[{"role":"user","content":"hi"}],"stream":true}`
	choices := `{"prompt":"x","n":2,"stream":true}`
	msgs := `{"model":"test-model","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resps := `{"input":"hi","stream":true}`
	streams := map[string]string{
		"chat":      rig.streamAs(t, keyA, "/v1/chat/completions", chat),
		"choices":   rig.streamAs(t, keyA, "/v1/completions", choices),
		"messages":  rig.streamAs(t, keyA, "/v1/messages", msgs),
		"responses": rig.streamAs(t, keyA, "/v1/responses", resps),
	}
	resume := func(id string) []string { return []string{streamIDHeader, id, lastEventIDHeader, "0"} }
	routes := func(kind, id string) []reach {
		switch kind {
		case "chat", "choices":
			return []reach{
				{"GET /v1/streams/{id}", "GET", "/v1/streams/" + id, "", []string{lastEventIDHeader, "0"}, 200},
				{"POST Last-Event-ID", "POST", "/v1/chat/completions", chat, resume(id), 200},
			}
		case "messages":
			return []reach{{"POST Last-Event-ID", "POST", "/v1/messages", msgs, resume(id), 200}}
		default:
			return []reach{
				{"POST Last-Event-ID", "POST", "/v1/responses", resps, resume(id), 200},
				{"GET ?stream=true", "GET", "/v1/responses/" + id + "?stream=true&starting_after=0", "", nil, 200},
			}
		}
	}
	for kind, id := range streams {
		for i, r := range routes(kind, id) {
			// An id of the same shape that was never issued: what B must see.
			never := id[:len(id)-4] + "0000"
			wantStatus, wantBody := rig.call(t, keyB, r.method, strings.ReplaceAll(r.path, id, never), r.body, replaceAll(r.header, id, never)...)
			status, body := rig.call(t, keyB, r.method, r.path, r.body, r.header...)
			if status != wantStatus || strings.ReplaceAll(body, id, never) != wantBody || status != 404 {
				t.Errorf("%s %s as B: %d %s\nan unknown id gets %d %s", kind, r.name, status, body, wantStatus, wantBody)
			}
			if i > 0 {
				continue
			}
			if status, body := rig.call(t, keyA, r.method, r.path, r.body, r.header...); status != r.ok {
				t.Errorf("%s %s as A: %d %s", kind, r.name, status, body)
			}
		}
	}
}

func replaceAll(ss []string, old, new string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ReplaceAll(s, old, new)
	}
	return out
}

// TestTenantsStoredResponses: B can neither read, continue nor delete a
// response A stored; each answer is the one an unknown id gets. A's
// response is still there afterwards.
func TestTenantsStoredResponses(t *testing.T) {
	rig := twoKeyRig(t)
	status, body := rig.call(t, keyA, "POST", "/v1/responses", `{"input":"hi"}`)
	var created struct{ ID string }
	if err := json.Unmarshal([]byte(body), &created); status != 200 || err != nil || created.ID == "" {
		t.Fatalf("create as A: %d %s", status, body)
	}
	id, never := created.ID, created.ID[:len(created.ID)-4]+"0000"
	for _, r := range []reach{
		{"get", "GET", "/v1/responses/" + id, "", nil, 200},
		{"continue", "POST", "/v1/responses", `{"input":"more","previous_response_id":"` + id + `"}`, nil, 200},
		{"delete", "DELETE", "/v1/responses/" + id, "", nil, 200},
	} {
		wantStatus, wantBody := rig.call(t, keyB, r.method, strings.ReplaceAll(r.path, id, never), strings.ReplaceAll(r.body, id, never))
		status, body := rig.call(t, keyB, r.method, r.path, r.body)
		if status != wantStatus || strings.ReplaceAll(body, id, never) != wantBody || status/100 != 4 {
			t.Errorf("%s as B: %d %s\nan unknown id gets %d %s", r.name, status, body, wantStatus, wantBody)
		}
	}
	for _, r := range []reach{
		{"get", "GET", "/v1/responses/" + id, "", nil, 200},
		{"continue", "POST", "/v1/responses", `{"input":"more","previous_response_id":"` + id + `"}`, nil, 200},
		{"delete", "DELETE", "/v1/responses/" + id, "", nil, 200},
		{"get after delete", "GET", "/v1/responses/" + id, "", nil, 404},
	} {
		if status, body := rig.call(t, keyA, r.method, r.path, r.body); status != r.ok {
			t.Errorf("%s as A: %d %s", r.name, status, body)
		}
	}
}
