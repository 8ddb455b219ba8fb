package server

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestUnservedRefused: a field Sluice cannot honour, given a value that asks
// for something, is a 400 unsupported_parameter naming it on both endpoints;
// the same field with a value that asks for nothing passes (an unknown
// field is refused: TestUnknownFieldRefused).
func TestUnservedRefused(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, nil)
	const chat = `{"messages":[{"role":"user","content":"hi"}]%s}`
	const cmpl = `{"prompt":"hi"%s}`
	for _, tc := range []struct {
		body, param string
	}{
		{fmt.Sprintf(chat, `,"allowed_token_ids":[1,2]`), "allowed_token_ids"},
		{fmt.Sprintf(chat, `,"store":true`), "store"},
		{fmt.Sprintf(chat, `,"metadata":{"a":"b"}`), "metadata"},
		{fmt.Sprintf(chat, `,"chat_template_kwargs":{"add_vision_id":true}`), "chat_template_kwargs.add_vision_id"},
		{fmt.Sprintf(cmpl, `,"chat_template_kwargs":{"enable_thinking":false}`), "chat_template_kwargs"},
		{fmt.Sprintf(chat, `,"modalities":["text","audio"]`), "modalities"},
		{fmt.Sprintf(chat, `,"service_tier":"flex"`), "service_tier"},
		{fmt.Sprintf(chat, `,"skip_special_tokens":false`), "skip_special_tokens"},
		{fmt.Sprintf(chat, `,"add_special_tokens":true`), "add_special_tokens"},
		{fmt.Sprintf(chat, `,"chat_template":"{{x}}"`), "chat_template"},
		{fmt.Sprintf(cmpl, `,"best_of":2`), "best_of"},
		{fmt.Sprintf(cmpl, `,"suffix":"end"`), "suffix"},
		{fmt.Sprintf(cmpl, `,"add_special_tokens":false`), "add_special_tokens"},
		{fmt.Sprintf(cmpl, `,"bad_words":["x"]`), "bad_words"},
		// The earliest field of the list is named, whatever the body's order.
		{fmt.Sprintf(cmpl, `,"suffix":"x","audio":{"voice":"v"}`), "audio"},
	} {
		resp := r.post(t, pathFor(tc.body), tc.body)
		var e struct{ Error struct{ Code, Param string } }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 400 || e.Error.Code != "unsupported_parameter" || e.Error.Param != tc.param {
			t.Errorf("%s: %d %+v, want unsupported_parameter %s", tc.body, resp.StatusCode, e, tc.param)
		}
	}
	for _, body := range []string{
		fmt.Sprintf(chat, `,"logprobs":false,"top_logprobs":0,"allowed_token_ids":[],"store":false,"metadata":{},"tool_choice":"none","modalities":["text"],"service_tier":"auto","skip_special_tokens":true,"add_special_tokens":false`),
		fmt.Sprintf(cmpl, `,"echo":false,"best_of":1,"suffix":null,"add_special_tokens":true,"bad_words":[]`),
	} {
		if resp := r.post(t, pathFor(body), body); resp.StatusCode != 200 {
			t.Errorf("%s: %d", body, resp.StatusCode)
		}
	}
}

func pathFor(body string) string {
	if json.Valid([]byte(body)) && body[2] == 'm' {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}
