package server

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestTokenizeContinuation: /tokenize and /v1/chat/completions/render take
// vLLM's add_generation_prompt false and continue_final_message as chat
// does: the ids are the prompt a generation with the same fields is given
// (its usage counts them), the continued prompt stops right after the
// final message's text, the one without the generation prompt after the
// final turn, both a proper prefix of the default rendering; chat's rules
// are 400s naming the field.
func TestTokenizeContinuation(t *testing.T) {
	h := renderServer(t) // SmolLM2's ChatML, with the render routes
	const msgs = `"messages":[{"role":"user","content":"Name an animal."},{"role":"assistant","content":"The quick brown"}]`
	ids := func(path, body string) []int32 {
		t.Helper()
		code, resp := post(h, path, body)
		var r struct {
			Tokens   []int32 `json:"tokens"`
			TokenIDs []int32 `json:"token_ids"`
		}
		if code != 200 || json.Unmarshal([]byte(resp), &r) != nil {
			t.Fatalf("%s %s: %d %s", path, body, code, resp)
		}
		return append(r.Tokens, r.TokenIDs...)
	}
	full := ids("/tokenize", `{`+msgs+`}`)
	var prev []int32
	for _, fields := range []string{`"add_generation_prompt":false`, `"add_generation_prompt":false,"continue_final_message":true`} {
		got := ids("/tokenize", `{`+msgs+`,`+fields+`}`)
		if len(got) >= len(full) || !slices.Equal(got, full[:len(got)]) {
			t.Errorf("%s: %v, want a proper prefix of %v", fields, got, full)
		}
		if prev != nil && len(got) >= len(prev) {
			t.Errorf("%s: %d ids, not fewer than the %d without continue_final_message", fields, len(got), len(prev))
		}
		prev = got
		if r := ids("/v1/chat/completions/render", `{`+msgs+`,`+fields+`}`); !slices.Equal(r, got) {
			t.Errorf("%s: render %v, /tokenize %v", fields, r, got)
		}
		if n := promptTokens(t, h, "/v1/chat/completions", `{`+msgs+`,`+fields+`,"max_tokens":1}`); n != len(got) {
			t.Errorf("%s: generation's prompt %d tokens, /tokenize %d", fields, n, len(got))
		}
	}
	for body, param := range map[string]string{
		`{` + msgs + `,"continue_final_message":true}`:                                                             "continue_final_message",
		`{` + msgs + `,"continue_final_message":true,"add_generation_prompt":true}`:                                "continue_final_message",
		`{` + msgs + `,"add_generation_prompt":"no"}`:                                                              "add_generation_prompt",
		`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false,"continue_final_message":true}`: "continue_final_message",
		`{"prompt":"x","add_generation_prompt":false}`:                                                             "add_generation_prompt",
		`{` + msgs + `,"add_generation_prompt":false,"add_special_tokens":true}`:                                   "add_special_tokens",
	} {
		code, resp := post(h, "/tokenize", body)
		var e struct{ Error struct{ Param string } }
		if code != 400 || json.Unmarshal([]byte(resp), &e) != nil || e.Error.Param != param {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, code, resp, param)
		}
	}
}
