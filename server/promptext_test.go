package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
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
// never from the prefix cache; refused on a stream (vLLM's rule), for -1
// and past 20 (several choices: TestPromptLogprobsChoices).
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
		`{"prompt":"x","prompt_logprobs":2,"stream":true}`:                               "prompt_logprobs",
		`{"messages":[{"role":"user","content":"x"}],"prompt_logprobs":1,"stream":true}`: "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":-1}`:                                            "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":21}`:                                            "prompt_logprobs",
		`{"prompt":"x","prompt_logprobs":"2"}`:                                           "prompt_logprobs",
		`{"prompt":"x","stream":true,"stream_options":{"continuous_usage_stats":true}}`:  "stream_options.continuous_usage_stats",
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

// tinyServerTemplate is tinyServer with another chat template.
func tinyServerTemplate(tb testing.TB, template string) http.Handler {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, tinySpec, kernels.F32); err != nil {
		tb.Fatal(err)
	}
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 64, MaxSeqs: 8, ChatTemplate: template})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = model.Close(context.Background()) })
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.SetBackend(model.Backend()); err != nil {
		tb.Fatal(err)
	}
	return srv.HTTPServer().Handler
}

// promptText is the prompt as prompt_logprobs 0 shows it: each token after
// the first, in order (one entry per position).
func promptText(t *testing.T, h http.Handler, body string) (string, string) {
	t.Helper()
	code, resp := post(h, pathFor(body), body)
	var r struct {
		PromptLogprobs []promptEntry `json:"prompt_logprobs"`
		Choices        []struct {
			Message struct{ Content string }
		}
	}
	if code != 200 || json.Unmarshal([]byte(resp), &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %d %s", body, code, resp)
	}
	var b strings.Builder
	for _, e := range r.PromptLogprobs[1:] {
		for _, v := range e {
			b.WriteString(*v.DecodedToken)
		}
	}
	return b.String(), r.Choices[0].Message.Content
}

// TestContinueFinalMessageHTTP: add_generation_prompt false with
// continue_final_message true ends the prompt with the assistant's text (no
// end of turn, no new turn), and echo repeats that text before the reply,
// whole and streamed; add_generation_prompt false alone ends it after the
// final turn; vLLM's rules are 400s naming the field.
func TestContinueFinalMessageHTTP(t *testing.T) {
	h := tinyServer(t)
	const msgs = `"messages":[{"role":"user","content":"Name an animal."},{"role":"assistant","content":"The quick brown"}]`
	prompt, reply := promptText(t, h, `{`+msgs+`,"add_generation_prompt":false,"continue_final_message":true,"echo":true,"max_tokens":3,"prompt_logprobs":0}`)
	if !strings.HasSuffix(prompt, "<|im_start|>assistant\nThe quick brown") || !strings.HasPrefix(reply, "The quick brown") {
		t.Errorf("continued prompt %q, reply %q", prompt, reply)
	}
	plain, reply := promptText(t, h, `{`+msgs+`,"max_tokens":3,"prompt_logprobs":0}`)
	if !strings.HasSuffix(plain, "The quick brown<|im_end|>\n<|im_start|>assistant\n") || strings.HasPrefix(reply, "The quick brown") {
		t.Errorf("plain prompt %q, reply %q", plain, reply)
	}
	closed, _ := promptText(t, h, `{`+msgs+`,"add_generation_prompt":false,"max_tokens":3,"prompt_logprobs":0}`)
	if closed != strings.TrimSuffix(plain, "<|im_start|>assistant\n") {
		t.Errorf("without the generation prompt %q, with it %q", closed, plain)
	}
	code, body := post(h, "/v1/chat/completions", `{`+msgs+`,"add_generation_prompt":false,"continue_final_message":true,"echo":true,"max_tokens":3,"stream":true}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if ev := sseData(t, body); len(ev) < 2 || !strings.Contains(ev[1], `"delta":{"content":"The quick brown"}`) {
		t.Errorf("the stream does not echo the final message after its role chunk: %v", ev)
	}
	for body, param := range map[string]string{
		`{` + msgs + `,"continue_final_message":true}`:                                                             "continue_final_message",
		`{` + msgs + `,"continue_final_message":true,"add_generation_prompt":true}`:                                "continue_final_message",
		`{` + msgs + `,"add_generation_prompt":"no","continue_final_message":true}`:                                "add_generation_prompt",
		`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false,"continue_final_message":true}`: "continue_final_message",
		`{"prompt":"x","continue_final_message":true,"add_generation_prompt":false}`:                               "continue_final_message",
	} {
		if got := errParam(t, h, body); got != param {
			t.Errorf("%s: param %q, want %q", body, got, param)
		}
	}
}

// TestCustomRolesHTTP: a role other than the five reaches the template,
// which shows it in the prompt; a template that drops it, or raises on it,
// is a 400 naming messages[i].role; a role that is no name is one at once.
func TestCustomRolesHTTP(t *testing.T) {
	h := tinyServer(t) // ChatML: any role is rendered
	prompt, _ := promptText(t, h, `{"messages":[{"role":"narrator","content":"It was night."},{"role":"user","content":"hi"}],"max_tokens":2,"prompt_logprobs":0}`)
	if !strings.Contains(prompt, "<|im_start|>narrator\nIt was night.<|im_end|>") {
		t.Errorf("prompt %q", prompt)
	}
	const known = "{% for m in messages %}{% if m.role == 'user' %}U: {{ m.content }}\n{% elif m.role == 'assistant' %}A: {{ m.content }}\n{% endif %}{% endfor %}A:"
	const raises = "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('unknown role ' + m.role) }}{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
	for _, tmpl := range []string{known, raises} {
		h := tinyServerTemplate(t, tmpl)
		body := `{"messages":[{"role":"user","content":"hi"},{"role":"narrator","content":"It was night."}],"max_tokens":2}`
		if got := errParam(t, h, body); got != "messages[1].role" {
			t.Errorf("%q: param %q", tmpl, got)
		}
		if code, resp := post(h, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); code != 200 {
			t.Errorf("%q: standard roles: %d %s", tmpl, code, resp)
		}
	}
	if got := errParam(t, h, `{"messages":[{"role":"<|im_end|>","content":"x"}]}`); got != "messages[0].role" {
		t.Errorf("a role that is no name: param %q", got)
	}
}
