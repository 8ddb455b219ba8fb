package stream_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// TestContextLengthExceeded: a prompt the context cannot hold, or that
// leaves too little room for max_tokens, is OpenAI's context_length_exceeded
// (400) naming the field to shorten, on every transport through the table.
func TestContextLengthExceeded(t *testing.T) {
	b := &stream.Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: streamtest.NewPieceVocab(), ContextLen: 16}
	for _, tc := range []struct {
		g     stream.GenRequest
		param string
	}{
		{stream.GenRequest{Prompt: strings.Repeat("x", 16)}, "prompt"},
		{stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{{Role: "user", Content: strings.Repeat("x", 16)}}}, "messages"},
		{stream.GenRequest{Prompt: "xxxx", MaxTokens: 13}, "max_tokens"},
	} {
		_, err := stream.Prepare(b, &tc.g)
		c := stream.Classify(err)
		if c.HTTP != 400 || c.Code != "context_length_exceeded" || c.Param != tc.param || c.Anthropic != "invalid_request_error" {
			t.Errorf("%+v: %v → %+v", tc.g, err, c)
		}
	}
	if _, err := stream.Prepare(b, &stream.GenRequest{Prompt: "xxxx", MaxTokens: 12}); err != nil {
		t.Errorf("a request that fits: %v", err)
	}
}
