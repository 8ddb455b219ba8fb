package server

import (
	"bufio"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sseEvent is one parsed event; comment lines (keep-alives) are counted apart.
type sseEvent struct {
	ID   int64
	Data string
}

// readSSE parses an SSE body until [DONE], EOF, or limit events (0: no limit).
func readSSE(t *testing.T, body io.Reader, limit int) (events []sseEvent, comments int) {
	t.Helper()
	sc := bufio.NewScanner(body)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				events = append(events, cur)
				if cur.Data == "[DONE]" || (limit > 0 && len(events) == limit) {
					return events, comments
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Fatalf("bad id line %q", line)
			}
			cur.ID = id
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events, comments
}

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
func contentOf(t *testing.T, events []sseEvent) (text, finish, errCode string, usage *Usage) {
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
