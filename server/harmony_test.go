package server

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
)

// harmonySpec is a tiny gpt-oss with harmony's tokens (control tokens, as
// gpt-oss files have them) and a harmony chat template.
var harmonySpec = modeltest.Spec{Layers: 2, Hidden: 32, Heads: 2, KVHeads: 1, FFN: 32, Vocab: 320, Seed: 51,
	GPTOSS: true, Window: 4, Experts: 2, ExpertsUsed: 1, ContextLen: 2048, Harmony: true}

// harmonyRig is the tiny gpt-oss loaded as `sluice serve` loads a model
// (its tokenizer, template and reasoning format from the file), its engine
// replaced by a ScriptEngine: script sets the reply's token ids, made by
// the model's own tokenizer.
type harmonyRig struct {
	reasonRig
	model *loader.Model
}

func newHarmonyRig(t testing.TB) *harmonyRig { return newHarmonyRigWith(t, "") }

// newHarmonyRigWith serves the model under chatTemplate ("" keeps the
// file's).
func newHarmonyRigWith(t testing.TB, chatTemplate string) *harmonyRig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gptoss-harmony.gguf")
	if err := modeltest.WriteGGUF(path, harmonySpec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 16, MaxSeqs: 2, ChatTemplate: chatTemplate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close(t.Context()) })
	b := model.Backend()
	if !b.Reasoning.Harmony {
		t.Fatalf("a gpt-oss model's reasoning markup is %+v, not harmony", b.Reasoning)
	}
	eng := &streamtest.ScriptEngine{}
	b.Engine = eng
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(b); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPServer().Handler)
	t.Cleanup(hs.Close)
	return &harmonyRig{reasonRig: reasonRig{url: hs.URL, eng: eng}, model: model}
}

func (r *harmonyRig) ids(text string) []int32 { return r.model.Tokenizer.Encode(text, false) }

// harmonyReply reasons, says a line on the commentary channel (a
// preamble) and calls get_weather, the recipient in the role part as
// gpt-oss writes it.
const harmonyReply = "<|channel|>analysis<|message|>Need the weather, é漢.<|end|>" +
	"<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>" +
	"<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Oslo\"}"

var harmonyWant = reply{reasoning: "Need the weather, é漢.", text: "Checking.", calls: `get_weather({"city":"Oslo"});`}

// TestHarmonyVocab: the tiny gpt-oss's vocabulary reads as llama.cpp reads
// gpt-oss's: harmony's markers are single tokens written out when decoded,
// and <|return|> and <|call|> end a generation while <|end|> does not.
func TestHarmonyVocab(t *testing.T) {
	r := newHarmonyRig(t)
	tok := r.model.Tokenizer
	id := func(s string) int32 {
		ids := tok.Encode(s, false)
		if len(ids) != 1 {
			t.Fatalf("%s encodes to %v, not one token", s, ids)
		}
		return ids[0]
	}
	eog := tok.EOGIDs()
	for _, s := range []string{"<|return|>", "<|call|>"} {
		if !slices.Contains(eog, id(s)) {
			t.Errorf("%s does not end a generation (EOG %v)", s, eog)
		}
	}
	if slices.Contains(eog, id("<|end|>")) {
		t.Errorf("<|end|> ends the generation after the first message (EOG %v)", eog)
	}
	ids := r.ids(harmonyReply)
	d := tok.NewDecoder()
	var got strings.Builder
	for _, x := range ids {
		got.WriteString(d.Add(x))
	}
	got.WriteString(d.Flush())
	if got.String() != harmonyReply {
		t.Errorf("decoded %q, want %q", got.String(), harmonyReply)
	}
}

// TestHarmonyAllAPIs: a gpt-oss reply, token by token through the model's
// tokenizer, is reasoning, content and a tool call on every API, whole
// and streamed alike; the reasoning's tokens are its analysis message's,
// header and <|end|> included.
func TestHarmonyAllAPIs(t *testing.T) {
	r := newHarmonyRig(t)
	ids := r.ids(harmonyReply)
	r.eng.Script = ids
	want := harmonyWant
	want.reasoningTokens = slices.Index(ids, r.ids("<|end|>")[0]) + 1
	for _, a := range apis {
		for _, streamed := range []bool{false, true} {
			got := r.get(t, a, "", streamed)
			w := want
			if a.name == "messages" {
				w.reasoningTokens = 0 // Anthropic counts thinking in output_tokens
			}
			if got != w {
				t.Errorf("%s (stream %v): %+v, want %+v", a.name, streamed, got, w)
			}
		}
	}
}

// TestHarmonyStreamEqualsWhole: the reply's tokens split at every
// character (the text before and after tokenized apart, so a token ends
// there, inside harmony's markers too, which are then spelled out in
// plain tokens): on all three APIs the streamed reply is the whole one,
// and both are the reply's parse.
func TestHarmonyStreamEqualsWhole(t *testing.T) {
	r := newHarmonyRig(t)
	for i := 1; i < len(harmonyReply); i++ {
		if !utf8.RuneStart(harmonyReply[i]) {
			continue
		}
		r.eng.Script = append(r.ids(harmonyReply[:i]), r.ids(harmonyReply[i:])...)
		for _, a := range apis {
			whole, streamed := r.get(t, a, "", false), r.get(t, a, "", true)
			if whole != streamed {
				t.Fatalf("cut at %d, %s: whole %+v, streamed %+v", i, a.name, whole, streamed)
			}
			whole.reasoningTokens = 0
			if whole != harmonyWant {
				t.Fatalf("cut at %d, %s: %+v, want %+v", i, a.name, whole, harmonyWant)
			}
		}
	}
}

