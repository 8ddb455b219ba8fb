package e2e

import (
	"testing"
	"time"
)

// TestRelayToolsSDKs: tool calls through a relay whose upstream is the
// rig's Sluice on the default model, with the official SDKs agents use: the
// OpenAI Python SDK's chat stream (deltas accumulated by index, and the
// chat.completions.stream helper) and the Anthropic Python SDK's
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
