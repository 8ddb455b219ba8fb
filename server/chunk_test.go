package server

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendJSONString checks the hand-written escaper against
// encoding/json: it must always produce a JSON string that decodes to the
// input (to its valid-UTF-8 reading, for invalid input).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\n\r\t\x00\x1f", "日本語", "👩\u200d💻", "\u2028\u2029", "bad\xff\xfe", "<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, enc, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = string([]rune(s)) // invalid bytes read as U+FFFD
		}
		if got != want {
			t.Fatalf("%q round-tripped to %q", s, got)
		}
	})
}

func TestChunkFormat(t *testing.T) {
	type wireChunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta *struct {
				Role    *string `json:"role"`
				Content *string `json:"content"`
			} `json:"delta"`
			Text         *string `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	chat := newChunkFormat(true, "chatcmpl-1", `m"odel`, 42)
	text := newChunkFormat(false, "cmpl-1", "m", 42)
	tests := []struct {
		name  string
		build func() []byte
		check func(c wireChunk) bool
	}{
		{"chat role", func() []byte { return chat.role(nil) }, func(c wireChunk) bool {
			return c.Object == "chat.completion.chunk" && c.Model == `m"odel` && *c.Choices[0].Delta.Role == "assistant" && c.Choices[0].FinishReason == nil
		}},
		{"chat content", func() []byte { return chat.content(nil, "日本\n\"x\"") }, func(c wireChunk) bool {
			return c.ID == "chatcmpl-1" && c.Created == 42 && *c.Choices[0].Delta.Content == "日本\n\"x\""
		}},
		{"chat finish", func() []byte { return chat.finish(nil, "length") }, func(c wireChunk) bool {
			return *c.Choices[0].FinishReason == "length" && c.Choices[0].Delta.Content == nil
		}},
		{"usage", func() []byte { return chat.usage(nil, Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}) }, func(c wireChunk) bool {
			return len(c.Choices) == 0 && c.Usage.PromptTokens == 3 && c.Usage.CompletionTokens == 4 && c.Usage.TotalTokens == 7
		}},
		{"completion content", func() []byte { return text.content(nil, "hi") }, func(c wireChunk) bool {
			return c.Object == "text_completion" && *c.Choices[0].Text == "hi"
		}},
		{"completion finish", func() []byte { return text.finish(nil, "stop") }, func(c wireChunk) bool {
			return *c.Choices[0].Text == "" && *c.Choices[0].FinishReason == "stop"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.build()
			var c wireChunk
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if !tt.check(c) {
				t.Errorf("unexpected chunk %s", raw)
			}
		})
	}
}
