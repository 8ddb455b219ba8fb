package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// A body that trickles in (a few bytes, then nothing) gets a 400 naming
// --body-timeout once the timeout passes, and the handler lets go of the
// connection: the server closes it. Without the deadline the read would
// wait for the missing bytes forever.
func TestBodyTimeoutRefusesTrickle(t *testing.T) {
	rig := newRig(t, []string{"a"}, time.Millisecond, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(rig.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A guard against a server that never answers, not a wait for an event.
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := `{"messages":[{"role":"user","content":"hi"}],"stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:10])
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "--body-timeout") {
		t.Fatalf("trickled body: %d %s", resp.StatusCode, msg)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("refused after %v, before the timeout", took)
	}
	if !resp.Close {
		t.Errorf("the connection stays open after a body that never finished")
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
