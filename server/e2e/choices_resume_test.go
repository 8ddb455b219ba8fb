package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// TestChoicesResumeEqualsUninterrupted: an n=3 seeded stream on the real
// model, cut mid-generation and resumed with the same POST carrying its id
// and Last-Event-ID, gives each choice the text and finish of the
// uninterrupted stream: the cut choices continue as sequences of their own
// (the group's fork does not survive the cut) with their own seed and
// sampler position.
func TestChoicesResumeEqualsUninterrupted(t *testing.T) {
	r := getRig(t)
	const body = `{"messages":[{"role":"user","content":"Tell me about the ocean."}],"max_tokens":30,"stream":true,"n":3,` +
		`"temperature":0.9,"seed":5,"stream_options":{"include_usage":true}}`
	byChoice := func(events []ssetest.Event) (text, finish [3]string, usage string) {
		for _, ev := range events {
			if ev.Data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Index int
					Delta struct{ Content string }
					// finish_reason: null until the choice's last chunk
					FinishReason *string `json:"finish_reason"`
				}
				Usage json.RawMessage
			}
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
				t.Fatalf("event %d: %v: %s", ev.ID, err, ev.Data)
			}
			if len(c.Usage) > 0 && string(c.Usage) != "null" {
				// Counts only: the second request finds the first's prompt
				// in the prefix cache.
				var u struct {
					Prompt     int `json:"prompt_tokens"`
					Completion int `json:"completion_tokens"`
					Total      int `json:"total_tokens"`
				}
				if err := json.Unmarshal(c.Usage, &u); err != nil {
					t.Fatal(err)
				}
				usage = fmt.Sprintf("%+v", u)
			}
			for _, ch := range c.Choices {
				text[ch.Index] += ch.Delta.Content
				if ch.FinishReason != nil {
					finish[ch.Index] = *ch.FinishReason
				}
			}
		}
		return text, finish, usage
	}
	wantText, wantFinish, wantUsage := byChoice(ssetest.Read(t, bufio.NewReader(r.post(t, "/v1/chat/completions", body).Body), 0))

	resp := r.post(t, "/v1/chat/completions", body)
	id := resp.Header.Get("X-Sluice-Stream-Id")
	first := ssetest.Read(t, bufio.NewReader(resp.Body), 12)
	resp.Body.Close()
	r.waitIdle(t, 2*time.Second) // the disconnect aborted every choice and freed its blocks
	last := first[len(first)-1].ID
	again := r.post(t, "/v1/chat/completions", body, "X-Sluice-Stream-Id", id, "Last-Event-ID", strconv.FormatInt(last, 10))
	defer again.Body.Close()
	if again.StatusCode != 200 {
		t.Fatalf("resume: %s", again.Status)
	}
	rest := ssetest.Read(t, bufio.NewReader(again.Body), 0)
	for i, ev := range rest {
		if ev.ID != last+1+int64(i) {
			t.Fatalf("resumed event %d has id %d, want %d", i, ev.ID, last+1+int64(i))
		}
	}
	text, finish, usage := byChoice(append(first, rest...))
	if text != wantText || finish != wantFinish || usage != wantUsage {
		t.Errorf("resumed %q %q %s\nuninterrupted %q %q %s", text, finish, usage, wantText, wantFinish, wantUsage)
	}
	if text[0] == text[1] && text[1] == text[2] {
		t.Errorf("three equal choices: the seeds did not differ")
	}
	r.waitIdle(t, 5*time.Second)
	t.Logf("cut after event %d of %d; usage %s", last, last+int64(len(rest)), usage)
}
