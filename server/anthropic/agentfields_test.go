package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// promptOf is the text of the nth submitted prompt (the piece vocabulary
// encodes prompts byte by byte).
func promptOf(t *testing.T, eng *streamtest.ScriptEngine, n int) string {
	t.Helper()
	subs := eng.Submits()
	if len(subs) <= n {
		t.Fatalf("%d submits, want more than %d", len(subs), n)
	}
	b := make([]byte, len(subs[n].Prompt))
	for i, id := range subs[n].Prompt {
		b[i] = byte(id)
	}
	return string(b)
}

// claudeCodeBody is Claude Code 2.1's first request, shortened: adaptive
// thinking with display omitted, clear_thinking keeping all, effort high,
// metadata.user_id, cache_control on system blocks and tools, and a
// system-role message inside messages.
const claudeCodeBody = `{"max_tokens":2000,"stream":false,
 "thinking":{"type":"adaptive","display":"omitted"},
 "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
 "output_config":{"effort":"high"},
 "metadata":{"user_id":"user_abc_account__session_123"},
 "system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
 "tools":[{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
 "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]},
  {"role":"system","content":"<system-reminder>be brief</system-reminder>"},
  {"role":"user","content":"go"}]}`

// TestClaudeCodeRequest: Claude Code's request shape is served (it got
// 400 for each of these fields before), the system message stands where
// it was sent, and the response reports context_management and the cache
// fields of usage.
func TestClaudeCodeRequest(t *testing.T) {
	srv, eng := toolFixture(t, "ok")
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages?beta=true", strings.NewReader(claudeCodeBody))
	req.Header.Set("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var m struct {
		Usage             map[string]int
		ContextManagement *struct {
			AppliedEdits []map[string]any `json:"applied_edits"`
		} `json:"context_management"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ContextManagement == nil || len(m.ContextManagement.AppliedEdits) != 0 {
		t.Errorf("context_management %s, want applied_edits [] (keep all clears nothing)", raw)
	}
	p := promptOf(t, eng, 0)
	if !strings.Contains(p, "<user>hi\n<system><system-reminder>be brief</system-reminder>\n<user>go\n") {
		t.Errorf("prompt %q: the system message is not where it was sent", p)
	}
	u := m.Usage
	if _, ok := u["cache_read_input_tokens"]; !ok || u["input_tokens"]+u["cache_read_input_tokens"]+u["cache_creation_input_tokens"] != len(eng.Submits()[0].Prompt) {
		t.Errorf("usage %v: the prompt (%d tokens) is not input + cache_read + cache_creation", u, len(eng.Submits()[0].Prompt))
	}
}

// noMidSystem is a template that refuses a system turn past the first, as
// most do.
type noMidSystem struct{ *streamtest.PieceVocab }

func (n noMidSystem) ChatPrompt(msgs []stream.ChatMessage) (string, error) {
	for i, m := range msgs {
		if i > 0 && m.Role == "system" {
			return "", errors.New("system message must be first")
		}
	}
	return n.PieceVocab.ChatPrompt(msgs)
}

// TestSystemMessagesMerged: where the template refuses a system turn
// inside the conversation, the system messages are merged into the
// leading system prompt, in order.
func TestSystemMessagesMerged(t *testing.T) {
	srv, eng := fixtureWith(t, func(v *streamtest.PieceVocab) stream.Tokenizer { return noMidSystem{v} }, "ok")
	resp := post(t, srv, "/v1/messages", `{"max_tokens":5,"system":"first","messages":[{"role":"user","content":"a"},
		{"role":"system","content":"second"},{"role":"user","content":"b"},{"role":"system","content":"third"}]}`)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if p, want := promptOf(t, eng, 0), "<system>first\n\nsecond\n\nthird\n<user>a\n<user>b\n<assistant>"; p != want {
		t.Errorf("prompt %q, want %q", p, want)
	}
}

// TestContextManagementClears: clear_tool_uses past its trigger replaces
// the results of all but the kept most recent tool uses in the prompt and
// reports them; clear_thinking reports the thinking turns it dropped; the
// streamed message_delta carries the same report.
func TestContextManagementClears(t *testing.T) {
	use := func(id string) string {
		return `{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"ls"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"RESULT-` + id + strings.Repeat(" output", 50) + `"}]}`
	}
	body := func(trigger int, stream bool) string {
		return `{"max_tokens":5,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,
			"tools":[{"name":"Bash","input_schema":{"type":"object"}}],
			"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":` + itoa(trigger) + `},"keep":{"type":"tool_uses","value":1}},
				{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":1}}]},
			"messages":[{"role":"user","content":"a"},` + use("t1") + `,` + use("t2") + `,` + use("t3") + `]}`
	}
	srv, eng := toolFixture(t, "ok")
	resp := post(t, srv, "/v1/messages", body(10, false))
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var m struct {
		ContextManagement struct {
			AppliedEdits []struct {
				Type                 string
				ClearedToolUses      int `json:"cleared_tool_uses"`
				ClearedThinkingTurns int `json:"cleared_thinking_turns"`
				ClearedInputTokens   int `json:"cleared_input_tokens"`
			} `json:"applied_edits"`
		} `json:"context_management"`
	}
	_ = json.Unmarshal(raw, &m)
	ae := m.ContextManagement.AppliedEdits
	if len(ae) != 2 || ae[0].Type != "clear_tool_uses_20250919" || ae[0].ClearedToolUses != 2 || ae[0].ClearedInputTokens <= 0 ||
		ae[1].Type != "clear_thinking_20251015" || ae[1].ClearedThinkingTurns != 2 {
		t.Fatalf("applied_edits %s", raw)
	}
	p := promptOf(t, eng, 0)
	if strings.Contains(p, "RESULT-t1") || strings.Contains(p, "RESULT-t2") || !strings.Contains(p, "RESULT-t3") ||
		strings.Count(p, stream.ClearedToolResult) != 2 {
		t.Errorf("prompt %q: want t1 and t2 cleared, t3 kept", p)
	}

	// Under the trigger nothing is cleared.
	resp = post(t, srv, "/v1/messages", body(1<<20, false))
	raw, _ = io.ReadAll(resp.Body)
	if p := promptOf(t, eng, 1); !strings.Contains(p, "RESULT-t1") || strings.Contains(raw2s(raw), "clear_tool_uses") {
		t.Errorf("under the trigger: prompt %q, response %s", p, raw)
	}

	evs := readEvents(t, post(t, srv, "/v1/messages", body(10, true)))
	var delta map[string]any
	for _, e := range evs {
		if e.name == "message_delta" {
			delta = e.data
		}
	}
	cm, _ := delta["context_management"].(map[string]any)
	if edits, _ := cm["applied_edits"].([]any); len(edits) != 2 {
		t.Errorf("message_delta %v: want the two applied edits", delta)
	}
}

func raw2s(b []byte) string { return string(b) }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
