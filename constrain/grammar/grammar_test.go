package grammar

import (
	"errors"
	"testing"
)

// Compiled is what the llguidance binding is handed: JSON schemas with the
// compact layout, choices as an escaped alternation, and a refusal for a
// grammar it could not compile, before any cgo call.
func TestCompiled(t *testing.T) {
	cases := []struct {
		g              Grammar
		typ, data      string
		wantGrammarErr bool
	}{
		{g: Grammar{Kind: JSONObject}, typ: "json_schema", data: "{" + jsonLayout + `,"type":"object"}`},
		{g: Grammar{Kind: JSONSchema, Data: `{}`}, typ: "json_schema", data: "{" + jsonLayout + "}"},
		{g: Grammar{Kind: JSONSchema, Data: `true`}, typ: "json_schema", data: `true`},
		{g: Grammar{Kind: Regex, Data: `[a-z]+`}, typ: "regex", data: `[a-z]+`},
		{g: Grammar{Kind: Choice, Choices: []string{"a.b", "c"}}, typ: "regex", data: `(a\.b|c)`},
		{g: Grammar{Kind: Choice}, wantGrammarErr: true},
		{g: Grammar{Kind: "yaml"}, wantGrammarErr: true},
	}
	for _, c := range cases {
		typ, data, err := c.g.Compiled()
		if c.wantGrammarErr {
			if !errors.Is(err, ErrGrammar) {
				t.Errorf("%+v: error %v, want ErrGrammar", c.g, err)
			}
			continue
		}
		if err != nil || typ != c.typ || data != c.data {
			t.Errorf("%+v: %q %q %v, want %q %q", c.g, typ, data, err, c.typ, c.data)
		}
	}
}
