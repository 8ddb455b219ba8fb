package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestRelayToolsSDKs: tool calls through a relay whose upstream is the
// rig's Sluice on the default model, with the official SDKs agents use: the
// OpenAI Python SDK's chat stream (deltas accumulated by index, and the
// chat.completions.stream helper; responses.stream's function_call items)
// and the Anthropic Python SDK's
// messages.stream (tool_use input from input_json_delta) get the calls a
// direct client gets, whole and streamed, and the second turn with the
// tool's result; the upstream is idle after each.
func TestRelayToolsSDKs(t *testing.T) {
	for _, sdk := range []struct {
		venv   string
		pins   []string
		script string
	}{
		{"agents", agentPins, "openai-python/relay_tools.py"},
		{"anthropic-tools", []string{"anthropic==2.14.0", "jsonschema==4.26.0"}, "anthropic-python/relay_tools.py"},
	} {
		t.Run(sdk.venv, func(t *testing.T) {
			r := getRig(t)
			front := startRelay(t, r)
			python := pyVenv(t, sdk.venv, sdk.pins...)
			res, ok := pyScript(t, python, sdk.script, "SLUICE_URL="+front.url, "SLUICE_DIRECT="+r.url)
			if !ok {
				t.Fatalf("%s: %v", sdk.script, res)
			}
			t.Logf("%v", res)
			r.waitIdle(t, 5*time.Second)
		})
	}
}

// TestRelayResumeMidToolCall: a client that leaves in the middle of a
// forced call's arguments reconnects to the relay with Last-Event-ID; the
// relay replays its retained tool deltas and continues through the
// upstream Sluice's own resume (whose deltas continue a call the relay's
// new reader never saw start), and the call the client assembles equals the
// uninterrupted stream's, finish_reason tool_calls, with no second
// generation upstream.
func TestRelayResumeMidToolCall(t *testing.T) {
	r := getRig(t)
	front := startRelay(t, r)
	body := `{"messages":[{"role":"user","content":"What is the weather like in Paris today?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}}}],` +
		`"tool_choice":"required","parallel_tool_calls":false,"max_tokens":120,"temperature":0,"stream":true}`
	resp := ssetest.Post(t, front.url+"/v1/chat/completions", body)
	_, whole, wholeFinish := toolStream(t, resp.Body)
	resp.Body.Close()
	if len(whole) != 1 || wholeFinish != "tool_calls" {
		t.Fatalf("uninterrupted: calls %+v, finish %q", whole, wholeFinish)
	}

	start := r.waitIdle(t, 5*time.Second)
	resp = ssetest.Post(t, front.url+"/v1/chat/completions", body)
	id := resp.Header.Get("X-Sluice-Stream-Id")
	first := ssetest.Read(t, bufio.NewReader(resp.Body), 4) // the role, the call's start, two argument deltas
	resp.Body.Close()
	if !strings.Contains(first[len(first)-1].Data, `"arguments"`) {
		t.Fatalf("the cut is not inside the arguments: %v", first)
	}
	r.waitIdle(t, 2*time.Second)

	last := first[len(first)-1].ID
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", front.url+"/v1/streams/"+id, nil)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	again, err := http.DefaultClient.Do(req)
	if err != nil || again.StatusCode != 200 {
		t.Fatalf("resume: %v %v", err, again.Status)
	}
	defer again.Body.Close()
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	var all strings.Builder
	for i, ev := range append(first, rest...) {
		if i >= len(first) && ev.ID != last+int64(i-len(first))+1 && ev.Data != "[DONE]" {
			t.Fatalf("resumed event %d has id %d after %d", i, ev.ID, last)
		}
		fmt.Fprintf(&all, "id: %d\ndata: %s\n\n", ev.ID, ev.Data)
	}
	_, got, finish := toolStream(t, strings.NewReader(all.String()))
	if len(got) != 1 || got[0].name != whole[0].name || got[0].args != whole[0].args || finish != "tool_calls" {
		t.Errorf("resumed: calls %+v, finish %q; uninterrupted %+v", got, finish, whole)
	}
	end := r.waitIdle(t, 5*time.Second)
	if n := end.GenTokens - start.GenTokens; n > 120+8 {
		t.Errorf("the upstream generated %d tokens for one stream of at most 120", n)
	}
	t.Logf("resumed call %s(%s); upstream generated %d tokens", got[0].name, got[0].args, end.GenTokens-start.GenTokens)
}
