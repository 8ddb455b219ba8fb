package e2e

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestEcho on the default model: echo puts the prompt, as sent, before the
// completion, whole and as a stream's first chunk, and the completion after
// it equals the one without echo.
func TestEcho(t *testing.T) {
	r := getRig(t)
	const prompt = "The capital of France is"
	plain, _ := r.complete(t, `{"prompt":"`+prompt+`","max_tokens":8,"temperature":0}`)
	echoed, _ := r.complete(t, `{"prompt":"`+prompt+`","max_tokens":8,"temperature":0,"echo":true}`)
	if echoed != prompt+plain {
		t.Errorf("echo: %q, want %q", echoed, prompt+plain)
	}
	events := ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/completions", `{"prompt":"`+prompt+`","max_tokens":8,"temperature":0,"echo":true,"stream":true}`).Body), 0)
	var first chunk
	if err := json.Unmarshal([]byte(events[0].Data), &first); err != nil || first.Choices[0].Text != prompt {
		t.Errorf("first chunk %s", events[0].Data)
	}
	if s := decode(t, events); s.text != prompt+plain || !strings.HasPrefix(s.text, prompt) {
		t.Errorf("streamed echo %q", s.text)
	}
}
