package responses

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
)

// codexTools are Codex 0.169's tool kinds: a function, an MCP server's
// tools as a namespace, and a hosted web_search.
const codexTools = `"tools":[{"type":"function","name":"shell","description":"run","parameters":{"type":"object","properties":{"command":{"type":"string"}}},"strict":false},
 {"type":"namespace","name":"mcp__weather","description":"Weather server","tools":[{"type":"function","name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]},
 {"type":"web_search","external_web_access":false}]`

// codexFields are the rest of Codex's request: reasoning with a summary,
// encrypted reasoning asked back, not stored, a cache key, its metadata.
const codexFields = `"reasoning":{"effort":"medium","summary":"auto"},"include":["reasoning.encrypted_content"],"store":false,
 "prompt_cache_key":"019a-conversation","client_metadata":{"originator":"codex_exec"},"parallel_tool_calls":true,"tool_choice":"auto","stream":false`

// TestCodexRequest: Codex's request shape is served (400 for reasoning,
// include and the namespace tool before): the namespace's tool reaches the
// model under its qualified name and its call comes back in the
// namespace's shape, web_search is left out and reported, and the next
// turn, carrying the reasoning item and the call back with its output, is
// rendered with the qualified call.
func TestCodexRequest(t *testing.T) {
	call := []string{"<tool_call>", "\n{\"name\": \"mcp__weather__get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}", "\n</tool_call>"}
	f := toolFixture(t, call...)
	resp := f.post(t, `{"model":"smol","instructions":"You are Codex.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Oslo?"}]}],`+codexTools+`,`+codexFields+`}`)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var r struct {
		Output []struct {
			Type, Name, Namespace, Arguments string
			CallID                           string `json:"call_id"`
		}
		SluiceWarnings []string `json:"sluice_warnings"`
		Reasoning      struct{ Effort, Summary string }
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	var fc = -1
	for i, o := range r.Output {
		if o.Type == "function_call" {
			fc = i
		}
	}
	if fc < 0 || r.Output[fc].Name != "get_weather" || r.Output[fc].Namespace != "mcp__weather" || r.Output[fc].Arguments != `{"city": "Oslo"}` {
		t.Fatalf("output %s: want get_weather in namespace mcp__weather", raw)
	}
	if len(r.SluiceWarnings) != 1 || !strings.Contains(r.SluiceWarnings[0], "tools[2]") || !strings.Contains(r.SluiceWarnings[0], "web_search") {
		t.Errorf("sluice_warnings %q: want web_search reported", r.SluiceWarnings)
	}
	if r.Reasoning.Effort != "medium" || r.Reasoning.Summary != "auto" {
		t.Errorf("reasoning echoed as %+v", r.Reasoning)
	}
	p := streamtest.PromptText(f.eng.Submits()[0].Prompt)
	if !strings.Contains(p, `"name":"mcp__weather__get_weather"`) || !strings.Contains(p, `"name":"shell"`) || strings.Contains(p, "web_search") {
		t.Errorf("prompt %q: want shell and the qualified namespace tool, no web_search", p)
	}

	// The next turn, stateless: the reasoning item, the call as it came
	// back, its output.
	c := r.Output[fc]
	next := `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Oslo?"}]},
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"opaque"},
		{"type":"function_call","call_id":"` + c.CallID + `","namespace":"mcp__weather","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
		{"type":"function_call_output","call_id":"` + c.CallID + `","output":"sunny"}],` + codexTools + `,` + codexFields + `}`
	resp = f.post(t, next)
	if raw, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("next turn: %d %s", resp.StatusCode, raw)
	}
	if p := streamtest.PromptText(f.eng.Submits()[1].Prompt); !regexp.MustCompile(`<tool_call>\s*\{"name": ?"mcp__weather__get_weather"`).MatchString(p) || !strings.Contains(p, "sunny") {
		t.Errorf("next prompt %q: want the qualified call and its output", p)
	}
}
