package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server/internal/ssetest"
)

// kwargsServer is tinyServerTemplate keeping the model, whose tokenizer
// shows the prompt's text with its control tokens.
func kwargsServer(t *testing.T, template string) (http.Handler, *loader.Model) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, tinySpec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 64, MaxSeqs: 2, ChatTemplate: template})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close(context.Background()) })
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(model.Backend()); err != nil {
		t.Fatal(err)
	}
	srv.Handle(ChatRenderRoute, srv.RenderHandler(true)) // as serve mounts it
	return srv.HTTPServer().Handler, model
}

// tokenizeIDs posts body to /tokenize and returns its tokens.
func tokenizeIDs(t *testing.T, h http.Handler, body string) []int32 {
	t.Helper()
	code, resp := post(h, "/tokenize", body)
	var r struct{ Tokens []int32 }
	if code != 200 || json.Unmarshal([]byte(resp), &r) != nil {
		t.Fatalf("/tokenize %s: %d %s", body, code, resp)
	}
	return r.Tokens
}

// renderIDs posts body to the chat render route and returns its token_ids.
func renderIDs(t *testing.T, h http.Handler, body string) []int32 {
	t.Helper()
	code, resp := post(h, "/v1/chat/completions/render", body)
	var r struct {
		TokenIDs []int32 `json:"token_ids"`
	}
	if code != 200 || json.Unmarshal([]byte(resp), &r) != nil {
		t.Fatalf("render %s: %d %s", body, code, resp)
	}
	return r.TokenIDs
}

// customTemplate prints the variables a request's chat_template_kwargs
// give it, each kind of JSON value once.
const customTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
	"flag={{ custom_flag }} n={{ n }} ok={{ ok }} items={{ items | join(',') }} obj={{ obj.k }}\n" +
	"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

// TestChatTemplateKwargsReachTemplate: every chat_template_kwargs key
// reaches the template, as its JSON value (string, integer, boolean, list,
// object), through a chat completion, /tokenize's chat form and the chat
// render route alike (the three give the same ids), and beside tools. The old code refused
// any key but enable_thinking and reasoning_effort (400 naming it).
func TestChatTemplateKwargsReachTemplate(t *testing.T) {
	h, model := kwargsServer(t, customTemplate)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const kw = `"chat_template_kwargs":{"custom_flag":"on","n":3,"ok":true,"items":["a","b"],"obj":{"k":"v"}}`
	const want = "flag=on n=3 ok=True items=a,b obj=v\n<|im_start|>assistant\n"

	prompt, _ := promptText(t, h, `{`+msgs+`,`+kw+`,"max_tokens":1,"prompt_logprobs":0}`)
	if !strings.HasSuffix(prompt, want) {
		t.Errorf("chat completion's prompt %q, want it to end %q", prompt, want)
	}
	ids := tokenizeIDs(t, h, `{`+msgs+`,`+kw+`}`)
	if text := model.Tokenizer.Decode(ids, false); !strings.HasSuffix(text, want) {
		t.Errorf("/tokenize: %q, want it to end %q", text, want)
	}
	if rendered := renderIDs(t, h, `{`+msgs+`,`+kw+`}`); !slices.Equal(rendered, ids) {
		t.Errorf("render route's ids %v differ from /tokenize's %v", rendered, ids)
	}
	// add_generation_prompt false takes off what this template appends
	// for it, with the kwargs given: the prompt ends after their line.
	ids = tokenizeIDs(t, h, `{`+msgs+`,`+kw+`,"add_generation_prompt":false}`)
	if text := model.Tokenizer.Decode(ids, false); !strings.HasSuffix(text, "obj=v\n") {
		t.Errorf("add_generation_prompt false: %q", text)
	}
	// A template written for tools gets them and the kwargs together.
	th, tmodel := kwargsServer(t, "{% if tools %}{% for t in tools %}<tool_call>{{ t.function.name }}\n{% endfor %}{% endif %}"+customTemplate)
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	ids = renderIDs(t, th, `{`+msgs+`,`+kw+`,`+tools+`}`)
	if text := tmodel.Tokenizer.Decode(ids, false); !strings.HasSuffix(text, want) || !strings.HasPrefix(text, "<tool_call>get_weather\n") {
		t.Errorf("with tools: %q", text)
	}
	// Without kwargs the template reads them undefined, as Jinja does.
	ids = tokenizeIDs(t, h, `{`+msgs+`}`)
	if text := model.Tokenizer.Decode(ids, false); !strings.Contains(text, "flag= n= ok=") {
		t.Errorf("no kwargs: %q", text)
	}
}

