package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

func toolFixture(t *testing.T, pieces ...string) (*httptest.Server, *streamtest.ScriptEngine) {
	return fixtureWith(t, func(v *streamtest.PieceVocab) stream.Tokenizer { return streamtest.Transcript{PieceVocab: v} }, pieces...)
}

var callPieces = []string{"<tool_call>", "\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": ", "\"Oslo\"}}", "\n</tool_call>"}

const weatherTools = `"tools":[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}}]`

type wireMessage struct {
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type, Text, ID, Name string
		Input                json.RawMessage
	}
}

// TestToolUseWhole: text then a call is a text block and a tool_use block
// (toolu_ id, the input as an object), stop_reason tool_use.
func TestToolUseWhole(t *testing.T) {
	srv, eng := toolFixture(t, append([]string{"Checking."}, callPieces...)...)
	resp := post(t, srv, "/v1/messages", `{"max_tokens":64,`+weatherTools+`,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
		"messages":[{"role":"user","content":"Weather in Oslo?"}]}`)
	var m wireMessage
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d %v", resp.StatusCode, err)
	}
	if m.StopReason != "tool_use" || len(m.Content) != 2 || m.Content[0].Type != "text" || m.Content[0].Text != "Checking." {
		t.Fatalf("message %+v", m)
	}
	c := m.Content[1]
	if c.Type != "tool_use" || c.Name != "get_weather" || !strings.HasPrefix(c.ID, "toolu_") || string(c.Input) != `{"city":"Oslo"}` {
		t.Errorf("tool_use %+v", c)
	}
	if p := streamtest.PromptText(eng.Submits()[0].Prompt); !strings.Contains(p, "<tools>") || !strings.Contains(p, `"parameters":{"properties"`) {
		t.Errorf("prompt %q", p)
	}
}

// TestToolUseStream: content_block_start with the tool_use (id, name, empty
// input), input_json_delta fragments joining to the input, its stop, then
// message_delta with stop_reason tool_use; no text block for a reply that
// is only a call.
func TestToolUseStream(t *testing.T) {
	srv, _ := toolFixture(t, callPieces...)
	resp := post(t, srv, "/v1/messages", `{"max_tokens":64,"stream":true,`+weatherTools+`,"messages":[{"role":"user","content":"Weather?"}]}`)
	var names []string
	var partial string
	var reason any
	for _, e := range readEvents(t, resp) {
		names = append(names, e.name)
		switch e.name {
		case "content_block_start":
			b := e.data["content_block"].(map[string]any)
			if e.data["index"] != 0.0 || b["type"] != "tool_use" || b["name"] != "get_weather" ||
				!strings.HasPrefix(b["id"].(string), "toolu_") || fmt.Sprint(b["input"]) != "map[]" {
				t.Errorf("start %v", e.data)
			}
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			if d["type"] != "input_json_delta" {
				t.Errorf("delta %v", d)
			}
			partial += d["partial_json"].(string)
		case "message_delta":
			reason = e.data["delta"].(map[string]any)["stop_reason"]
		}
	}
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(slices.Compact(names), want) {
		t.Errorf("events %v", names)
	}
	if partial != `{"city": "Oslo"}` || reason != "tool_use" {
		t.Errorf("partial %q reason %v", partial, reason)
	}
}

// TestToolResultRoundTrip: an assistant tool_use in the history and the
// user's tool_result (text blocks, is_error) render as the call and the
// tool's response; text after the results is a user turn of its own.
func TestToolResultRoundTrip(t *testing.T) {
	srv, eng := toolFixture(t, "It is 3 degrees.")
	resp := post(t, srv, "/v1/messages", `{"max_tokens":64,`+weatherTools+`,"messages":[
		{"role":"user","content":"Weather in Oslo?"},
		{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"temp\": 3}"}]},{"type":"text","text":"Thanks"}]}]}`)
	var m wireMessage
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d %v", resp.StatusCode, err)
	}
	if m.StopReason != "end_turn" || m.Content[0].Text != "It is 3 degrees." {
		t.Errorf("message %+v", m)
	}
	want := "<assistant>Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>\n" +
		"<tool><tool_response>\n{\"temp\": 3}\n</tool_response>\n<user>Thanks\n<assistant>"
	if p := streamtest.PromptText(eng.Submits()[0].Prompt); !strings.HasSuffix(p, want) {
		t.Errorf("prompt %q, want suffix %q", p, want)
	}
	// An error result says so; a result answering no call is refused.
	resp = post(t, srv, "/v1/messages", `{"max_tokens":64,`+weatherTools+`,"messages":[{"role":"user","content":"W?"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"no such city","is_error":true}]}]}`)
	if resp.StatusCode != 200 || !strings.Contains(streamtest.PromptText(eng.Submits()[1].Prompt), "<tool_response>\nError: no such city\n") {
		t.Errorf("status %d prompt %q", resp.StatusCode, streamtest.PromptText(eng.Submits()[1].Prompt))
	}
	resp = post(t, srv, "/v1/messages", `{"max_tokens":64,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`)
	if resp.StatusCode != 400 {
		t.Errorf("a result answering no call: status %d", resp.StatusCode)
	}
}

