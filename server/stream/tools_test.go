package stream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain/grammar"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

const twoTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
{"type":"function","function":{"name":"get_time"}}]`

func TestSetTools(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		tools, choice string
		parallel      *bool
		want          Tools
		param         string // of the 400
	}{
		{tools: twoTools, want: Tools{Choice: ToolChoiceAuto, Parallel: true}},
		{tools: twoTools, choice: `"required"`, parallel: &no, want: Tools{Choice: ToolChoiceRequired}},
		{tools: twoTools, choice: `"none"`, want: Tools{Choice: ToolChoiceNone, Parallel: true}},
		{tools: twoTools, choice: `{"type":"function","function":{"name":"get_time"}}`, parallel: &yes, want: Tools{Choice: ToolChoiceFunction, Function: "get_time", Parallel: true}},
		{choice: `"none"`},
		{tools: `[]`},
		{tools: twoTools, choice: `{"type":"function","function":{"name":"nope"}}`, param: "tool_choice.function.name"},
		{tools: twoTools, choice: `"always"`, param: "tool_choice"},
		{tools: twoTools, choice: `{"type":"function"}`, param: "tool_choice"},
		{choice: `"required"`, param: "tool_choice"},
		{parallel: &yes, param: "parallel_tool_calls"},
		{tools: `{}`, param: "tools"},
		{tools: `[{"type":"code_interpreter"}]`, param: "tools[0].type"},
		{tools: `[{"type":"function"}]`, param: "tools[0].function"},
		{tools: `[{"type":"function","function":{"name":"a b"}}]`, param: "tools[0].function.name"},
		{tools: `[{"type":"function","function":{"name":"f","parameters":[1]}}]`, param: "tools[0].function.parameters"},
		{tools: `[{"type":"function","function":{"name":"f","strictly":true}}]`, param: "tools[0]"},
		{tools: `[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`, param: "tools[1].function.name"},
	}
	for _, c := range cases {
		var g GenRequest
		err := g.SetTools(raw(c.tools), raw(c.choice), c.parallel)
		name := fmt.Sprintf("tools=%s choice=%s", c.tools, c.choice)
		if c.param != "" {
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != c.param {
				t.Errorf("%s: %v, want a 400 on %s", name, err, c.param)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := g.Tools
		got.List = nil
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// templater is a tokenizer whose template source is src; RenderChat
// records what it was given and renders a transcript of it.
type templater struct {
	*streamtest.PieceVocab
	src   string
	msgs  []map[string]any
	tools []any
}

func (tp *templater) ChatTemplateSource() string { return tp.src }
func (tp *templater) RenderChat(msgs []map[string]any, tools []any) (string, error) {
	tp.msgs, tp.tools = msgs, tools
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %v\n", m["role"], m["content"])
	}
	return b.String(), nil
}

func toolRequest(t *testing.T, choice string) *GenRequest {
	t.Helper()
	g := &GenRequest{}
	calls, err := ParseToolCalls("tool_calls", json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetMessages([]ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Weather?"},
		{Role: "assistant", ToolCalls: calls}, {Role: "tool", ToolCallID: "c1", Content: `{"t": 3}`}}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetTools(json.RawMessage(twoTools), raw(choice), nil); err != nil {
		t.Fatal(err)
	}
	return g
}

// A template that knows tools gets them and the history as Hugging Face
// passes them, and its markup decides the call syntax; one that does not
// gets the Hermes prompt, with the history's calls and results written out.
func TestToolPrompt(t *testing.T) {
	for _, c := range []struct {
		src    string
		native bool
		format ToolFormat
	}{
		{"{{ messages }}", false, ToolsHermes},
		{"{% for tool in tools %}{{ tool }}{% endfor %}<tool_call>{{ m.tool_calls }}", true, ToolsHermes},
		{"{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]{{ message.tool_calls }}", true, ToolsMistral},
		{"{% if tools %}{% endif %}<|python_tag|>{{ message.tool_calls }}", true, ToolsLlama3},
	} {
		tp := &templater{PieceVocab: streamtest.NewPieceVocab(), src: c.src}
		g := toolRequest(t, "")
		b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: tp, ContextLen: 1 << 16, Grammars: &fakeGrammars{}}
		if _, err := Prepare(b, g); err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if g.Tools.Format != c.format {
			t.Errorf("%s: format %v, want %v", c.src, g.Tools.Format, c.format)
		}
		if c.native {
			args, _ := tp.msgs[2]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"].(map[string]any)
			if len(tp.tools) != 2 || args["city"] != "Oslo" || tp.msgs[3]["tool_call_id"] != "c1" || len(tp.msgs) != 4 {
				t.Errorf("%s: tools %v, messages %v", c.src, tp.tools, tp.msgs)
			}
			continue
		}
		sys, _ := tp.msgs[0]["content"].(string)
		asst, _ := tp.msgs[2]["content"].(string)
		tool, _ := tp.msgs[3]["content"].(string)
		if tp.tools != nil || !strings.HasPrefix(sys, "Be brief.\n\n") || !strings.Contains(sys, `"name":"get_weather"`) ||
			!strings.Contains(sys, "<tools>") || asst != "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>" ||
			tool != "<tool_response>\n{\"t\": 3}\n</tool_response>" {
			t.Errorf("Hermes fallback: tools %v, messages %q", tp.tools, tp.msgs)
		}
	}
	// A result for a call nobody made is refused.
	g := toolRequest(t, "")
	g.Messages[3].ToolCallID = "c9"
	b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: &templater{PieceVocab: streamtest.NewPieceVocab()}, ContextLen: 1 << 16}
	var pe *ParamError
	if _, err := Prepare(b, g); !errors.As(err, &pe) || pe.Param != "messages[3].tool_call_id" {
		t.Errorf("orphan tool message: %v", err)
	}
}

// Forced calls compile a grammar over the right functions; it cannot be
// combined with a response_format.
func TestForcedToolGrammar(t *testing.T) {
	for _, c := range []struct {
		choice     string
		names, not []string
	}{
		{`"required"`, []string{"get_weather", "get_time"}, nil},
		{`{"type":"function","function":{"name":"get_time"}}`, []string{"get_time"}, []string{"get_weather"}},
		{`"auto"`, nil, nil},
	} {
		fg := &fakeGrammars{}
		b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: &templater{PieceVocab: streamtest.NewPieceVocab()}, ContextLen: 1 << 16, Grammars: fg}
		req, err := Prepare(b, toolRequest(t, c.choice))
		if err != nil {
			t.Fatal(err)
		}
		if c.names == nil {
			if req.Constraint != nil || len(fg.got) != 0 {
				t.Errorf("%s: constrained %v", c.choice, fg.got)
			}
			continue
		}
		if len(fg.got) != 1 || fg.got[0].Kind != grammar.Lark || !strings.Contains(fg.got[0].Data, "<tool_call>") {
			t.Fatalf("%s: compiled %v", c.choice, fg.got)
		}
		for _, n := range c.names {
			if !strings.Contains(fg.got[0].Data, `"const":"`+n+`"`) {
				t.Errorf("%s: grammar lacks %s: %s", c.choice, n, fg.got[0].Data)
			}
		}
		for _, n := range c.not {
			if strings.Contains(fg.got[0].Data, n) {
				t.Errorf("%s: grammar offers %s: %s", c.choice, n, fg.got[0].Data)
			}
		}
	}
	g := toolRequest(t, `"required"`)
	if err := g.SetResponseFormat(json.RawMessage(`{"type":"json_object"}`)); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: &templater{PieceVocab: streamtest.NewPieceVocab()}, ContextLen: 1 << 16, Grammars: &fakeGrammars{}}
	var pe *ParamError
	if _, err := Prepare(b, g); !errors.As(err, &pe) || pe.Param != "response_format" {
		t.Errorf("required + response_format: %v", err)
	}
}

// recorder is a ToolEmitter that logs what it is sent.
type recorder struct {
	log []string
	ids []int32
}

func (r *recorder) Text(s string, ids []int32) error {
	r.log, r.ids = append(r.log, "text:"+s), append(r.ids, ids...)
	return nil
}
func (r *recorder) ToolCall(d ToolCallDelta) error {
	r.log = append(r.log, fmt.Sprintf("call:%d:%s:%s", d.Index, d.Name, d.Arguments))
	return nil
}
func (r *recorder) KeepAlive() error { return nil }
func (r *recorder) Flush() error     { return nil }

// ToolStream: the name goes out alone before any argument, no id is lost
// when text is held or turned into calls, and a reply with calls finishes
// with tool_calls.
func TestToolStream(t *testing.T) {
	g := toolRequest(t, "")
	ts := NewToolStream(g)
	var r recorder
	em := ts.Use(&r)
	_ = em.Text("Sure. <tool", []int32{1, 2})
	_ = em.Text(`_call>{"name": "get_time", "arguments": {}}`, []int32{3, 4})
	_ = em.Text("</tool_call>", []int32{5})
	out := ts.End(Outcome{Finish: "stop"})
	want := []string{"text:Sure. ", "call:0:get_time:", "call:0::{}", "text:", "text:"} // ids ride on empty texts
	if !slices.Equal(r.log, want) || !slices.Equal(r.ids, []int32{1, 2, 3, 4, 5}) || out.Finish != "tool_calls" {
		t.Errorf("sent %q ids %v finish %q; want %q, ids 1-5, tool_calls", r.log, r.ids, out.Finish, want)
	}
	if out := ts.End(Outcome{Finish: "stop"}); out.Finish != "stop" {
		t.Error("End acted twice")
	}
	g.Tools.Choice = ToolChoiceNone
	if NewToolStream(g) != nil {
		t.Error(`tool_choice "none" parses the reply for calls`)
	}
	if cut := NewToolStream(toolRequest(t, "")).End(Outcome{Finish: "", CutShort: true}); cut.Finish != "" {
		t.Error("End finished a stream that may resume")
	}
}

// The token limit cuts the 135M model inside the opener of its next call
// (the bug of issue 13): the fragment held back as a possible opener never
// reaches the text, the calls made stand, and finish_reason stays "length".
// The model's own end ("stop") still releases a held fragment as text.
func TestToolStreamLengthCut(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	cases := []struct {
		finish, tail string
		want         []string
		wantFinish   string
	}{
		{"length", "\n<tool_call", []string{"call:0:get_time:", "call:0::{}"}, "length"},
		{"length", "\n<tool_call>\n{\"na", []string{"call:0:get_time:", "call:0::{}"}, "length"},
		{"length", "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci",
			[]string{"call:0:get_time:", "call:0::{}", "call:1:get_weather:", `call:1::{"ci`}, "length"},
		{"", "\n<tool_", []string{"call:0:get_time:", "call:0::{}"}, ""}, // an engine error cuts too
		{"stop", " <tool_cal", []string{"call:0:get_time:", "call:0::{}", "text: <tool_cal"}, "tool_calls"},
	}
	for _, c := range cases {
		ts := NewToolStream(toolRequest(t, ""))
		var r recorder
		em := ts.Use(&r)
		for _, piece := range []string{call, c.tail} {
			_ = em.Text(piece, nil)
		}
		out := ts.End(Outcome{Finish: c.finish})
		if !slices.Equal(r.log, c.want) || out.Finish != c.wantFinish {
			t.Errorf("%s after %q: sent %q finish %q; want %q, %q", c.finish, c.tail, r.log, out.Finish, c.want, c.wantFinish)
		}
	}
}
