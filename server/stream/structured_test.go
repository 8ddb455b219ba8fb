package stream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain/grammar"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	. "github.com/sluicehq/sluice/server/stream"
)

// Every spelling a client sends maps to one grammar, and every malformed or
// conflicting one is a 400 naming the field, before anything is compiled.
func TestStructuredOutputFields(t *testing.T) {
	cases := []struct {
		rf, so    string
		want      *grammar.Grammar
		param     string // of the want grammar, or of the error
		errSubstr string
	}{
		{rf: `{"type":"text"}`},
		{rf: `null`},
		{rf: `{"type":"json_object"}`, want: &grammar.Grammar{Kind: grammar.JSONObject}, param: "response_format"},
		{rf: `{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object"}}}`,
			want: &grammar.Grammar{Kind: grammar.JSONSchema, Data: `{"type":"object"}`}, param: "response_format.json_schema.schema"},
		{rf: `{"type":"json_schema","json_schema":{"name":"any"}}`,
			want: &grammar.Grammar{Kind: grammar.JSONSchema, Data: `{}`}, param: "response_format.json_schema.schema"},
		{so: `{"json":{"type":"integer"}}`, want: &grammar.Grammar{Kind: grammar.JSONSchema, Data: `{"type":"integer"}`}, param: "structured_outputs.json"},
		{so: `{"json":"{\"type\":\"integer\"}"}`, want: &grammar.Grammar{Kind: grammar.JSONSchema, Data: `{"type":"integer"}`}, param: "structured_outputs.json"},
		{so: `{"regex":"[a-z]+"}`, want: &grammar.Grammar{Kind: grammar.Regex, Data: `[a-z]+`}, param: "structured_outputs.regex"},
		{so: `{"choice":["a","b"]}`, want: &grammar.Grammar{Kind: grammar.Choice, Choices: []string{"a", "b"}}, param: "structured_outputs.choice"},
		{so: `{"grammar":"start: \"x\""}`, want: &grammar.Grammar{Kind: grammar.Lark, Data: `start: "x"`}, param: "structured_outputs.grammar"},
		{so: `{"json_object":true}`, want: &grammar.Grammar{Kind: grammar.JSONObject}, param: "structured_outputs.json_object"},

		{rf: `{"type":"yaml"}`, param: "response_format.type", errSubstr: `"yaml" is not one of`},
		{rf: `{}`, param: "response_format.type", errSubstr: "required"},
		{rf: `"json"`, param: "response_format", errSubstr: "response_format"},
		{rf: `{"type":"json_schema"}`, param: "response_format.json_schema", errSubstr: "required"},
		{rf: `{"type":"json_schema","json_schema":{"schema":{}}}`, param: "response_format.json_schema.name", errSubstr: "name is required"},
		{rf: `{"type":"json_schema","json_schema":{"name":"x","schema":{},"strictly":true}}`, param: "response_format.json_schema", errSubstr: "strictly"},
		{rf: `{"type":"text","json_schema":{"name":"x"}}`, param: "response_format.json_schema", errSubstr: "only allowed"},
		{rf: `{"type":"json_object","extra":1}`, param: "response_format", errSubstr: "extra"},
		{so: `{}`, param: "structured_outputs", errSubstr: "must set one of"},
		{so: `{"regex":"a","choice":["b"]}`, param: "structured_outputs", errSubstr: "regex and choice"},
		{so: `{"choice":[]}`, param: "structured_outputs.choice", errSubstr: "at least one"},
		{so: `{"json_object":false}`, param: "structured_outputs.json_object", errSubstr: "only be true"},
		{so: `{"structural_tag":"x"}`, param: "structured_outputs", errSubstr: "structural_tag"},
		{so: `{"regex":5}`, param: "structured_outputs", errSubstr: "regex"},
		{rf: `{"type":"json_object"}`, so: `{"regex":"a"}`, param: "structured_outputs.regex", errSubstr: "response_format and structured_outputs"},
	}
	for _, c := range cases {
		name := fmt.Sprintf("rf=%s so=%s", c.rf, c.so)
		var g GenRequest
		err := g.SetResponseFormat(json.RawMessage(c.rf))
		if err == nil {
			err = g.SetStructuredOutputs(json.RawMessage(c.so))
		}
		if c.errSubstr != "" {
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != c.param || !strings.Contains(pe.Message, c.errSubstr) || !errors.Is(err, engine.ErrInvalidRequest) {
				t.Errorf("%s: error %#v, want a 400 on %s containing %q", name, err, c.param, c.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := g.Output.Grammar
		if (got == nil) != (c.want == nil) || got != nil && (got.Kind != c.want.Kind || got.Data != c.want.Data ||
			!slices.Equal(got.Choices, c.want.Choices) || g.Output.Param != c.param) {
			t.Errorf("%s: grammar %+v from %q, want %+v from %q", name, got, g.Output.Param, c.want, c.param)
		}
	}
}

// fakeGrammars compiles nothing: it refuses the grammar "bad" as llguidance
// would and records what it was asked.
type fakeGrammars struct {
	got    []grammar.Grammar
	resume [][]int32
}

type nopConstraint struct{}

func (nopConstraint) Mask(dst []uint32) error { return nil }
func (nopConstraint) Commit(int32) error      { return nil }

func (f *fakeGrammars) Compile(g grammar.Grammar, resume []int32) (engine.Constraint, error) {
	f.got, f.resume = append(f.got, g), append(f.resume, resume)
	if g.Data == "bad" {
		return nil, fmt.Errorf("%w: parse error at 1:1", grammar.ErrGrammar)
	}
	return nopConstraint{}, nil
}

// Prepare compiles the grammar into the engine request; a grammar the
// compiler refuses is a 400 on the field it came from carrying the parser's
// message, and a backend that cannot constrain refuses rather than ignoring.
func TestPrepareCompilesGrammar(t *testing.T) {
	vocab := streamtest.NewPieceVocab()
	fg := &fakeGrammars{}
	b := &Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: vocab, ContextLen: 100, Grammars: fg}
	newReq := func(so string) *GenRequest {
		g := &GenRequest{}
		if err := g.SetMessages([]ChatMessage{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		if err := g.SetStructuredOutputs(json.RawMessage(so)); err != nil {
			t.Fatal(err)
		}
		return g
	}
	req, err := Prepare(b, newReq(`{"regex":"[0-9]+"}`))
	if err != nil || req.Constraint == nil || len(fg.got) != 1 || fg.got[0].Data != "[0-9]+" || fg.resume[0] != nil {
		t.Fatalf("good grammar: constraint %v, err %v, compiled %v", req.Constraint, err, fg.got)
	}
	if req, err := Prepare(b, newReq(`null`)); err != nil || req.Constraint != nil {
		t.Fatalf("no grammar: constraint %v, err %v", req.Constraint, err)
	}
	_, err = Prepare(b, newReq(`{"regex":"bad"}`))
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "structured_outputs.regex" || !strings.Contains(pe.Message, "parse error at 1:1") {
		t.Fatalf("bad grammar: %#v", err)
	}
	if c, err := ConstraintAfter(b, newReq(`{"regex":"x"}`), []int32{4, 5}); err != nil || c == nil || !slices.Equal(fg.resume[len(fg.resume)-1], []int32{4, 5}) {
		t.Fatalf("resume: %v %v %v", c, err, fg.resume)
	}
	b.Grammars = nil
	_, err = Prepare(b, newReq(`{"regex":"x"}`))
	if !errors.As(err, &pe) || pe.Param != "structured_outputs" || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no compiler: %#v", err)
	}
}
