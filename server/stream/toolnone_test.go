package stream_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain/grammar"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// tool_choice "none" still renders the tools, constrains the reply to text
// without the template family's call opener, leaves a response_format
// grammar in charge when there is one, and is served (unconstrained, never
// parsed for calls) by a backend that cannot compile grammars.
func TestToolChoiceNone(t *testing.T) {
	for _, c := range []struct {
		src               string
		anywhere, atStart []string
	}{
		{"{{ messages }}", []string{"<tool_call"}, nil},
		{"{% for tool in tools %}{{ tool }}{% endfor %}<tool_call>{{ m.tool_calls }}", []string{"<tool_call"}, nil},
		{"{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]{{ message.tool_calls }}", []string{"[TOOL_CALLS]"}, nil},
		{"{% if tools %}{% endif %}<|python_tag|>{{ message.tool_calls }}", []string{"<|python_tag|"}, []string{`{"name"`}},
	} {
		tp := &templater{PieceVocab: streamtest.NewPieceVocab(), src: c.src}
		fg := &fakeGrammars{}
		b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: tp, ContextLen: 1 << 16, Grammars: fg}
		g := toolRequest(t, `"none"`)
		req, err := Prepare(b, g)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		want := grammar.TextWithout(c.anywhere, c.atStart)
		if req.Constraint == nil || len(fg.got) != 1 || fg.got[0].Kind != want.Kind || fg.got[0].Data != want.Data {
			t.Errorf("%s: compiled %+v, want %+v", c.src, fg.got, want)
		}
		// A native template gets the tools themselves, any other the
		// Hermes system prompt that lists them.
		sys, _ := tp.msgs[0]["content"].(string)
		if len(tp.tools) != 2 && !(strings.Contains(sys, "<tools>") && strings.Contains(sys, "get_weather")) {
			t.Errorf("%s: tools not in the prompt: tools %v, system %q", c.src, tp.tools, sys)
		}
		if NewToolStream(g) != nil {
			t.Errorf("%s: the reply is parsed for calls", c.src)
		}
	}

	g := toolRequest(t, `"none"`)
	if err := g.SetResponseFormat(json.RawMessage(`{"type":"json_object"}`)); err != nil {
		t.Fatal(err)
	}
	fg := &fakeGrammars{}
	b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: &templater{PieceVocab: streamtest.NewPieceVocab()}, ContextLen: 1 << 16, Grammars: fg}
	if _, err := Prepare(b, g); err != nil || len(fg.got) != 1 || fg.got[0].Kind != grammar.JSONObject {
		t.Errorf("none + json_object: compiled %+v, err %v; want the json_object grammar alone", fg.got, err)
	}

	b.Grammars = nil
	if req, err := Prepare(b, toolRequest(t, `"none"`)); err != nil || req.Constraint != nil {
		t.Errorf("none without a grammar compiler: constraint %v, err %v", req.Constraint, err)
	}
}
