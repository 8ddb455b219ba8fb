package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// indexedChunk is a streamed chunk with its choices' indexes.
type indexedChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

// choicesOf reads a multi-choice stream: each index's text, role and finish.
func choicesOf(t *testing.T, resp *http.Response) (text, role, finish map[int]string, usage *Usage) {
	t.Helper()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return choicesOfEvents(t, ssetest.Read(t, bufio.NewReader(resp.Body), 0))
}

// choicesOfEvents is choicesOf over events already read, which must end
// with [DONE]; no choice may have a chunk after its finish.
func choicesOfEvents(t *testing.T, events []ssetest.Event) (text, role, finish map[int]string, usage *Usage) {
	t.Helper()
	text, role, finish = map[int]string{}, map[int]string{}, map[int]string{}
	if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", events)
	}
	for _, ev := range events[:len(events)-1] {
		var c indexedChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("event %d: %v: %s", ev.ID, err, ev.Data)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if _, done := finish[ch.Index]; done {
				t.Fatalf("choice %d has a chunk after its finish: %s", ch.Index, ev.Data)
			}
			text[ch.Index] += ch.Delta.Content + ch.Text
			role[ch.Index] += ch.Delta.Role
			if ch.FinishReason != nil {
				finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return text, role, finish, usage
}

func TestChatChoicesStreamed(t *testing.T) {
	rig := newRig(t, []string{"Hel", "lo"}, time.Millisecond, nil)
	resp := rig.post(t, "/v1/chat/completions", fmt.Sprintf(chatBody, testModel, true, `,"n":3,"seed":9,"stream_options":{"include_usage":true}`))
	if id := resp.Header.Get(streamIDHeader); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("a multi-choice stream names stream %q for a resume, want its chatcmpl- id", id)
	}
	text, role, finish, usage := choicesOf(t, resp)
	for i := range 3 {
		if text[i] != "Hello" || role[i] != "assistant" || finish[i] != "stop" {
			t.Errorf("choice %d: %q role %q finish %q", i, text[i], role[i], finish[i])
		}
	}
	if len(text) != 3 {
		t.Errorf("indexes %v, want 0..2", text)
	}
	prompt := len("<user>hi\n<assistant>")
	if usage == nil || usage.PromptTokens != prompt || usage.CompletionTokens != 6 || usage.TotalTokens != prompt+6 {
		t.Errorf("usage %+v: the prompt once, 3×2 completion tokens", usage)
	}
	seeds := map[uint64]bool{}
	for _, r := range rig.eng.Submits() {
		seeds[*r.Sampling.Seed] = true
	}
	if !seeds[9] || !seeds[10] || !seeds[11] {
		t.Errorf("seeds %v, want 9, 10, 11", seeds)
	}
}

func TestChatChoicesWhole(t *testing.T) {
	rig := newRig(t, []string{"Hel", "lo"}, 0, nil)
	resp := rig.post(t, "/v1/chat/completions", fmt.Sprintf(chatBody, testModel, false, `,"n":2`))
	var body completionResponse
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if len(body.Choices) != 2 {
		t.Fatalf("%d choices", len(body.Choices))
	}
	for i, c := range body.Choices {
		if c.Index != i || c.Message == nil || c.Message.Content != "Hello" || c.FinishReason != "stop" {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	if u := body.Usage; u.CompletionTokens != 4 || u.PromptTokens != len("<user>hi\n<assistant>") {
		t.Errorf("usage %+v", u)
	}
}

// A list of prompts with n: index = prompt*n + j, echo per prompt, streamed
// and whole; a token-id prompt counts its own tokens.
func TestCompletionPromptList(t *testing.T) {
	rig := newRig(t, []string{"!"}, time.Millisecond, nil)
	const body = `{"prompt":["ab",[99,100,101]],"n":2,"echo":true,"stream":%v,"max_tokens":1%s}`
	want := []string{"ab!", "ab!", "cde!", "cde!"}
	text, _, finish, usage := choicesOf(t, rig.post(t, "/v1/completions", fmt.Sprintf(body, true, `,"stream_options":{"include_usage":true}`)))
	for i, w := range want {
		if text[i] != w || finish[i] == "" {
			t.Errorf("streamed choice %d: %q finish %q, want %q", i, text[i], finish[i], w)
		}
	}
	if usage == nil || usage.PromptTokens != 5 || usage.CompletionTokens != 4 {
		t.Errorf("usage %+v, want 2+3 prompt tokens and 4 completion tokens", usage)
	}
	resp := rig.post(t, "/v1/completions", fmt.Sprintf(body, false, ""))
	var whole completionResponse
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 4 {
		t.Fatalf("%d choices", len(whole.Choices))
	}
	for i, c := range whole.Choices {
		if c.Index != i || c.Text == nil || *c.Text != want[i] {
			t.Errorf("choice %d: %+v, want %q", i, c, want[i])
		}
	}
}

func TestChoicesRefused(t *testing.T) {
	rig := newRig(t, []string{"x"}, 0, nil)
	for _, body := range []string{
		`{"prompt":"x","n":17}`, `{"prompt":"x","n":0}`, `{"prompt":["a","b","c","d","e"],"n":16}`,
	} {
		resp := rig.post(t, "/v1/completions", body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"n"`) {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	if n := len(rig.eng.Submits()); n != 0 {
		t.Errorf("%d submits for refused requests", n)
	}
}
