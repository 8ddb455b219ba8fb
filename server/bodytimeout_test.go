package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// A body that trickles in (a few bytes, then nothing) gets a 408
// (request_timeout) naming --body-timeout once the timeout passes, in the
// error shape of its endpoint's API, and the handler lets go of the
// connection: the server closes it. Without the deadline the read would
// wait for the missing bytes forever.
func TestBodyTimeoutRefusesTrickle(t *testing.T) {
	rig := newRig(t, []string{"a"}, time.Millisecond, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	for _, tc := range []struct {
		path, body string
		anthropic  bool
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, false},
		{"/v1/completions", `{"prompt":"hi","max_tokens":4}`, false},
		{"/v1/responses", `{"input":"hi","stream":true}`, false},
		{"/v1/messages", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(rig.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A guard against a server that never answers, not a wait for an event.
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				tc.path, len(tc.body), tc.body[:10])
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(msg, &e); err != nil {
				t.Fatalf("trickled body: %d %s: %v", resp.StatusCode, msg, err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(e.Error.Message, "--body-timeout") ||
				e.Error.Type != "invalid_request_error" {
				t.Fatalf("trickled body: %d %s", resp.StatusCode, msg)
			}
			if tc.anthropic && e.Type != "error" {
				t.Errorf("not Anthropic's error shape: %s", msg)
			}
			if e.Error.Code != "request_timeout" {
				t.Errorf("code %q, want request_timeout: %s", e.Error.Code, msg)
			}
			if took < 200*time.Millisecond {
				t.Errorf("refused after %v, before the timeout", took)
			}
			if !resp.Close {
				t.Errorf("the connection stays open after a body that never finished")
			}
		})
	}
	if rig.eng.Live() != 0 || len(rig.eng.Submits()) != 0 {
		t.Errorf("a request whose body never arrived reached the engine")
	}
}

// A stream that runs well past the body timeout is not cut by it: the
// deadline covers the body only (a server-wide ReadTimeout or a timeout on
// the request's context would end the stream here). A body that arrives
// slowly but within the timeout is accepted.
func TestBodyTimeoutSparesStreams(t *testing.T) {
	const timeout = 100 * time.Millisecond
	script := strings.Split("one two three four five six seven eight nine ten eleven twelve", " ")
	rig := newRig(t, script, 4*timeout/10, func(c *Config) { c.BodyTimeout = timeout })
	pr, pw := io.Pipe()
	go func() {
		body := `{"messages":[{"role":"user","content":"hi"}],"stream":true}`
		half := len(body) / 2
		_, _ = io.WriteString(pw, body[:half])
		time.Sleep(timeout / 4) // the body's own pace, inside the timeout
		_, _ = io.WriteString(pw, body[half:])
		pw.Close()
	}()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", rig.url+"/v1/chat/completions", pr)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s", resp.StatusCode, msg)
	}
	events := ssetest.Read(t, bufio.NewReader(resp.Body), 0)
	text, finish, _, _ := contentOf(t, events)
	if text != strings.Join(script, "") || finish != "stop" || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("stream past the body timeout: text %q finish %q\n%v", text, finish, events)
	}
	if took := time.Since(start); took < 3*timeout {
		t.Fatalf("the stream lasted %v: not long enough to outlive the body timeout", took)
	}
}
