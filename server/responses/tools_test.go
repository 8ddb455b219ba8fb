package responses

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

func toolFixture(t *testing.T, pieces ...string) *fix {
	return fixtureWith(t, func(v *streamtest.PieceVocab) stream.Tokenizer { return streamtest.Transcript{PieceVocab: v} }, pieces...)
}

// callPieces is a Hermes call cut mid-JSON, as tokens cut it.
var callPieces = []string{"<tool_call>", "\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": ", "\"Oslo\"}}", "\n</tool_call>"}

const weatherTools = `"tools":[{"type":"function","name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}]`

type item struct {
	Type, ID, Status, Role, Name, Arguments string
	CallID                                  string `json:"call_id"`
	Content                                 []struct{ Type, Text string }
}

// TestToolCallWhole: a reply that calls a tool is a function_call item
// (call_id, name, the exact arguments), the tools and choice echoed.
func TestToolCallWhole(t *testing.T) {
	f := toolFixture(t, append([]string{"Let me check."}, callPieces...)...)
	resp := f.post(t, `{"input":"Weather in Oslo?",`+weatherTools+`,"tool_choice":"auto","parallel_tool_calls":false}`)
	var r struct {
		Status            string
		Output            []item
		ToolChoice        any             `json:"tool_choice"`
		ParallelToolCalls bool            `json:"parallel_tool_calls"`
		Tools             json.RawMessage `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d %v", resp.StatusCode, err)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "message" || r.Output[0].Content[0].Text != "Let me check." {
		t.Fatalf("output %+v", r.Output)
	}
	c := r.Output[1]
	if c.Type != "function_call" || c.Name != "get_weather" || c.Arguments != `{"city": "Oslo"}` ||
		!strings.HasPrefix(c.CallID, "call_") || !strings.HasPrefix(c.ID, "fc_") || c.Status != "completed" {
		t.Errorf("call %+v", c)
	}
	if r.Status != "completed" || r.ToolChoice != "auto" || r.ParallelToolCalls || !strings.Contains(string(r.Tools), `"get_weather"`) {
		t.Errorf("response %+v", r)
	}
	// The tools reached the prompt (the Hermes system block).
	if p := streamtest.PromptText(f.eng.Submits()[0].Prompt); !strings.Contains(p, "<tools>") || !strings.Contains(p, `"name":"get_weather"`) {
		t.Errorf("prompt %q", p)
	}
}

// TestToolCallStream: a call streams as output_item.added (function_call,
// named, no arguments yet), argument deltas whose concatenation is the
// arguments, arguments.done and output_item.done, then response.completed;
// no message item when the reply is only a call; sequence numbers run on.
func TestToolCallStream(t *testing.T) {
	f := toolFixture(t, callPieces...)
	resp := f.post(t, `{"input":"Weather in Oslo?","stream":true,`+weatherTools+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	evs := readResponseEvents(t, resp)
	var names []string
	var args string
	var final map[string]any
	for i, e := range evs {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: sequence %v", i, e.name, e.data["sequence_number"])
		}
		names = append(names, e.name)
		switch e.name {
		case "response.output_item.added":
			it := e.data["item"].(map[string]any)
			if it["type"] != "function_call" || it["name"] != "get_weather" || it["arguments"] != "" || e.data["output_index"] != 0.0 {
				t.Errorf("added %v", e.data)
			}
		case "response.function_call_arguments.delta":
			args += e.data["delta"].(string)
		case "response.function_call_arguments.done":
			if e.data["arguments"] != `{"city": "Oslo"}` {
				t.Errorf("done %v", e.data)
			}
		case "response.completed":
			final = e.data["response"].(map[string]any)
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(slices.Compact(names), want) {
		t.Errorf("events %v", names)
	}
	if args != `{"city": "Oslo"}` {
		t.Errorf("argument deltas join to %q", args)
	}
	out := final["output"].([]any)
	if len(out) != 1 || out[0].(map[string]any)["arguments"] != args || out[0].(map[string]any)["status"] != "completed" {
		t.Errorf("final output %v", out)
	}
}

// TestToolRoundTrip: the call comes back as a function_call item and its
// result as a function_call_output, in the input or through
// previous_response_id; both render as the assistant's call and the tool's
// response in the prompt.
func TestToolRoundTrip(t *testing.T) {
	f := toolFixture(t, callPieces...)
	var first struct {
		ID     string
		Output []item
	}
	resp := f.post(t, `{"input":"Weather in Oslo?",`+weatherTools+`}`)
	if err := json.NewDecoder(resp.Body).Decode(&first); err != nil || len(first.Output) != 1 {
		t.Fatalf("%v %+v", err, first)
	}
	call := first.Output[0]
	wantPrompt := `<tool_call>
{"name": "get_weather", "arguments": {"city": "Oslo"}}
</tool_call>
<tool>` + "<tool_response>\n{\"temp\": 3}\n</tool_response>\n<assistant>"
	for _, body := range []string{
		fmt.Sprintf(`{"previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"{\"temp\": 3}"}],%s}`, first.ID, call.CallID, weatherTools),
		fmt.Sprintf(`{"input":[{"role":"user","content":"Weather in Oslo?"},{"type":"function_call","call_id":%q,"name":"get_weather","arguments":%q},
			{"type":"function_call_output","call_id":%q,"output":[{"type":"input_text","text":"{\"temp\": 3}"}]}],%s}`, call.CallID, call.Arguments, call.CallID, weatherTools),
	} {
		if r := f.post(t, body); r.StatusCode != 200 {
			t.Fatalf("%s: status %d", body, r.StatusCode)
		}
		subs := f.eng.Submits()
		p := streamtest.PromptText(subs[len(subs)-1].Prompt)
		if !strings.HasSuffix(p, wantPrompt) || !strings.Contains(p, "<user>Weather in Oslo?\n<assistant>") {
			t.Errorf("prompt %q", p)
		}
	}
	// A result for a call nobody made is refused.
	r := f.post(t, `{"input":[{"type":"function_call_output","call_id":"call_nope","output":"1"}]}`)
	if r.StatusCode != 400 {
		t.Errorf("status %d", r.StatusCode)
	}
}

type respEvent struct {
	name string
	data map[string]any
}

func readResponseEvents(t *testing.T, resp *http.Response) []respEvent {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var evs []respEvent
	var name string
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(line[len("data: "):]), &d); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			evs = append(evs, respEvent{name, d})
		}
	}
	return evs
}
