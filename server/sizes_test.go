package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every endpoint that renders or tokenizes applies the request limits
// first: /tokenize and count_tokens used to render 2,101 messages and
// tokenize 1.5 MiB that generation refuses, and /detokenize had no bound.
func TestSizeLimitsOnEveryEndpoint(t *testing.T) {
	h := tinyServer(t)
	msgs := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"hi"},`, 2101), ",")
	big := strings.Repeat("a", 3<<19) // 1.5 MiB
	ids := strings.TrimSuffix(strings.Repeat("5,", 1<<18+1), ",")
	for _, tc := range []struct{ path, body string }{
		{"/tokenize", `{"messages":[` + msgs + `]}`},
		{"/v1/messages/count_tokens", `{"messages":[` + msgs + `]}`},
		{"/v1/chat/completions", `{"messages":[` + msgs + `]}`},
		{"/tokenize", `{"prompt":"` + big + `"}`},
		{"/tokenize", `{"messages":[{"role":"user","content":"` + big + `"}]}`},
		{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"` + big + `"}]}`},
		{"/v1/completions", `{"prompt":"` + big + `"}`},
		{"/detokenize", `{"tokens":[` + ids + `]}`},
		{"/v1/completions", `{"prompt":[` + ids + `]}`},
	} {
		status, body := post(h, tc.path, tc.body)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if status != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error.Message, "at most") {
			t.Errorf("POST %s (%d bytes): %d %.300s", tc.path, len(tc.body), status, body)
		}
	}
}

// A prompt whose length alone proves it cannot fit the context is refused
// before it is tokenized. On SmolLM2 no token stands for more than 81
// bytes, so 1,000,000 bytes are at least 12,346 tokens: past any context
// this model serves. The code before tokenized all of it first (~320 ms
// of CPU on the machine).
func TestSmolLongPromptRefusedUntokenized(t *testing.T) {
	h := smolServer(t)
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1_000_000/45)
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, prompt)},
		{"/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":1}`, prompt)},
	} {
		start := time.Now()
		status, body := post(h, tc.path, tc.body)
		took := time.Since(start)
		if status != 400 || !strings.Contains(body, "context_length_exceeded") || !strings.Contains(body, "at least") {
			t.Errorf("%s: %d %.300s", tc.path, status, body)
		}
		t.Logf("%s: %d-byte prompt refused in %v", tc.path, len(prompt), took)
	}
}
