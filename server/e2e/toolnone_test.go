package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestToolChoiceNoneLive: a prompt on which the default model calls a tool
// under "auto" gets prose under "none" — the tools are still in the prompt,
// but the reply is constrained to text without the call opener — streamed
// and not: no tool_calls, finish_reason "stop" or "length", and no
// "<tool_call" in the content.
func TestToolChoiceNoneLive(t *testing.T) {
	r := getRig(t)
	const msgs = `[{"role":"user","content":"Call get_weather for Paris in celsius."}]`
	req := func(choice string, stream bool) string {
		return fmt.Sprintf(`{"messages":%s,"tools":%s,"tool_choice":%q,"max_tokens":60,"temperature":0,"stream":%t}`, msgs, weatherTools, choice, stream)
	}
	resp := r.post(t, "/v1/chat/completions", req("auto", true))
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("auto: %d %s", resp.StatusCode, raw)
	}
	// The premise: without the ban this prompt makes a call. If a model or
	// template change breaks it, pick another prompt rather than pass on prose.
	if _, calls, finish := toolStream(t, resp.Body); len(calls) == 0 || finish != "tool_calls" {
		t.Fatalf("auto: calls %+v, finish %q; the prompt no longer makes a call", calls, finish)
	}

	resp = r.post(t, "/v1/chat/completions", req("none", true))
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("none: %d %s", resp.StatusCode, raw)
	}
	content, calls, finish := toolStream(t, resp.Body)
	if len(calls) > 0 || finish != "stop" && finish != "length" || strings.TrimSpace(content) == "" || strings.Contains(content, "<tool_call") {
		t.Fatalf("none, streamed: content %q, calls %+v, finish %q", content, calls, finish)
	}
	t.Logf("none: %q (%s)", content, finish)

	resp = r.post(t, "/v1/chat/completions", req("none", false))
	var out struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []json.RawMessage `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("none, whole: %v", err)
	}
	c := out.Choices[0]
	if len(c.Message.ToolCalls) > 0 || c.FinishReason != finish || c.Message.Content != content {
		t.Fatalf("none, whole: %+v; streamed %q (%s)", c, content, finish)
	}
}