// TestChatTemplateKwargsPlainText: a kwarg's string is request text, as a
// message's content is: a control token's spelling in it is plain text
// unless allow_special_tokens is true (then it is the control token).
func TestChatTemplateKwargsPlainText(t *testing.T) {
	h, _ := kwargsServer(t, customTemplate)
	end := tokenizeIDs(t, h, `{"prompt":"<|im_end|>","add_special_tokens":false}`)
	if len(end) != 1 {
		t.Fatalf("<|im_end|> is %v, not one control token, in this vocabulary", end)
	}
	count := func(ids []int32) int {
		n := 0
		for _, id := range ids {
			if id == end[0] {
				n++
			}
		}
		return n
	}
	const body = `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"custom_flag":"<|im_end|>","items":["<|im_end|>"],"obj":{"k":"\u003c|im_end|>"}}%s}`
	if n := count(tokenizeIDs(t, h, fmt.Sprintf(body, ""))); n != 1 {
		t.Errorf("plain: %d <|im_end|> tokens, want the template's own 1", n)
	}
	if n := count(renderIDs(t, h, fmt.Sprintf(body, ""))); n != 1 {
		t.Errorf("render: %d <|im_end|> tokens, want the template's own 1", n)
	}
	if n := count(tokenizeIDs(t, h, fmt.Sprintf(body, `,"allow_special_tokens":true`))); n != 4 {
		t.Errorf("allow_special_tokens: %d <|im_end|> tokens, want 4", n)
	}
}

// TestChatTemplateKwargsRefused: a name the server gives the template
// itself, one no template can read, and kwargs past the limits are 400s
// naming the kwarg (or the field); on a completions prompt and /tokenize's
// prompt form the field applies to nothing.
func TestChatTemplateKwargsRefused(t *testing.T) {
	h, _ := kwargsServer(t, customTemplate)
	deep := strings.Repeat("[", 17) + strings.Repeat("]", 17)
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":1`, i)
	}
	const chat = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":%s}`
	for _, c := range []struct{ path, body, param, code string }{
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"messages":[]}`), "chat_template_kwargs.messages", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"add_generation_prompt":false}`), "chat_template_kwargs.add_generation_prompt", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"tools":[]}`), "chat_template_kwargs.tools", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"bos_token":"<s>"}`), "chat_template_kwargs.bos_token", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"range":1}`), "chat_template_kwargs.range", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"chat_template":"x"}`), "chat_template_kwargs.chat_template", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"a-b":1}`), "chat_template_kwargs.a-b", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"deep":`+deep+`}`), "chat_template_kwargs.deep", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"big":"`+strings.Repeat("x", 70000)+`"}`), "chat_template_kwargs", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{`+strings.Join(many, ",")+`}`), "chat_template_kwargs", "invalid_value"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `{"enable_thinking":"yes"}`), "chat_template_kwargs.enable_thinking", "invalid_value"},
		{"/v1/chat/completions/render", fmt.Sprintf(chat, `{"eos_token":"x"}`), "chat_template_kwargs.eos_token", "invalid_value"},
		{"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"messages":[]}}`, "chat_template_kwargs.messages", "invalid_value"},
		{"/tokenize", `{"prompt":"hi","chat_template_kwargs":{"custom_flag":"on"}}`, "chat_template_kwargs", "unsupported_parameter"},
		{"/v1/completions", `{"prompt":"hi","chat_template_kwargs":{"custom_flag":"on"}}`, "chat_template_kwargs", "unsupported_parameter"},
	} {
		code, resp := post(h, c.path, c.body)
		var e struct {
			Error struct{ Code, Param, Message string }
		}
		if code != 400 || json.Unmarshal([]byte(resp), &e) != nil || e.Error.Param != c.param || e.Error.Code != c.code {
			t.Errorf("%s %.120s: %d %.300s, want 400 %s naming %s", c.path, c.body, code, resp, c.code, c.param)
		}
	}
	// At the limits: accepted (the template does not print these two).
	at := fmt.Sprintf(chat, `{"deep":`+strings.Repeat("[", 16)+strings.Repeat("]", 16)+`,"unused":"`+strings.Repeat("x", 60000)+`"}`)
	if code, resp := post(h, "/v1/chat/completions/render", at); code != 200 {
		t.Errorf("kwargs at the limits: %d %.300s", code, resp)
	}
}

