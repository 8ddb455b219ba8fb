package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

const helloChat = `{"messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`

// TestGoClient streams a chat completion with Go's net/http client and
// checks the whole contract: headers, an id on every event, role chunk
// first, text, finish chunk, usage chunk, [DONE].
func TestGoClient(t *testing.T) {
	r := getRig(t)
	// Accept-Encoding asked explicitly, so Go's transport would not hide a gzipped body.
	resp := r.post(t, "/v1/chat/completions", helloChat, "Accept-Encoding", "gzip")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Accel-Buffering") != "no" || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	events := ssetest.Read(t, bufio.NewReader(resp.Body), 0)
	for i, ev := range events {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d has id %d", i, ev.ID)
		}
	}
	var first chunk
	if err := json.Unmarshal([]byte(events[0].Data), &first); err != nil || first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first event %s", events[0].Data)
	}
	s := decode(t, events)
	if s.text == "" || (s.finish != "stop" && s.finish != "length") || s.completion == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Errorf("text %q finish %q completion tokens %d, last %q", s.text, s.finish, s.completion, events[len(events)-1].Data)
	}
	r.waitIdle(t, 5*time.Second)
}

// TestCurl streams through `curl -N` (no output buffering), as a shell user would.
func TestCurl(t *testing.T) {
	r := getRig(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	out, err := exec.CommandContext(t.Context(), curl, "-sS", "-N", "--fail-with-body", "-H", "Content-Type: application/json",
		"-d", helloChat, r.url+"/v1/chat/completions").Output()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	events := ssetest.Read(t, bufio.NewReader(strings.NewReader(string(out))), 0)
	s := decode(t, events)
	if !strings.HasPrefix(string(out), "id: 1\ndata: {") || !strings.HasSuffix(string(out), "data: [DONE]\n\n") || s.text == "" {
		t.Errorf("curl output:\n%s", out)
	}
}

// TestOpenAINodeSDK runs tests/openai-node/stream.mjs (the official `openai`
// package, pinned) against the server. npm ci installs it when needed.
func TestOpenAINodeSDK(t *testing.T) {
	r := getRig(t)
	runNode(t, r, "stream.mjs", r.url)
}

// runNode runs a script of tests/openai-node against url, installing the
// pinned SDK by npm ci when it is missing; it fails unless the script
// prints {"ok": true, …}, then waits for the rig to be idle.
func runNode(t *testing.T, r *rig, script, url string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node or npm not installed")
	}
	dir := filepath.Join("..", "..", "tests", "openai-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci failed (no registry?): %v\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_URL="+url)
	out, err := cmd.Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node %s: %v\n%s\n%s", script, err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}
