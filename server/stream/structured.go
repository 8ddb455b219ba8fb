package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/constrain/grammar"
	"github.com/sluicehq/sluice/engine"
)

// Structured outputs: a request constrains its output to a grammar through
// OpenAI's response_format or vLLM's structured_outputs. The grammar is
// compiled in Prepare, against the served model's vocabulary, so a schema
// or grammar llguidance refuses is a 400 with its message before any token,
// and the engine masks every sampled token with it (engine.Constraint).

// Grammars compiles output constraints for one model's vocabulary; the
// loader provides it (nil: the backend cannot constrain, and a request that
// asks is refused). Compile returns the constraint already advanced past
// resume, the tokens an interrupted generation produced.
type Grammars interface {
	Compile(g grammar.Grammar, resume []int32) (engine.Constraint, error)
}

// Output is what a request constrains its output to; the zero value is
// free text.
type Output struct {
	Grammar *grammar.Grammar
	// Param is the request field the grammar came from, for errors.
	Param string
}

// SetResponseFormat reads OpenAI's response_format: {"type": "text"},
// {"type": "json_object"}, or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict", "description"}}. The schema is enforced
// whether strict is true or not: a constrained sampler cannot produce
// anything else.
func (g *GenRequest) SetResponseFormat(raw json.RawMessage) error {
	const param = "response_format"
	if absent(raw) {
		return nil
	}
	var rf struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
		// Schema with json_object is llama-server's spelling of a schema.
		Schema json.RawMessage `json:"schema"`
	}
	if err := strictDecode(raw, &rf); err != nil {
		return InvalidParam(param, "%s: %v", param, err)
	}
	if !absent(rf.Schema) && rf.Type != "json_object" {
		return InvalidParam(param+".schema", "%s.schema is only allowed with type json_object (llama.cpp's form; OpenAI's is json_schema.schema)", param)
	}
	switch rf.Type {
	case "text":
		if !absent(rf.JSONSchema) {
			return InvalidParam(param+".json_schema", "%s.json_schema is only allowed with type json_schema", param)
		}
		return nil
	case "json_object":
		if !absent(rf.JSONSchema) {
			return InvalidParam(param+".json_schema", "%s.json_schema is only allowed with type json_schema", param)
		}
		if !absent(rf.Schema) {
			return g.setGrammar(param+".schema", grammar.Grammar{Kind: grammar.JSONSchema, Data: string(rf.Schema)})
		}
		return g.setGrammar(param, grammar.Grammar{Kind: grammar.JSONObject})
	case "json_schema":
		var js struct {
			Name        *string         `json:"name"`
			Description *string         `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		}
		p := param + ".json_schema"
		if absent(rf.JSONSchema) {
			return InvalidParam(p, "%s is required with type json_schema", p)
		}
		if err := strictDecode(rf.JSONSchema, &js); err != nil {
			return InvalidParam(p, "%s: %v", p, err)
		}
		if js.Name == nil || *js.Name == "" {
			return InvalidParam(p+".name", "%s.name is required", p)
		}
		schema := "{}" // OpenAI: no schema is any JSON value
		if !absent(js.Schema) {
			schema = string(js.Schema)
		}
		return g.setGrammar(p+".schema", grammar.Grammar{Kind: grammar.JSONSchema, Data: schema})
	case "":
		return InvalidParam(param+".type", "%s.type is required: text, json_object or json_schema", param)
	}
	return InvalidParam(param+".type", "%s.type %q is not one of text, json_object, json_schema", param, rf.Type)
}

// SetStructuredOutputs reads vLLM's structured_outputs: exactly one of
// json (a schema, as an object or a string), regex, choice (a list of
// strings), grammar (Lark, as llguidance reads it) or json_object (true).
func (g *GenRequest) SetStructuredOutputs(raw json.RawMessage) error {
	const param = "structured_outputs"
	if absent(raw) {
		return nil
	}
	var so struct {
		JSON       json.RawMessage `json:"json"`
		Regex      *string         `json:"regex"`
		Choice     []string        `json:"choice"`
		Grammar    *string         `json:"grammar"`
		JSONObject *bool           `json:"json_object"`
	}
	if err := strictDecode(raw, &so); err != nil {
		return InvalidParam(param, "%s: %v", param, err)
	}
	var set []string
	var gr grammar.Grammar
	var p string
	if !absent(so.JSON) {
		schema := string(so.JSON)
		if so.JSON[0] == '"' { // vLLM also takes the schema as a JSON string
			if err := json.Unmarshal(so.JSON, &schema); err != nil {
				return InvalidParam(param+".json", "%s.json: %v", param, err)
			}
		}
		set, gr, p = append(set, "json"), grammar.Grammar{Kind: grammar.JSONSchema, Data: schema}, param+".json"
	}
	if so.Regex != nil {
		set, gr, p = append(set, "regex"), grammar.Grammar{Kind: grammar.Regex, Data: *so.Regex}, param+".regex"
	}
	if so.Choice != nil {
		if len(so.Choice) == 0 {
			return InvalidParam(param+".choice", "%s.choice must list at least one string", param)
		}
		set, gr, p = append(set, "choice"), grammar.Grammar{Kind: grammar.Choice, Choices: so.Choice}, param+".choice"
	}
	if so.Grammar != nil {
		set, gr, p = append(set, "grammar"), grammar.Grammar{Kind: grammar.Lark, Data: *so.Grammar}, param+".grammar"
	}
	if so.JSONObject != nil {
		if !*so.JSONObject {
			return InvalidParam(param+".json_object", "%s.json_object may only be true", param)
		}
		set, gr, p = append(set, "json_object"), grammar.Grammar{Kind: grammar.JSONObject}, param+".json_object"
	}
	switch len(set) {
	case 0:
		return InvalidParam(param, "%s must set one of json, regex, choice, grammar, json_object", param)
	case 1:
		return g.setGrammar(p, gr)
	}
	return InvalidParam(param, "%s sets %s: choose one", param, strings.Join(set, " and "))
}

// SetGBNF reads llama-server's grammar: a GBNF grammar as a string,
// converted to llguidance's Lark here, so a syntax error is a 400 naming
// grammar with the GBNF parser's message. "" is no grammar, as in
// llama-server.
func (g *GenRequest) SetGBNF(raw json.RawMessage) error {
	const param = "grammar"
	if absent(raw) {
		return nil
	}
	var src string
	if err := json.Unmarshal(raw, &src); err != nil {
		return InvalidParam(param, "%s must be a string (a GBNF grammar)", param)
	}
	if src == "" {
		return nil
	}
	gr, err := grammar.FromGBNF(src)
	if err != nil {
		return InvalidParam(param, "%s: %v", param, err)
	}
	return g.setGrammar(param, gr)
}

// SetJSONSchema reads llama-server's top-level json_schema: a JSON Schema
// the output must match (an object or a boolean, as JSON Schema allows).
func (g *GenRequest) SetJSONSchema(raw json.RawMessage) error {
	const param = "json_schema"
	if absent(raw) {
		return nil
	}
	if t := bytes.TrimSpace(raw); t[0] != '{' && string(t) != "true" && string(t) != "false" {
		return InvalidParam(param, "%s must be a JSON Schema (an object)", param)
	}
	return g.setGrammar(param, grammar.Grammar{Kind: grammar.JSONSchema, Data: string(raw)})
}

func (g *GenRequest) setGrammar(param string, gr grammar.Grammar) error {
	if g.Output.Grammar != nil {
		return InvalidParam(param, "%s and %s both constrain the output: choose one", g.Output.Param, firstField(param))
	}
	g.Output = Output{Grammar: &gr, Param: param}
	return nil
}

// constraint compiles g's output grammar for b, advanced past resume; nil
// when the output is free.
func (b *Backend) constraint(g *GenRequest, resume []int32) (engine.Constraint, error) {
	o := g.Output
	if g.Tools.Forced() {
		if o.Grammar != nil {
			return nil, InvalidParam(firstField(o.Param), "%s cannot be combined with tool_choice %q: the reply is a tool call", firstField(o.Param), g.Tools.Choice)
		}
		gr := toolGrammar(g.Tools)
		o = Output{Grammar: &gr, Param: "tools"}
	}
	if g.Tools.Choice == ToolChoiceNone && len(g.Tools.List) > 0 && o.Grammar == nil && b.Grammars != nil {
		// A response_format grammar, when set, is the constraint instead.
		// Without a compiler the reply is still never parsed for calls
		// (NewToolStream); the ban only keeps the opener out of its text.
		gr := noCallGrammar(g.Tools)
		o = Output{Grammar: &gr, Param: "tools"}
	}
	if o.Grammar == nil {
		if c := b.reasoningBudget(g, resume); c != nil { // budget.go
			return c, nil
		}
		return nil, nil
	}
	if b.Grammars == nil {
		return nil, &ParamError{Param: firstField(o.Param), Sentinel: ErrUnsupported,
			Message: fmt.Sprintf("%s: this backend cannot constrain its output", firstField(o.Param))}
	}
	c, err := b.Grammars.Compile(*o.Grammar, resume)
	if errors.Is(err, grammar.ErrGrammar) {
		return nil, InvalidParam(o.Param, "%s: %v", o.Param, err)
	}
	return c, err
}

// ConstraintAfter is the constraint of g's generation once resume has been
// produced: what a resumed stream submits with engine.Request.Resume.
func ConstraintAfter(b *Backend, g *GenRequest, resume []int32) (engine.Constraint, error) {
	return b.constraint(g, slices.Clone(resume))
}

func firstField(param string) string {
	if i := strings.IndexAny(param, ".["); i >= 0 {
		return param[:i]
	}
	return param
}

func absent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// strictDecode decodes an object refusing unknown fields: a structured
// output option Sluice does not implement is a 400, not a silent no-op.
func strictDecode(raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s has the wrong type (got JSON %s)", te.Field, te.Value)
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}
