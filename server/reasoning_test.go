package server

import (
	"encoding/json"
	"testing"
)

// TestChatReasoningFields: the reasoning fields agents and the OpenAI SDK
// send on chat are served (reasoning_effort was a 400 before), a system
// message may stand anywhere, and a bad value is a 400 naming the field.
func TestChatReasoningFields(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, nil)
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`,
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":false}}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"system","content":"later"},{"role":"user","content":"go"}],"chat_template_kwargs":{"enable_thinking":true}}`,
	} {
		if resp := r.post(t, "/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Errorf("%s: %d", body, resp.StatusCode)
		}
	}
	for body, param := range map[string]string{
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"extreme"}`:                     "reasoning_effort",
		`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":"yes"}}`: "chat_template_kwargs.enable_thinking",
	} {
		resp := r.post(t, "/v1/chat/completions", body)
		var e struct{ Error struct{ Code, Param string } }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 400 || e.Error.Code != "invalid_value" || e.Error.Param != param {
			t.Errorf("%s: %d %+v, want invalid_value %s", body, resp.StatusCode, e, param)
		}
	}
}
