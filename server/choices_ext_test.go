package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// choicesBody is a whole multi-choice response as these tests read it.
type choicesBody struct {
	Choices []struct {
		Index          int
		Text           string
		Message        struct{ Content string }
		Logprobs       *cmplLogprobs
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	}
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	Usage          struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
}

// TestPromptLogprobsChoices: prompt_logprobs with n > 1 and with a list of
// prompts, computed once per prompt and reported as vLLM does: on
// completions in every choice, its own prompt's; on chat once beside the
// choices. Each equals what a request of one choice for that prompt gets.
func TestPromptLogprobsChoices(t *testing.T) {
	h := tinyServer(t)
	one := func(prompt string) json.RawMessage {
		code, resp := post(h, "/v1/completions", `{"prompt":"`+prompt+`","max_tokens":1,"prompt_logprobs":2}`)
		var c choicesBody
		if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || len(c.Choices) != 1 {
			t.Fatalf("%d %s", code, resp)
		}
		return c.Choices[0].PromptLogprobs
	}
	prompts := []string{"the cat sat", "a dog ran far"}
	want := []json.RawMessage{one(prompts[0]), one(prompts[1])}
	code, resp := post(h, "/v1/completions", `{"prompt":["the cat sat","a dog ran far"],"n":2,"max_tokens":2,"prompt_logprobs":2}`)
	var c choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || len(c.Choices) != 4 {
		t.Fatalf("%d %s", code, resp)
	}
	for i, ch := range c.Choices {
		var pl []promptEntry
		if err := json.Unmarshal(ch.PromptLogprobs, &pl); err != nil {
			t.Fatalf("choice %d: %v: %s", i, err, ch.PromptLogprobs)
		}
		if string(ch.PromptLogprobs) != string(want[i/2]) {
			t.Errorf("choice %d (prompt %q): prompt_logprobs\n%s\nalone:\n%s", i, prompts[i/2], ch.PromptLogprobs, want[i/2])
		}
	}
	chat := `{"messages":[{"role":"user","content":"hello there"}],"max_tokens":2,"prompt_logprobs":1%s}`
	code, resp = post(h, "/v1/chat/completions", fmt.Sprintf(chat, ""))
	var alone choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &alone) != nil {
		t.Fatalf("%d %s", code, resp)
	}
	code, resp = post(h, "/v1/chat/completions", fmt.Sprintf(chat, `,"n":3`))
	var several choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &several) != nil || len(several.Choices) != 3 {
		t.Fatalf("%d %s", code, resp)
	}
	var pl []promptEntry
	_ = json.Unmarshal(several.PromptLogprobs, &pl)
	checkPromptLogprobs(t, "chat n 3", pl, several.Usage.PromptTokens, 1)
	if string(several.PromptLogprobs) != string(alone.PromptLogprobs) {
		t.Errorf("chat n 3: prompt_logprobs\n%s\nalone:\n%s", several.PromptLogprobs, alone.PromptLogprobs)
	}
	for i, ch := range several.Choices {
		if ch.PromptLogprobs != nil {
			t.Errorf("chat choice %d has prompt_logprobs of its own: %s", i, ch.PromptLogprobs)
		}
	}
}

// choiceStream is one choice's share of a completions or chat stream.
type choiceStream struct {
	text     string
	lps      cmplLogprobs
	first    string // the choice's first chunk
	usages   []Usage
	finishes int
}

// readChoices splits a stream's chunks by choice; the usage chunk (no
// choices) is returned apart.
func readChoices(t *testing.T, body string) (map[int]*choiceStream, *Usage) {
	t.Helper()
	out := map[int]*choiceStream{}
	var final *Usage
	for _, d := range sseData(t, body) {
		var c struct {
			Choices []struct {
				Index        int
				Text         string
				Delta        struct{ Content string }
				Logprobs     *cmplLogprobs
				FinishReason *string `json:"finish_reason"`
			}
			Usage *Usage
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err, d)
		}
		if len(c.Choices) == 0 {
			final = c.Usage
			continue
		}
		for _, ch := range c.Choices {
			s := out[ch.Index]
			if s == nil {
				s = &choiceStream{first: d}
				out[ch.Index] = s
			}
			s.text += ch.Text + ch.Delta.Content
			if l := ch.Logprobs; l != nil {
				s.lps.Tokens = append(s.lps.Tokens, l.Tokens...)
				s.lps.TokenLogprobs = append(s.lps.TokenLogprobs, l.TokenLogprobs...)
				s.lps.TextOffset = append(s.lps.TextOffset, l.TextOffset...)
			}
			if c.Usage != nil {
				s.usages = append(s.usages, *c.Usage)
			}
			if ch.FinishReason != nil {
				s.finishes++
			}
		}
	}
	return out, final
}

