package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type completionOut struct {
	Choices []struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// TestEngineControls on the default model: logit_bias +100 makes a token
// the whole output, -100 bans the greedy first token, ignore_eos runs a
// reply that ends by itself on to max_tokens, min_tokens keeps it from
// ending early, stop_token_ids ends it at a chosen token.
func TestEngineControls(t *testing.T) {
	r := getRig(t)
	var tok struct{ Tokens []int32 }
	decodeJSON(t, r.post(t, "/tokenize", `{"prompt":" banana","add_special_tokens":false}`).Body, &tok)
	if len(tok.Tokens) != 1 {
		t.Fatalf("\" banana\" is %v", tok.Tokens)
	}
	banana := tok.Tokens[0]
	chat := func(extra string) completionOut {
		t.Helper()
		var out completionOut
		body := `{"messages":[{"role":"user","content":"Say hi."}],"temperature":0` + extra + `}`
		resp := r.post(t, "/v1/chat/completions", body)
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
			t.Fatalf("%s: %d %v", body, resp.StatusCode, err)
		}
		return out
	}
	if got := chat(fmt.Sprintf(`,"max_tokens":4,"logit_bias":{"%d":100}`, banana)); got.Choices[0].Message.Content != strings.Repeat(" banana", 4)[1:] &&
		got.Choices[0].Message.Content != strings.Repeat(" banana", 4) {
		t.Errorf("+100 on banana: %q", got.Choices[0].Message.Content)
	}
	natural := chat(`,"max_tokens":64`)
	if natural.Choices[0].FinishReason != "stop" || natural.Usage.CompletionTokens >= 64 {
		t.Fatalf("want a reply that ends by itself within 64 tokens: %+v", natural)
	}
	n := natural.Usage.CompletionTokens
	if got := chat(fmt.Sprintf(`,"max_tokens":%d,"ignore_eos":true`, n+5)); got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != n+5 {
		t.Errorf("ignore_eos: %+v (natural %d tokens)", got, n)
	}
	if got := chat(fmt.Sprintf(`,"max_tokens":%d,"min_tokens":%d`, n+20, n+3)); got.Usage.CompletionTokens < n+3 {
		t.Errorf("min_tokens %d: %d tokens", n+3, got.Usage.CompletionTokens)
	}
	decodeJSON(t, r.post(t, "/tokenize", fmt.Sprintf(`{"prompt":%q,"add_special_tokens":false}`, natural.Choices[0].Message.Content)).Body, &tok)
	if len(tok.Tokens) < 3 {
		t.Fatalf("reply too short to stop inside: %q", natural.Choices[0].Message.Content)
	}
	stop := tok.Tokens[2]
	got := chat(fmt.Sprintf(`,"max_tokens":64,"stop_token_ids":[%d]`, stop))
	if got.Choices[0].FinishReason != "stop" || !strings.HasPrefix(natural.Choices[0].Message.Content, got.Choices[0].Message.Content) ||
		len(got.Choices[0].Message.Content) >= len(natural.Choices[0].Message.Content) {
		t.Errorf("stop at token %d: %q (natural %q)", stop, got.Choices[0].Message.Content, natural.Choices[0].Message.Content)
	}
}
