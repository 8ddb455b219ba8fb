package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}}},
{"type":"function","function":{"name":"get_time","description":"Current time in a timezone","parameters":{"type":"object","properties":{"tz":{"type":"string","maxLength":30}},"required":["tz"],"additionalProperties":false}}}]`

// streamedCall is a tool call accumulated from deltas as an SDK does.
type streamedCall struct {
	id, name, args string
	deltas         int
}

// toolStream reads a streamed chat completion and accumulates its tool
// calls, checking the delta shape on the way: the first delta of a call
// has id, type and name and empty arguments; later ones only arguments.
func toolStream(t *testing.T, body io.Reader) (content string, calls []streamedCall, finish string) {
	t.Helper()
	for _, ev := range ssetest.Read(t, bufio.NewReader(body), 0) {
		if ev.Data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    *int    `json:"index"`
						ID       *string `json:"id"`
						Type     *string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || c.Error != nil {
			t.Fatalf("event %s: %v", ev.Data, err)
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == nil || d.Function.Arguments == nil {
					t.Fatalf("delta without index or arguments: %s", ev.Data)
				}
				switch {
				case d.ID != nil:
					if *d.Index != len(calls) || d.Type == nil || *d.Type != "function" || d.Function.Name == nil || *d.Function.Arguments != "" {
						t.Fatalf("first delta of call %d: %s", len(calls), ev.Data)
					}
					calls = append(calls, streamedCall{id: *d.ID, name: *d.Function.Name})
				case *d.Index != len(calls)-1 || d.Function.Name != nil:
					t.Fatalf("argument delta out of place: %s", ev.Data)
				default:
					calls[*d.Index].args += *d.Function.Arguments
					calls[*d.Index].deltas++
				}
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return content, calls, finish
}

func checkWeatherArgs(t *testing.T, c streamedCall) {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(c.args), &args); err != nil {
		t.Fatalf("%s arguments %q: %v", c.name, c.args, err)
	}
	switch c.name {
	case "get_weather":
		city, _ := args["city"].(string)
		unit, _ := args["unit"].(string)
		if city == "" && args["city"] == nil || !slices.Contains([]string{"celsius", "fahrenheit"}, unit) || len(args) != 2 {
			t.Fatalf("get_weather arguments %q do not match the schema", c.args)
		}
	case "get_time":
		if _, ok := args["tz"].(string); !ok || len(args) != 1 {
			t.Fatalf("get_time arguments %q do not match the schema", c.args)
		}
	default:
		t.Fatalf("call of unlisted function %q", c.name)
	}
}

// TestToolCallsLive: on the default model (whose template knows no tools,
// so the Hermes prompt stands in), "required" and a named function give a
// valid call streamed as OpenAI deltas (name first and alone, then the
// arguments in pieces), finish_reason "tool_calls" and no content; the
// non-streamed response carries the same calls in the message.
func TestToolCallsLive(t *testing.T) {
	r := getRig(t)
	for _, c := range []struct{ name, choice, want string }{
		{"required", `"required"`, ""},
		{"named", `{"type":"function","function":{"name":"get_time"}}`, "get_time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":%s,"tool_choice":%s,"parallel_tool_calls":false,"max_tokens":100,"temperature":0,"stream":true}`, weatherTools, c.choice)
			resp := r.post(t, "/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				raw, _ := io.ReadAll(resp.Body)
				t.Fatalf("%d %s", resp.StatusCode, raw)
			}
			content, calls, finish := toolStream(t, resp.Body)
			if finish != "tool_calls" || len(calls) != 1 || strings.TrimSpace(content) != "" {
				t.Fatalf("finish %q, calls %+v, content %q", finish, calls, content)
			}
			if c.want != "" && calls[0].name != c.want {
				t.Fatalf("called %q, want %q", calls[0].name, c.want)
			}
			checkWeatherArgs(t, calls[0])
			if calls[0].deltas < 2 {
				t.Errorf("arguments came in %d delta(s): not streamed", calls[0].deltas)
			}
			t.Logf("%s(%s) in %d argument deltas", calls[0].name, calls[0].args, calls[0].deltas)

			resp = r.post(t, "/v1/chat/completions", strings.Replace(body, `"stream":true`, `"stream":false`, 1))
			var out struct {
				Choices []struct {
					Message struct {
						Content   string
						ToolCalls []struct {
							ID, Type string
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
					FinishReason string `json:"finish_reason"`
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
				t.Fatal(err)
			}
			m := out.Choices[0].Message
			if out.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Type != "function" ||
				m.ToolCalls[0].Function.Name != calls[0].name || m.ToolCalls[0].Function.Arguments != calls[0].args {
				t.Fatalf("non-streamed: %+v, streamed %+v", out.Choices[0], calls[0])
			}
		})
	}
}

// TestToolRoundTripLive sends back a call and its result, as an agent
// loop does, and the model answers in text; "none" offers the tools but
// the reply is text, never a call.
func TestToolRoundTripLive(t *testing.T) {
	r := getRig(t)
	history := `[{"role":"user","content":"What is the weather in Paris?"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
{"role":"tool","tool_call_id":"call_1","content":"{\"temperature\": 21, \"sky\": \"sunny\"}"}]`
	for _, choice := range []string{`"auto"`, `"none"`} {
		body := fmt.Sprintf(`{"messages":%s,"tools":%s,"tool_choice":%s,"max_tokens":40,"temperature":0,"stream":true}`, history, weatherTools, choice)
		resp := r.post(t, "/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s", choice, resp.StatusCode, raw)
		}
		content, calls, finish := toolStream(t, resp.Body)
		if choice == `"none"` && len(calls) > 0 || content == "" && len(calls) == 0 || finish == "" {
			t.Fatalf("%s: content %q, calls %+v, finish %q", choice, content, calls, finish)
		}
		t.Logf("%s: %q %+v (%s)", choice, content, calls, finish)
	}
}

// TestToolRequestsRefused: malformed tool fields are 400s naming the field.
func TestToolRequestsRefused(t *testing.T) {
	r := getRig(t)
	for _, c := range []struct{ extra, param string }{
		{`"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}`, "tool_choice.function.name"},
		{`"tools":[{"type":"retrieval"}]`, "tools[0].type"},
		{`"tools":[{"type":"function","function":{"name":"bad name"}}]`, "tools[0].function.name"},
		{`"tool_choice":"required"`, "tool_choice"},
		{`"tools":` + weatherTools + `,"tool_choice":"always"`, "tool_choice"},
		{`"tools":` + weatherTools + `,"tool_choice":"required","response_format":{"type":"json_object"}`, "response_format"},
		{`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"nosuch"}}}],"tool_choice":"required"`, "tools"},
	} {
		resp := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],`+c.extra+`}`)
		raw, _ := io.ReadAll(resp.Body)
		var out struct{ Error struct{ Param *string } }
		if resp.StatusCode != 400 || json.Unmarshal(raw, &out) != nil || out.Error.Param == nil || *out.Error.Param != c.param {
			t.Errorf("%s: %d %s, want 400 on %s", c.extra, resp.StatusCode, raw, c.param)
		}
	}
	resp := r.post(t, "/v1/chat/completions", `{"messages":[{"role":"tool","tool_call_id":"x","content":"1"}]}`)
	if raw, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(raw), "tool_call_id") {
		t.Errorf("orphan tool message: %d %s", resp.StatusCode, raw)
	}
}