// TestEchoLogprobsChoices: completions' echo with logprobs for n > 1 and a
// list of prompts: every choice's text and logprobs open with its prompt's
// (the first entry null), as a request of one choice gives them, whole and
// streamed alike (greedy, so every choice of a prompt is the same).
func TestEchoLogprobsChoices(t *testing.T) {
	h := tinyServer(t)
	req := `{"prompt":%s,"max_tokens":3,"temperature":0,"logprobs":1,"echo":true,"ignore_eos":true%s}`
	prompts := []string{"the cat sat", "a dog ran far"}
	var alone []choicesBody
	for _, p := range prompts {
		code, resp := post(h, "/v1/completions", fmt.Sprintf(req, `"`+p+`"`, ""))
		var c choicesBody
		if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || c.Choices[0].Logprobs == nil {
			t.Fatalf("%d %s", code, resp)
		}
		alone = append(alone, c)
	}
	list := `["the cat sat","a dog ran far"]`
	code, resp := post(h, "/v1/completions", fmt.Sprintf(req, list, `,"n":2`))
	var c choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || len(c.Choices) != 4 {
		t.Fatalf("%d %s", code, resp)
	}
	for i, ch := range c.Choices {
		w := alone[i/2].Choices[0]
		got, _ := json.Marshal(ch.Logprobs)
		want, _ := json.Marshal(w.Logprobs)
		if ch.Text != w.Text || string(got) != string(want) || ch.Logprobs.TokenLogprobs[0] != nil {
			t.Errorf("choice %d: %q %s\nalone: %q %s", i, ch.Text, got, w.Text, want)
		}
	}
	code, resp = post(h, "/v1/completions", fmt.Sprintf(req, list, `,"n":2,"stream":true`))
	if code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	streams, _ := readChoices(t, resp)
	if len(streams) != 4 {
		t.Fatalf("%d choices streamed: %s", len(streams), resp)
	}
	for i, s := range streams {
		w := alone[i/2].Choices[0]
		var first struct {
			Choices []struct {
				Text     string
				Logprobs cmplLogprobs
			}
		}
		_ = json.Unmarshal([]byte(s.first), &first)
		if f := first.Choices[0]; f.Text != prompts[i/2] || len(f.Logprobs.Tokens) == 0 || f.Logprobs.TokenLogprobs[0] != nil {
			t.Errorf("choice %d: first chunk %s, want the echoed prompt with its logprobs", i, s.first)
		}
		want, _ := json.Marshal(cmplLogprobs{Tokens: w.Logprobs.Tokens, TokenLogprobs: w.Logprobs.TokenLogprobs, TextOffset: w.Logprobs.TextOffset})
		got, _ := json.Marshal(s.lps)
		if s.text != w.Text || string(got) != string(want) {
			t.Errorf("choice %d streamed %q %s\nalone %q %s", i, s.text, got, w.Text, want)
		}
	}
}

