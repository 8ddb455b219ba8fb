package server

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestResumeFindsOnlyItsAPI: every HTTP API's streams live in one store
// and are driven by one driver, yet a resume finds only a stream of its own
// API: a Messages stream is not replayed as chat chunks or Responses
// events, nor a chat stream as Messages events (an unknown id's 404 in the
// route's error shape). Chat and completions are one API: either route
// resumes the other's stream, as GET /v1/streams/{id} does.
func TestResumeFindsOnlyItsAPI(t *testing.T) {
	rig := newRig(t, []string{"a", "b", "c"}, time.Millisecond, nil)
	started := func(path, body string) string {
		resp := rig.post(t, path, body)
		defer resp.Body.Close()
		id := resp.Header.Get(streamIDHeader)
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("%s: status %d, stream id %q", path, resp.StatusCode, id)
		}
		_, _ = io.ReadAll(resp.Body) // the whole stream: it is finished, and retained
		return id
	}
	msg := started("/v1/messages", `{"model":"`+testModel+`","max_tokens":3,"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	chat := started("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`)
	resp := started("/v1/responses", `{"input":"hi","max_output_tokens":3,"stream":true}`)
	bodies := map[string]string{
		"/v1/messages":         `{"model":"` + testModel + `","max_tokens":3,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`,
		"/v1/completions":      `{"prompt":"hi","max_tokens":3,"stream":true}`,
		"/v1/responses":        `{"input":"hi","max_output_tokens":3,"stream":true}`,
	}
	cases := []struct {
		path, id string
		status   int
	}{
		{"/v1/messages", msg, 200},
		{"/v1/chat/completions", msg, 404},
		{"/v1/responses", msg, 404},
		{"/v1/streams/" + msg, "", 404},
		{"/v1/chat/completions", chat, 200},
		{"/v1/completions", chat, 200},
		{"/v1/streams/" + chat, "", 200},
		{"/v1/messages", chat, 404},
		{"/v1/responses", chat, 404},
		{"/v1/responses", resp, 200},
		{"/v1/messages", resp, 404},
		{"/v1/chat/completions", resp, 404},
	}
	for _, c := range cases {
		var r *http.Response
		if c.id == "" {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", rig.url+c.path, nil)
			req.Header.Set(lastEventIDHeader, "0")
			var err error
			if r, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
		} else {
			r = rig.post(t, c.path, bodies[c.path], streamIDHeader, c.id, lastEventIDHeader, "0")
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != c.status {
			t.Errorf("%s resuming %s: status %d, want %d: %s", c.path, c.id, r.StatusCode, c.status, body)
		}
	}
}
