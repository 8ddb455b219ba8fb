// Package grammar is the pure-Go half of constrained decoding: what a request
// constrains its output to (Grammar: a JSON Schema, a regular expression, a
// Lark grammar or a list of choices) and the grammars a server writes itself
// (TextWithout, CompactJSON's layout). It compiles nothing: the llguidance
// binding (package constrain, cgo) does, behind stream.Grammars. Keeping the
// two apart lets the transport-neutral stream core build grammars without
// linking Rust.
package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrGrammar marks a grammar llguidance refuses (a schema it cannot compile,
// a regex or Lark syntax error); the message is the parser's own.
var ErrGrammar = errors.New("invalid grammar")

// Kind names the grammar language of a Grammar.
type Kind string

const (
	JSONSchema Kind = "json_schema" // Data is a JSON Schema document
	JSONObject Kind = "json_object" // any JSON object; Data is ignored
	Regex      Kind = "regex"       // Data is a Rust regex, matched against the whole output
	Lark       Kind = "lark"        // Data is a Lark grammar (llguidance's dialect)
	Choice     Kind = "choice"      // the output is exactly one of Choices
)

// Grammar is what a request constrains its output to.
type Grammar struct {
	Kind    Kind
	Data    string
	Choices []string // Kind Choice only
}

// Compiled returns the llguidance constraint type and data for g: what the
// binding hands llg_new_matcher.
func (g Grammar) Compiled() (typ, data string, err error) {
	switch g.Kind {
	case JSONSchema:
		return "json_schema", CompactJSON(g.Data), nil
	case Regex, Lark:
		return string(g.Kind), g.Data, nil
	case JSONObject:
		return "json_schema", CompactJSON(`{"type":"object"}`), nil
	case Choice:
		if len(g.Choices) == 0 {
			return "", "", fmt.Errorf("%w: choice needs at least one string", ErrGrammar)
		}
		alts := make([]string, len(g.Choices))
		for i, c := range g.Choices {
			// Go's QuoteMeta escapes a subset of what Rust's regex treats as
			// meta, and Rust accepts an escape before any of those characters.
			alts[i] = regexp.QuoteMeta(c)
		}
		return "regex", "(" + strings.Join(alts, "|") + ")", nil
	}
	return "", "", fmt.Errorf("%w: unknown grammar kind %q", ErrGrammar, g.Kind)
}

// jsonLayout fixes the whitespace of constrained JSON to the layout models
// are trained on ({"a": 1, "b": [2, 3]}). llguidance's default allows any
// whitespace between tokens, and a small model, once it emits one newline,
// tends to emit nothing else until max_tokens.
const jsonLayout = `"x-guidance":{"whitespace_flexible":false,"item_separator":", ","key_separator":": "}`

// CompactJSON adds jsonLayout to a schema object that sets no x-guidance
// options of its own; JSONSchema grammars get it, and a Lark grammar's
// %json schemas should too. Anything else (a boolean schema, invalid JSON)
// goes to llguidance unchanged, to be compiled or refused with its own
// message.
func CompactJSON(schema string) string {
	t := strings.TrimSpace(schema)
	if !strings.HasPrefix(t, "{") || strings.Contains(t, `"x-guidance"`) || !json.Valid([]byte(t)) {
		return schema
	}
	rest := strings.TrimSpace(t[1:])
	if strings.HasPrefix(rest, "}") {
		return "{" + jsonLayout + "}"
	}
	return "{" + jsonLayout + "," + rest
}