// TestChatEchoChoices: chat's echo with n > 1 puts the final assistant
// message's content before every choice's reply, whole and streamed (after
// the role chunk), as with one choice.
func TestChatEchoChoices(t *testing.T) {
	h := tinyServer(t)
	body := `{"messages":[{"role":"user","content":"Tell me about cats."},{"role":"assistant","content":"Cats are"}],` +
		`"add_generation_prompt":false,"continue_final_message":true,"echo":true,"max_tokens":3,"temperature":0,"ignore_eos":true%s}`
	code, resp := post(h, "/v1/chat/completions", fmt.Sprintf(body, ""))
	var alone choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &alone) != nil {
		t.Fatalf("%d %s", code, resp)
	}
	want := alone.Choices[0].Message.Content
	if !strings.HasPrefix(want, "Cats are") || alone.Usage.CompletionTokens != 3 {
		t.Fatalf("one choice: %q", want)
	}
	code, resp = post(h, "/v1/chat/completions", fmt.Sprintf(body, `,"n":3`))
	var c choicesBody
	if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || len(c.Choices) != 3 {
		t.Fatalf("%d %s", code, resp)
	}
	for i, ch := range c.Choices {
		if ch.Message.Content != want {
			t.Errorf("choice %d: %q, want %q", i, ch.Message.Content, want)
		}
	}
	code, resp = post(h, "/v1/chat/completions", fmt.Sprintf(body, `,"n":3,"stream":true`))
	if code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	streams, _ := readChoices(t, resp)
	for i := range 3 {
		if s := streams[i]; s == nil || s.text != want {
			t.Errorf("choice %d streamed %+v, want %q", i, s, want)
		}
	}
}

// TestContinuousUsageChoices: continuous_usage_stats with n > 1 and a list
// of prompts: every choice chunk carries vLLM's per-choice usage (its
// prompt's tokens, its own tokens so far, counting up to max_tokens), and
// the final usage chunk the sums (each prompt once).
func TestContinuousUsageChoices(t *testing.T) {
	h := tinyServer(t)
	prompt := func(p string) int {
		code, resp := post(h, "/v1/completions", `{"prompt":"`+p+`","max_tokens":1}`)
		var c choicesBody
		if code != 200 || json.Unmarshal([]byte(resp), &c) != nil {
			t.Fatalf("%d %s", code, resp)
		}
		return c.Usage.PromptTokens
	}
	p := []int{prompt("the cat"), prompt("a dog ran far")}
	code, resp := post(h, "/v1/completions", `{"prompt":["the cat","a dog ran far"],"n":2,"max_tokens":4,"ignore_eos":true,"stream":true,`+
		`"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	streams, final := readChoices(t, resp)
	if len(streams) != 4 || final == nil {
		t.Fatalf("%d choices, final usage %v: %s", len(streams), final, resp)
	}
	for i, s := range streams {
		last := -1
		for _, u := range s.usages {
			if u.PromptTokens != p[i/2] || u.CompletionTokens < last || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Fatalf("choice %d: usage %+v after %d tokens, prompt %d", i, u, last, p[i/2])
			}
			last = u.CompletionTokens
		}
		if s.finishes != 1 || len(s.usages) < 2 || last != 4 {
			t.Errorf("choice %d: %d usages ending at %d tokens, %d finishes", i, len(s.usages), last, s.finishes)
		}
	}
	if final.PromptTokens != p[0]+p[1] || final.CompletionTokens != 16 {
		t.Errorf("final usage %+v, want %d prompt and 16 completion tokens", final, p[0]+p[1])
	}
}

// TestChatEchoLogprobs: chat's echo beside logprobs gives the reply's
// logprobs in chat's shape, the generated tokens only, as vLLM's chat does
// (the echoed message is no generation of this request), for one choice
// and for each of n; completions' echo is the one that leads with the
// prompt's.
func TestChatEchoLogprobs(t *testing.T) {
	h := tinyServer(t)
	for _, n := range []int{1, 2} {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"The quick"}],"add_generation_prompt":false,`+
			`"continue_final_message":true,"echo":true,"logprobs":true,"max_tokens":3,"ignore_eos":true,"n":%d}`, n)
		code, resp := post(h, "/v1/chat/completions", body)
		var c struct {
			Choices []struct {
				Message  struct{ Content string }
				Logprobs struct {
					Content []struct {
						Token   string
						Logprob float64
					}
					Tokens []string
				}
			}
		}
		if code != 200 || json.Unmarshal([]byte(resp), &c) != nil || len(c.Choices) != n {
			t.Fatalf("n %d: %d %s", n, code, resp)
		}
		for i, ch := range c.Choices {
			if !strings.HasPrefix(ch.Message.Content, "The quick") || len(ch.Logprobs.Content) != 3 || ch.Logprobs.Tokens != nil {
				t.Errorf("n %d, choice %d: %q with logprobs %+v, want chat's shape with the 3 generated tokens", n, i, ch.Message.Content, ch.Logprobs)
			}
		}
	}
}
