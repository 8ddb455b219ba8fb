package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// TestTokenizeRoundTrip on the real tokenizer: /detokenize inverts
// /tokenize, and /tokenize of a chat counts what a chat completion reports
// as its prompt tokens.
func TestTokenizeRoundTrip(t *testing.T) {
	r := getRig(t)
	var tok struct {
		Count  int     `json:"count"`
		Tokens []int32 `json:"tokens"`
	}
	text := "Héllo, wörld — 東京 🚀!"
	decodeJSON(t, r.post(t, "/tokenize", fmt.Sprintf(`{"prompt":%q,"add_special_tokens":false}`, text)).Body, &tok)
	ids, _ := json.Marshal(tok.Tokens)
	var de struct{ Prompt string }
	decodeJSON(t, r.post(t, "/detokenize", fmt.Sprintf(`{"tokens":%s}`, ids)).Body, &de)
	if tok.Count != len(tok.Tokens) || tok.Count == 0 || de.Prompt != text {
		t.Errorf("round trip: %d tokens %v → %q", tok.Count, tok.Tokens, de.Prompt)
	}
	msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the capital of France?"}]`
	decodeJSON(t, r.post(t, "/tokenize", `{"messages":`+msgs+`}`).Body, &tok)
	var chat struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	decodeJSON(t, r.post(t, "/v1/chat/completions", `{"max_tokens":1,"messages":`+msgs+`}`).Body, &chat)
	if tok.Count != chat.Usage.PromptTokens || tok.Count == 0 {
		t.Errorf("tokenize counts %d, the chat's usage %d", tok.Count, chat.Usage.PromptTokens)
	}
}

func decodeJSON(t *testing.T, body io.Reader, v any) {
	t.Helper()
	raw, _ := io.ReadAll(body)
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}
