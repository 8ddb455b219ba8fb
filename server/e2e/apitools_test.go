package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestResponsesToolsPythonSDK runs tests/openai-python/responses_tools.py
// (the official openai package with jsonschema, pinned) against a live
// server on the default model: client.responses.create with tools and
// tool_choice required or named gives a function_call whose arguments
// validate, client.responses.stream's argument deltas accumulate into the
// final response's, the call and its function_call_output go back by input
// items and by previous_response_id, text.format json_schema output
// validates, whole and streamed; refusals name the field.
func TestResponsesToolsPythonSDK(t *testing.T) {
	r := getRig(t)
	runPython(t, r, pyVenv(t, "agents", agentPins...), "responses_tools.py")
}

// TestMessagesToolsPythonSDK runs tests/anthropic-python/tools.py (the
// official anthropic package with jsonschema, pinned) against a live server
// on the default model: tool_choice any or a named tool gives a tool_use
// whose input validates, messages.stream's input_json_delta fragments join
// into the final message's input, a tool_result round trip, count_tokens
// counting the tools; refusals in Anthropic's shape.
func TestMessagesToolsPythonSDK(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "anthropic-tools", "anthropic==2.14.0", "jsonschema==4.26.0")
	runPyScript(t, r, python, filepath.Join("anthropic-python", "tools.py"), "SLUICE_URL="+defaultServer(t, r))
}

// The tool-call streams of both APIs join TestNamedStreamResume (and its
// error cases): a client cut after the third argument delta and resumed
// gets the rest of the call with consecutive ids, the joined arguments equal
// an uninterrupted greedy run's, and the engine samples no token twice. The
// call's parse lives with the retained stream, so the resumed deltas
// continue the same call.
func init() {
	const weather = `{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`
	namedAPIs["messages-tools"] = namedAPI{
		path: "/v1/messages",
		body: `{"max_tokens":120,"temperature":0,"stream":true,"messages":[{"role":"user","content":"What is the weather like in Paris today?"}],
			"tool_choice":{"type":"any","disable_parallel_tool_use":true},"tools":[{"name":"get_weather","input_schema":` + weather + `}]}`,
		delta: func(t *testing.T, ev ssetest.Event) string {
			if ev.Name != "content_block_delta" {
				return ""
			}
			var d struct {
				Delta struct {
					Type        string
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatalf("%s: %v", ev.Data, err)
			}
			if d.Delta.Type != "input_json_delta" {
				t.Fatalf("a forced call's stream carries %s", ev.Data)
			}
			return d.Delta.PartialJSON
		},
		last: "message_stop",
	}
	namedAPIs["responses-tools"] = namedAPI{
		path: "/v1/responses",
		body: `{"max_output_tokens":120,"temperature":0,"stream":true,"store":false,"input":"What is the weather like in Paris today?",
			"tool_choice":"required","parallel_tool_calls":false,"tools":[{"type":"function","name":"get_weather","parameters":` + weather + `}]}`,
		delta: responsesDelta("response.function_call_arguments.delta"),
		last:  "response.completed",
	}
}