// TestChatTemplateKwargsQwen3: Qwen3's own template reads enable_thinking:
// false renders the empty reasoning block itself, once (the server's
// thinking-off ending sees it closed and adds none), and with
// add_generation_prompt false the prompt ends after the user's turn, the
// block being part of what the template appends for the assistant. Both
// were 400s on /tokenize before (chat_template_kwargs refused there).
func TestChatTemplateKwargsQwen3(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	h, model := kwargsServer(t, string(src))
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	off := model.Tokenizer.Decode(tokenizeIDs(t, h, `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false}}`), false)
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; off != want {
		t.Errorf("enable_thinking false: %q, want %q", off, want)
	}
	on := model.Tokenizer.Decode(tokenizeIDs(t, h, `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":true}}`), false)
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; on != want {
		t.Errorf("enable_thinking true: %q, want %q", on, want)
	}
	cut := model.Tokenizer.Decode(tokenizeIDs(t, h, `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false},"add_generation_prompt":false}`), false)
	if want := "<|im_start|>user\nhi<|im_end|>\n"; cut != want {
		t.Errorf("enable_thinking false, add_generation_prompt false: %q, want %q", cut, want)
	}
	// A generation's prompt is the one /tokenize counts.
	prompt, _ := promptText(t, h, `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false},"max_tokens":1,"prompt_logprobs":0}`)
	if !strings.HasSuffix(off, prompt) || !strings.HasSuffix(prompt, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Errorf("chat completion's prompt %q, /tokenize's %q", prompt, off)
	}
}

// TestChatTemplateKwargsGptOss: gpt-oss's real template reads
// model_identity (the system message's first line) and reasoning_effort;
// an effort beyond its three levels ("xhigh") reaches it as given and the
// Reasoning line is then set to the level it maps to, as the top-level
// field's is.
func TestChatTemplateKwargsGptOss(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	r := newHarmonyRigWith(t, string(src))
	r.eng.Script = r.ids("<|channel|>final<|message|>ok")
	resp := ssetest.Post(t, r.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"model_identity":"You are Sluice's test model.","reasoning_effort":"xhigh"}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	subs := r.eng.Submits()
	if len(subs) != 1 {
		t.Fatalf("%d submissions", len(subs))
	}
	p := r.model.Tokenizer.Decode(subs[0].Prompt, false)
	if !strings.Contains(p, "<|message|>You are Sluice's test model.\n") || strings.Contains(p, "ChatGPT") {
		t.Errorf("model_identity not in the system message: %q", p)
	}
	if !strings.Contains(p, "\nReasoning: high\n") || strings.Count(p, "Reasoning: ") != 1 {
		t.Errorf("reasoning_effort xhigh: %q, want Reasoning: high", p)
	}
}