// TestHarmonyPrompt: the prompt is the model's harmony template, with the
// effort a request asks for on its system message's Reasoning line (medium
// when it asks none, as the template writes it); without tools offered, a
// message to a function is content.
func TestHarmonyPrompt(t *testing.T) {
	r := newHarmonyRig(t)
	r.eng.Script = r.ids("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}")
	for i, c := range []struct{ extra, level string }{
		{"", "medium"},
		{`,"reasoning_effort":"high"`, "high"},
		{`,"reasoning_effort":"minimal"`, "low"},
		{`,"chat_template_kwargs":{"enable_thinking":false}`, "low"},
		{`,"chat_template_kwargs":{"reasoning_effort":"high"}`, "high"},
		{`,"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"low"}`, "low"},
	} {
		resp := ssetest.Post(t, r.url+"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"}]`+c.extra+`}`)
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.extra, resp.StatusCode, raw)
		}
		got := apis[0].whole(t, raw)
		if got.text != `{"city":"Oslo"}` || got.calls != "" || got.reasoning != "" {
			t.Errorf("%s: no tools offered, got %+v", c.extra, got)
		}
		p := r.model.Tokenizer.Decode(r.eng.Submits()[i].Prompt, false)
		if !strings.Contains(p, "\nReasoning: "+c.level+"\n") || strings.Count(p, "Reasoning: ") != 1 ||
			!strings.Contains(p, "<|start|>developer<|message|># Instructions\n\nBe brief.") || !strings.HasSuffix(p, "<|start|>assistant") {
			t.Errorf("%s: prompt %q, want harmony's with Reasoning: %s", c.extra, p, c.level)
		}
	}
}

// TestHarmonyForcedCall: under tool_choice "required" the call grammar
// holds the whole reply, in the call syntax the prompt's template was
// given (Hermes here: the harmony template names no other), so the reply
// is no harmony messages and its call is parsed as any model's.
func TestHarmonyForcedCall(t *testing.T) {
	r := newHarmonyRig(t)
	r.eng.Script = r.ids("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>")
	for _, streamed := range []bool{false, true} {
		got := r.get(t, apis[0], `"tool_choice":"required"`, streamed)
		if want := (reply{calls: `get_weather({"city": "Oslo"});`}); got != want {
			t.Errorf("stream %v: %+v, want %+v", streamed, got, want)
		}
	}
}

// TestHarmonyRealTemplate: gpt-oss's own chat template (as llama.cpp
// v0.5.0 ships it, in testdata) renders a tool turn, with its reasoning
// sent back, and the requested effort, and the reply parses as with the
// short template.
func TestHarmonyRealTemplate(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	r := newHarmonyRigWith(t, string(src))
	r.eng.Script = r.ids(harmonyReply)
	body := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":"","reasoning_content":"Need the tool.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"And Bergen?"}],` +
		`"tools":[{"type":"function","function":` + weatherTool + `}],"reasoning_effort":"high"}`
	resp := ssetest.Post(t, r.url+"/v1/chat/completions", body)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	got := apis[0].whole(t, raw)
	got.reasoningTokens = 0
	if got != harmonyWant {
		t.Errorf("%+v, want %+v", got, harmonyWant)
	}
	p := r.model.Tokenizer.Decode(r.eng.Submits()[0].Prompt, false)
	for _, want := range []string{
		"<|start|>system<|message|>", "\nReasoning: high\n", "<|start|>developer<|message|># Instructions\n\nBe brief.",
		"namespace functions", "type get_weather = ",
		// The tool-call turn's reasoning goes back as its analysis message.
		"<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>",
		"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>",
		"<|start|>user<|message|>And Bergen?<|end|><|start|>assistant",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
}

// TestHarmonyMalformedAllAPIs: a reply that leaves out <|end|>, writes a
// channel harmony does not name and ends inside a header loses none of
// its text on any API, whole or streamed.
func TestHarmonyMalformedAllAPIs(t *testing.T) {
	r := newHarmonyRig(t)
	r.eng.Script = r.ids("<|channel|>analysis<|message|>Think.<|channel|>notes<|message|>Kept.<|end|>" +
		"<|start|>assistant<|channel|>final<|message|>Done.<|start|>assistant<|channel|>fin")
	want := reply{reasoning: "Think.", text: "Kept.Done.<|start|>assistant<|channel|>fin"}
	for _, a := range apis {
		for _, streamed := range []bool{false, true} {
			got := r.get(t, a, "", streamed)
			got.reasoningTokens = 0
			if got != want {
				t.Errorf("%s (stream %v): %+v, want %+v", a.name, streamed, got, want)
			}
		}
	}
}

// TestHarmonyEffortKwargRefused: chat_template_kwargs.reasoning_effort is
// an effort like the top-level field: one it does not know, a non-string,
// or one that contradicts reasoning_effort is a 400 naming it.
func TestHarmonyEffortKwargRefused(t *testing.T) {
	r := newHarmonyRig(t)
	for _, extra := range []string{
		`"chat_template_kwargs":{"reasoning_effort":"extreme"}`,
		`"chat_template_kwargs":{"reasoning_effort":3}`,
		`"reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low"}`,
	} {
		resp := ssetest.Post(t, r.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],`+extra+`}`)
		var e struct{ Error struct{ Code, Param string } }
		raw, _ := io.ReadAll(resp.Body)
		mustJSON(t, raw, &e)
		if resp.StatusCode != 400 || e.Error.Code != "invalid_value" || e.Error.Param != "chat_template_kwargs.reasoning_effort" {
			t.Errorf("%s: %d %s", extra, resp.StatusCode, raw)
		}
	}
}
