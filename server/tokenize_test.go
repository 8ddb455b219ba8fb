package server

import (
	"encoding/json"
	"testing"
)

// TestTokenizeDetokenize: vLLM's shapes; a prompt gets the tokenizer's
// encoding, messages the chat template's, and what vLLM offers that Sluice
// cannot do is refused, naming the field.
func TestTokenizeDetokenize(t *testing.T) {
	r := newRig(t, []string{"a"}, 0, nil)
	var tok struct {
		Count       int     `json:"count"`
		MaxModelLen int     `json:"max_model_len"`
		Tokens      []int32 `json:"tokens"`
	}
	resp := r.post(t, "/tokenize", `{"model":"test-model","prompt":"hey"}`)
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 ||
		tok.Count != 3 || tok.MaxModelLen != 64 || len(tok.Tokens) != 3 || tok.Tokens[0] != 'h' {
		t.Fatalf("tokenize: %d %+v %v", resp.StatusCode, tok, err)
	}
	resp = r.post(t, "/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`)
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.Count != len("<user>hi\n<assistant>") {
		t.Errorf("tokenize messages: %d %+v %v", resp.StatusCode, tok, err)
	}
	var de struct{ Prompt string }
	resp = r.post(t, "/detokenize", `{"tokens":[104,105]}`)
	if err := json.NewDecoder(resp.Body).Decode(&de); err != nil || de.Prompt != "hi" {
		t.Errorf("detokenize: %d %+v %v", resp.StatusCode, de, err)
	}
	for body, param := range map[string]string{
		`{"prompt":"x","return_token_strs":true}`:                              "return_token_strs",
		`{"messages":[{"role":"user","content":"x"}],"chat_template":"{{x}}"}`: "chat_template",
		`{"prompt":"x","messages":[{"role":"user","content":"x"}]}`:            "prompt",
		`{"prompt":7}`: "prompt",
	} {
		resp := r.post(t, "/tokenize", body)
		var e struct{ Error struct{ Param string } }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 400 || e.Error.Param != param {
			t.Errorf("%s: %d %+v, want param %s", body, resp.StatusCode, e, param)
		}
	}
	if resp := r.post(t, "/detokenize", `{"tokens":[-1]}`); resp.StatusCode != 400 {
		t.Errorf("negative id: %d", resp.StatusCode)
	}
}
