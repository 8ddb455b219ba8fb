package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
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
	cmd := exec.CommandContext(t.Context(), python, filepath.Join("..", "..", "tests", "anthropic-python", "tools.py"))
	cmd.Env = append(os.Environ(), "SLUICE_URL="+defaultServer(t, r))
	out, err := cmd.Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("tools.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}
