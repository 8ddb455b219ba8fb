package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestIntegerFieldsRangeChecked: an integer field out of range gets a 400
// naming the field on every generation API (Anthropic's error shape on
// /v1/messages), over the real engine, before any work: never a panic
// (max_tokens = 2^63-1 used to overflow the context check and panic in the
// engine's makechan) and never a silent clamp.
func TestIntegerFieldsRangeChecked(t *testing.T) {
	h := tinyServer(t)
	const huge = "9223372036854775807"
	chat := `{"messages":[{"role":"user","content":"hi"}]%s}`
	prompt := `{"prompt":"hi"%s}`
	bias := make([]string, 301)
	for i := range bias {
		bias[i] = fmt.Sprintf(`"%d":1`, i)
	}
	for _, tc := range []struct {
		path, body, param string
	}{
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"max_tokens":`+huge), "max_tokens"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"max_completion_tokens":`+huge), "max_completion_tokens"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"max_tokens":-1`), "max_tokens"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"min_tokens":`+huge), "min_tokens"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"min_tokens":250`), "min_tokens"}, // past the 256-token context with the prompt
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"max_tokens":250`), "max_tokens"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"n":`+huge), "n"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"logprobs":true,"top_logprobs":`+huge), "top_logprobs"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"seed":18446744073709551616`), "seed"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"top_k":-2`), "top_k"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"logit_bias":{`+strings.Join(bias, ",")+`}`), "logit_bias"},
		{"/v1/completions", fmt.Sprintf(prompt, `,"max_tokens":`+huge), "max_tokens"},
		{"/v1/completions", fmt.Sprintf(prompt, `,"max_tokens":`+huge+`,"n":2`), "max_tokens"},
		{"/v1/completions", fmt.Sprintf(prompt, `,"min_tokens":`+huge), "min_tokens"},
		{"/v1/completions", fmt.Sprintf(prompt, `,"logprobs":`+huge), "logprobs"},
		{"/v1/responses", `{"input":"hi","max_output_tokens":` + huge + `}`, "max_output_tokens"},
		{"/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":` + huge + `}`, "max_tokens"},
		{"/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, "max_tokens"},
	} {
		status, body := post(h, tc.path, tc.body)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Message string  `json:"message"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); status != 400 || err != nil || !strings.Contains(e.Error.Message, tc.param) {
			t.Errorf("POST %s %.80s: %d %s, want 400 naming %s", tc.path, tc.body, status, body, tc.param)
			continue
		}
		if strings.HasPrefix(tc.path, "/v1/messages") {
			if e.Type != "error" {
				t.Errorf("POST %s: not Anthropic's error shape: %s", tc.path, body)
			}
		} else if e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("POST %s %.80s: param %v, want %s", tc.path, tc.body, e.Error.Param, tc.param)
		}
	}
	// The bounds themselves are served.
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", fmt.Sprintf(chat, `,"max_tokens":2,"seed":-9223372036854775808,"logit_bias":{`+strings.Join(bias[:300], ",")+`}`)},
		{"/v1/completions", fmt.Sprintf(prompt, `,"max_tokens":2,"min_tokens":2,"seed":9223372036854775807`)},
	} {
		if status, body := post(h, tc.path, tc.body); status != 200 {
			t.Errorf("POST %s %.80s: %d %s", tc.path, tc.body, status, body)
		}
	}
}
