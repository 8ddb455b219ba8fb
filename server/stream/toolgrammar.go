package stream

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/constrain/grammar"
)

// toolGrammar is the Lark grammar a forced reply (tool_choice "required" or
// a named function) is constrained to: one call block in the model's
// syntax, or several when parallel calls are allowed, whose JSON is a call
// of a listed function with arguments valid for its parameter schema. The
// name comes first, so it streams before the arguments.
func toolGrammar(t Tools) grammar.Grammar {
	argsKey := "arguments"
	if t.Format == ToolsLlama3 {
		argsKey = "parameters"
	}
	var alts []json.RawMessage
	for _, tool := range t.List {
		if t.Choice == ToolChoiceFunction && tool.Name != t.Function {
			continue
		}
		params := tool.Parameters
		if params == nil {
			params = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
		}
		name, _ := json.Marshal(tool.Name)
		alts = append(alts, json.RawMessage(fmt.Sprintf(
			`{"type":"object","properties":{"name":{"const":%s},%q:%s},"required":["name",%q],"additionalProperties":false}`,
			name, argsKey, params, argsKey)))
	}
	schema := alts[0] // SetTools checked the named function is listed
	if len(alts) > 1 {
		b, _ := json.Marshal(map[string]any{"anyOf": alts})
		schema = b
	}
	call := "call: %json " + grammar.CompactJSON(string(schema))
	var start string
	switch t.Format {
	case ToolsLlama3:
		start = `start: call`
		if t.Parallel {
			start += ` ("; " call)*`
		}
	case ToolsMistral:
		start = `start: "[TOOL_CALLS][" call`
		if t.Parallel {
			start += ` (", " call)*`
		}
		start += ` "]"`
	default:
		start = `start: block`
		if t.Parallel {
			start += ` ("\n" block)*`
		}
		start += "\nblock: \"<tool_call>\\n\" call \"\\n</tool_call>\""
	}
	return grammar.Grammar{Kind: grammar.Lark, Data: strings.Join([]string{start, call}, "\n")}
}

// noCallGrammar is what a reply with tools offered but tool_choice "none"
// is constrained to: free text in which the format's call opener never
// appears (nor, for Llama 3, a bare call object at the start), so the
// model, which sees the tools in its prompt, answers in prose. A tag
// opener is banned without its ">": the default model, denied
// <tool_call>, writes <tool_call name="…"> instead.
func noCallGrammar(t Tools) grammar.Grammar {
	var anywhere, atStart []string
	for _, o := range openersOf(t.Format) {
		if o.startOnly {
			atStart = append(atStart, o.text)
		} else {
			anywhere = append(anywhere, strings.TrimSuffix(o.text, ">"))
		}
	}
	return grammar.TextWithout(anywhere, atStart)
}
