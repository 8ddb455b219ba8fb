package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
)

// sseData is the data payloads of an SSE body, [DONE] left out.
func sseData(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no events in %q", body)
	}
	return out
}

// errParam posts body and returns the param of the 400 it must get.
func errParam(t *testing.T, h http.Handler, body string) string {
	t.Helper()
	code, resp := post(h, pathFor(body), body)
	body = resp
	var e struct{ Error struct{ Param string } }
	if code != 400 || json.Unmarshal([]byte(body), &e) != nil {
		t.Fatalf("want a 400 error, got %d %s", code, body)
	}
	return e.Error.Param
}

type promptEntry map[string]struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken *string `json:"decoded_token"`
}

// checkPromptLogprobs: vLLM's shape, null first, then the prompt's token
// and up to k others per position.
func checkPromptLogprobs(t *testing.T, what string, pl []promptEntry, n, k int) {
	t.Helper()
	if len(pl) != n || n < 2 || pl[0] != nil {
		t.Fatalf("%s: %d entries (first %v), want %d with null first", what, len(pl), pl, n)
	}
	for i, e := range pl[1:] {
		if len(e) < 1 || len(e) > k+1 {
			t.Fatalf("%s: position %d has %d entries, want 1 to %d: %v", what, i+1, len(e), k+1, e)
		}
		for id, v := range e {
			if v.Logprob > 0 || v.Rank < 1 || v.DecodedToken == nil || id == "" {
				t.Fatalf("%s: position %d: %s: %+v", what, i+1, id, v)
			}
		}
	}
}

// TestPromptLogprobsHTTP: prompt_logprobs on chat (beside the choices) and
// completions (in the choice), in vLLM's shape, one entry per prompt token;
// never from the prefix cache; refused on a stream (vLLM's rule), for -1,
// past 20, and with several choices.
func TestPromptLogprobsHTTP(t *testing.T) {
	h := tinyServer(t)
	for range 2 { // the second finds the prompt cached, and must not use it
		code, body := post(h, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hello there"}],"max_tokens":2,"prompt_logprobs":3}`)
		var chat struct {
			PromptLogprobs []promptEntry `json:"prompt_logprobs"`
			Usage          Usage
			Raw            struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &chat) != nil {
			t.Fatalf("%d %s", code, body)
		}
		_ = json.Unmarshal([]byte(body), &struct{ Usage *Usage }{&chat.Usage})
		checkPromptLogprobs(t, "chat", chat.PromptLogprobs, chat.Usage.PromptTokens, 3)
		if chat.Raw.Details.Cached != 0 {
			t.Fatalf("%d prompt tokens cached: %s", chat.Raw.Details.Cached, body)
		}
	}
	code, body := post(h, "/v1/completions", `{"prompt":"the cat sat","max_tokens":2,"prompt_logprobs":0}`)
	var cmpl struct {
		Choices []struct {
			PromptLogprobs []promptEntry `json:"prompt_logprobs"`
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &cmpl) != nil || len(cmpl.Choices) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	checkPromptLogprobs(t, "completions", cmpl.Choices[0].PromptLogprobs, cmpl.Usage.PromptTokens, 0)
	for _, e := range cmpl.Choices[0].PromptLogprobs[1:] {
		if len(e) != 1 { // k = 0: the prompt's own token only
			t.Fatalf("prompt_logprobs 0: %v", e)
		}
	}
	for body, param := range map[string]string{
		`{"prompt":"x","prompt_logprobs":2,"stream":true}`:                                                         "prompt_logprobs",
		`{"messages":[{"role":"user","content":"x"}],"prompt_logprobs":1,"stream":true}`:                           "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":-1}`:                                                                      "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":21}`:                                                                      "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":"2"}`:                                                                     "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":1,"n":2}`:                                                                 "prompt_logprobs",
		`{"prompt":["x","y"],"prompt_logprobs":1}`:                                                                 "prompt_logprobs",
		`{"prompt":"x","echo":true,"logprobs":1,"n":2}`:                                                            "echo",
		`{"prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}}`:                            "stream_options.continuous_usage_stats",
		`{"prompt":"x","stream":true,"n":2,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`: "stream_options.continuous_usage_stats",
	} {
		if got := errParam(t, h, body); got != param {
			t.Errorf("%s: param %q, want %q", body, got, param)
		}
	}
}

type cmplLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// TestEchoLogprobsHTTP: completions' echo with logprobs gives the prompt's
// tokens and logprobs before the completion's (the first null), whole and
// streamed alike; and they are the logprobs the same tokens had when the
// model generated them (the consistency of prompt and decode logprobs).
func TestEchoLogprobsHTTP(t *testing.T) {
	h := tinyServer(t)
	const p = "the cat sat on"
	code, body := post(h, "/v1/completions", `{"prompt":"`+p+`","max_tokens":6,"temperature":0,"logprobs":2,"ignore_eos":true}`)
	var gen struct {
		Choices []struct {
			Text     string
			Logprobs cmplLogprobs
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &gen) != nil {
		t.Fatalf("%d %s", code, body)
	}
	q := gen.Choices[0]
	full, _ := json.Marshal(p + q.Text)
	req := fmt.Sprintf(`{"prompt":%s,"max_tokens":2,"temperature":0,"logprobs":2,"echo":true,"ignore_eos":true%%s}`, full)
	code, body = post(h, "/v1/completions", fmt.Sprintf(req, ""))
	var echo struct {
		Choices []struct {
			Text     string
			Logprobs cmplLogprobs
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &echo) != nil {
		t.Fatalf("%d %s", code, body)
	}
	e := echo.Choices[0]
	n := echo.Usage.PromptTokens
	if !strings.HasPrefix(e.Text, p+q.Text) || len(e.Logprobs.Tokens) != n+2 || len(e.Logprobs.TokenLogprobs) != n+2 ||
		e.Logprobs.TokenLogprobs[0] != nil || e.Logprobs.TopLogprobs[0] != nil || e.Logprobs.TextOffset[0] != 0 {
		t.Fatalf("echo: %s", body)
	}
	for i := 1; i < n+2; i++ {
		if e.Logprobs.TokenLogprobs[i] == nil || len(e.Logprobs.TopLogprobs[i]) < 1 || len(e.Logprobs.TopLogprobs[i]) > 3 {
			t.Fatalf("echo: entry %d: %s", i, body)
		}
	}
	// Q's tokens close the echoed prompt, with the logprobs they were generated with.
	k := len(q.Logprobs.Tokens)
	if tail := e.Logprobs.Tokens[n-k : n]; strings.Join(tail, "\x00") != strings.Join(q.Logprobs.Tokens, "\x00") {
		t.Fatalf("the prompt retokenized Q differently: %q vs %q", tail, q.Logprobs.Tokens)
	}
	for j := range k {
		got, want := *e.Logprobs.TokenLogprobs[n-k+j], *q.Logprobs.TokenLogprobs[j]
		if math.Abs(got-want) > 1e-4 {
			t.Errorf("token %d of Q (%q): prompt logprob %g, generated with %g", j, q.Logprobs.Tokens[j], got, want)
		}
	}
	// Streamed: the echo chunk carries the prompt's part, the rest follows.
	code, body = post(h, "/v1/completions", fmt.Sprintf(req, `,"stream":true`))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var st cmplLogprobs
	var text string
	for i, d := range sseData(t, body) {
		var c struct {
			Choices []struct {
				Text     string
				Logprobs *cmplLogprobs
			}
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err, d)
		}
		if len(c.Choices) == 0 || c.Choices[0].Logprobs == nil {
			continue
		}
		ch := c.Choices[0]
		if i == 0 && (ch.Text != p+q.Text || len(ch.Logprobs.Tokens) != n) {
			t.Fatalf("first chunk %s: want the echoed prompt and its %d tokens", d, n)
		}
		text += ch.Text
		st.Tokens = append(st.Tokens, ch.Logprobs.Tokens...)
		st.TokenLogprobs = append(st.TokenLogprobs, ch.Logprobs.TokenLogprobs...)
		st.TextOffset = append(st.TextOffset, ch.Logprobs.TextOffset...)
	}
	w, _ := json.Marshal(cmplLogprobs{Tokens: e.Logprobs.Tokens, TokenLogprobs: e.Logprobs.TokenLogprobs, TextOffset: e.Logprobs.TextOffset})
	g, _ := json.Marshal(st)
	if text != e.Text || string(g) != string(w) {
		t.Errorf("streamed %q\n%s\nwhole %q\n%s", text, g, e.Text, w)
	}
}

// TestContinuousUsageHTTP: with continuous_usage_stats every chunk of a
// stream carries the usage so far, counting up to the final usage chunk's.
func TestContinuousUsageHTTP(t *testing.T) {
	h := tinyServer(t)
	for _, body := range []string{
		`{"prompt":"the cat","max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
	} {
		code, resp := post(h, pathFor(body), body)
		if code != 200 {
			t.Fatalf("%d %s", code, resp)
		}
		events := sseData(t, resp)
		last, prompt := -1, 0
		for i, d := range events {
			var c struct {
				Choices []json.RawMessage
				Usage   *struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
					TotalTokens      int `json:"total_tokens"`
				}
			}
			if err := json.Unmarshal([]byte(d), &c); err != nil || c.Usage == nil {
				t.Fatalf("%s: event %d has no usage: %s", body, i, d)
			}
			u := c.Usage
			if u.CompletionTokens < last || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.PromptTokens == 0 || prompt != 0 && u.PromptTokens != prompt {
				t.Fatalf("%s: event %d: %s after %d completion tokens", body, i, d, last)
			}
			last, prompt = u.CompletionTokens, u.PromptTokens
			if i == len(events)-1 && (len(c.Choices) != 0 || u.CompletionTokens != 5) {
				t.Fatalf("%s: the last event is not the usage chunk of 5 tokens: %s", body, d)
			}
		}
	}
}

// TestTruncatePromptTokensHTTP: the prompt's last N tokens are kept, on
// both endpoints, so a prompt past the context can be served; N past the
// context, 0 and below -1 are 400s naming the field.
func TestTruncatePromptTokensHTTP(t *testing.T) {
	h := tinyServer(t) // a 256-token context
	long := strings.Repeat("the cat sat on the mat. ", 60)
	for _, tc := range []struct {
		body   string
		tokens int
	}{
		{`{"prompt":"` + long + `","max_tokens":2,"truncate_prompt_tokens":50}`, 50},
		{`{"messages":[{"role":"user","content":"` + long + `"}],"max_tokens":2,"truncate_prompt_tokens":40}`, 40},
		{`{"prompt":"the cat","max_tokens":2,"truncate_prompt_tokens":200}`, 0}, // shorter already: as it is
	} {
		code, body := post(h, pathFor(tc.body), tc.body)
		var r struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || tc.tokens > 0 && r.Usage.PromptTokens != tc.tokens || r.Usage.PromptTokens == 0 {
			t.Errorf("%.80s: %d %s, want %d prompt tokens", tc.body, code, body, tc.tokens)
		}
	}
	if code, body := post(h, "/v1/completions", `{"prompt":"`+long+`","max_tokens":2}`); code != 400 {
		t.Errorf("untruncated: %d %s, want 400 (the prompt is past the context)", code, body)
	}
	for _, n := range []string{"257", "0", "-2", "1.5"} {
		body := `{"prompt":"x","max_tokens":2,"truncate_prompt_tokens":` + n + `}`
		if got := errParam(t, h, body); got != "truncate_prompt_tokens" {
			t.Errorf("%s: param %q", n, got)
		}
	}
}
