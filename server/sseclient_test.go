package server

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// streamChunk is the part of a chunk the tests look at.
type streamChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage            `json:"usage"`
	Error map[string]string `json:"error"`
}

// contentOf concatenates the text of a stream's content chunks and returns
// the finish reason and the error code, if any.
func contentOf(t *testing.T, events []ssetest.Event) (text, finish, errCode string, usage *Usage) {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		if ev.Data == "[DONE]" {
			continue
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("event %d: %v: %s", ev.ID, err, ev.Data)
		}
		if c.Error != nil {
			errCode = c.Error["code"]
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content + ch.Text)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return b.String(), finish, errCode, usage
}

func regexpMust(p string) *regexp.Regexp { return regexp.MustCompile(p) }