// TestCountTokensTools: the count includes the tools' prompt.
func TestCountTokensTools(t *testing.T) {
	srv, _ := toolFixture(t, "x")
	count := func(body string) int {
		resp := post(t, srv, "/v1/messages/count_tokens", body)
		var c struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d %v", resp.StatusCode, err)
		}
		return c.InputTokens
	}
	plain := count(`{"messages":[{"role":"user","content":"Hi"}]}`)
	with := count(`{` + weatherTools + `,"messages":[{"role":"user","content":"Hi"}]}`)
	if with <= plain+len("get_weather") {
		t.Errorf("count with tools %d, without %d", with, plain)
	}
}

// TestDeferredToolsLeftOut: a tool with defer_loading (Claude Code sends
// some) is accepted and kept out of the prompt, as Anthropic's tool search
// keeps it out until a search loads it; before, the field was a 400.
func TestDeferredToolsLeftOut(t *testing.T) {
	srv, _ := toolFixture(t, "x")
	count := func(body string) int {
		t.Helper()
		resp := post(t, srv, "/v1/messages/count_tokens", body)
		var c struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d %v", resp.StatusCode, err)
		}
		return c.InputTokens
	}
	const weather = `{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}`
	const clock = `{"name":"get_time","description":"Time in a zone","input_schema":{"type":"object","properties":{"tz":{"type":"string"}}}`
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	one := count(`{"tools":[` + weather + `],` + msgs + `}`)
	deferred := count(`{"tools":[` + weather + `,` + clock + `,"defer_loading":true}],` + msgs + `}`)
	if deferred != one {
		t.Errorf("with a deferred tool %d tokens, without it %d: it reached the prompt", deferred, one)
	}
	if loaded := count(`{"tools":[` + weather + `,` + clock + `,"defer_loading":false}],` + msgs + `}`); loaded <= one {
		t.Errorf("defer_loading false: %d tokens, one tool %d", loaded, one)
	}
	if all := count(`{"tools":[` + clock + `,"defer_loading":true}],` + msgs + `}`); all != count(`{`+msgs+`}`) {
		t.Errorf("every tool deferred: %d tokens, no tools %d", all, count(`{`+msgs+`}`))
	}
	resp := post(t, srv, "/v1/messages/count_tokens", `{"tools":[`+clock+`,"defer_loading":"yes"}],`+msgs+`}`)
	if resp.StatusCode != 400 {
		t.Errorf("defer_loading not a boolean: %d", resp.StatusCode)
	}
}

// TestServerToolsLeftOut: a tool Anthropic runs on its own side
// (web_search_20250305, as clients offer it by default) is left out of
// the model's tools and reported in sluice_warnings, whole and in
// message_start, instead of refusing the request; the custom tools beside
// it are served.
func TestServerToolsLeftOut(t *testing.T) {
	srv, eng := toolFixture(t, "Hi.")
	const search = `{"type":"web_search_20250305","name":"web_search","max_uses":5}`
	const weather = `{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}`
	for _, streamed := range []bool{false, true} {
		body := fmt.Sprintf(`{"max_tokens":16,"stream":%v,"tools":[%s,%s],"messages":[{"role":"user","content":"Hi"}]}`, streamed, search, weather)
		resp := post(t, srv, "/v1/messages", body)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: %d %s", streamed, resp.StatusCode, raw)
		}
		if !strings.Contains(string(raw), `"sluice_warnings":["tools[0]: web_search_20250305 is a tool this server cannot run`) {
			t.Errorf("stream %v: no warning for tools[0] in %s", streamed, raw)
		}
	}
	if n := len(eng.Submits()); n != 2 {
		t.Fatalf("%d submits, want 2", n)
	}
	count := func(tools string) string {
		resp := post(t, srv, "/v1/messages/count_tokens", `{"tools":[`+tools+`],"messages":[{"role":"user","content":"Hi"}]}`)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode, string(raw))
	}
	if with, without := count(search+","+weather), count(weather); with != without {
		t.Errorf("count_tokens with the server tool %s, without it %s: it reached the prompt", with, without)
	}
}
