package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/relay"
)

// pyScript runs a tests/ script with env and returns its JSON report and
// whether it passed (its "ok").
func pyScript(t *testing.T, python, script string, env ...string) (map[string]any, bool) {
	t.Helper()
	out, err := pyCmd(t, python, script, env...).Output()
	var res map[string]any
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s", script, err, out, stderr)
	}
	return res, err == nil && res["ok"] == true
}

// TestRelaySDKs: the Anthropic Python SDK's client.messages.stream
// (tests/anthropic-python/relay.py) and the OpenAI Python SDK's
// client.responses.stream (tests/openai-python/relay.py) through a relay
// whose upstream is the rig's Sluice see what a direct client sees, and the
// upstream is idle after each.
func TestRelaySDKs(t *testing.T) {
	for _, sdk := range []struct{ venv, pin, script string }{
		{"anthropic", "anthropic==2.14.0", "anthropic-python/relay.py"},
		{"openai", "openai==3.57.0", "openai-python/relay.py"},
	} {
		t.Run(sdk.venv, func(t *testing.T) {
			r := getRig(t)
			front := startRelay(t, r)
			python := pyVenv(t, sdk.venv, sdk.pin)
			res, ok := pyScript(t, python, sdk.script, "SLUICE_URL="+front.url, "SLUICE_DIRECT="+r.url)
			if !ok {
				t.Fatalf("%s: %v", sdk.script, res)
			}
			t.Logf("%v", res)
			r.waitIdle(t, 5*time.Second)
		})
	}
}

// dripChat is an upstream that sends a chat chunk every pause: the relay in
// front of it sends keep-alives between its own id'd events.
func dripChat(pause time.Duration, pieces ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, p := range pieces {
			time.Sleep(pause)
			fmt.Fprintf(w, "id: %d\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", i+1, p)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}
}

// TestKeepAliveBetweenIDsPythonSDK: the OpenAI Python SDK reads a stream
// whose keep-alives arrive between id'd events. Its decoder keeps the last
// id, so a keep-alive framed as a comment plus a blank line became an event
// with empty data, which it failed to parse; Sluice's keep-alive is one
// comment line inside the next event's block. The same script against the
// old framing must fail, so the check can tell the two apart.
func TestKeepAliveBetweenIDsPythonSDK(t *testing.T) {
	python := pyVenv(t, "openai", "openai==3.57.0")
	up := httptest.NewServer(dripChat(150*time.Millisecond, "a", "b", "c", "d"))
	t.Cleanup(up.Close)
	front := relayTo(t, relay.Upstream{URL: up.URL, Models: []string{"m"}}, 20*time.Millisecond)

	resp, err := http.Post(front.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), "\n\n: keep-alive\n") || !strings.Contains(string(raw), ": keep-alive\nid: ") {
		t.Fatalf("no keep-alive between id'd events in\n%s", raw)
	}
	res, ok := pyScript(t, python, "openai-python/keepalive.py", "SLUICE_URL="+front.url)
	if !ok || res["text"] != "abcd" {
		t.Errorf("the SDK through keep-alives: %v, want ok and text abcd", res)
	}

	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, ": keep-alive\n\n")
		fmt.Fprint(w, "id: 2\ndata: [DONE]\n\n")
	}))
	t.Cleanup(old.Close)
	res, ok = pyScript(t, python, "openai-python/keepalive.py", "SLUICE_URL="+old.URL)
	if ok || !strings.Contains(fmt.Sprint(res["error"]), "JSONDecodeError") {
		t.Errorf("the old framing (a comment and a blank line after an id'd event): %v; the SDK must fail on it, or this test proves nothing", res)
	}
}

// TestRelayCountTokens: count_tokens through a relay whose upstream is the
// rig's Sluice is the upstream's own count (its tokenizer and template).
func TestRelayCountTokens(t *testing.T) {
	r := getRig(t)
	front := startRelay(t, r)
	const body = `{"model":"","system":"Answer in one word.","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":8}`
	count := func(url string) string {
		resp, err := http.Post(url+"/v1/messages/count_tokens", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", url, resp.StatusCode, raw)
		}
		return string(raw)
	}
	relayed, direct := count(front.url), count(r.url)
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	if relayed != direct || json.Unmarshal([]byte(relayed), &n) != nil || n.InputTokens < 10 {
		t.Errorf("relayed %s, direct %s", relayed, direct)
	}
	t.Logf("count_tokens through the relay: %s", relayed)
}
