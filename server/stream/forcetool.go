package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/constrain/grammar"
)

// ForcedCall is a test option (sluice serve --force-tool-call): a request
// that offers the named tool, leaves tool_choice to the model ("auto") and
// carries no tool turn yet is answered with one call of that tool, as if
// its tool_choice had named it; once the history has a tool turn, such a
// request is answered in text, as if its tool_choice were "none". A small
// model rarely chooses a tool by itself, and once it has seen a call it
// copies it, so this is how a test shows an unmodified agent client's whole
// round trip, the same every time: the call, the client running it, the
// next request carrying the result, a text answer that ends the turn.
// That answer is a short line (shortAnswer): a base model's free text runs
// to max_tokens, which an agent answers with "continue" requests. Apply
// runs once the prompt is rendered, so the prompt is the request's own and
// the next turn finds it in the prefix cache.
type ForcedCall struct {
	Name string
	// Args, when set, pins the call's arguments (a JSON object): the tool's
	// schema in the call's grammar becomes exactly these values, so the
	// call is a known, harmless one (a test must not run what a tiny model
	// makes up).
	Args json.RawMessage
}

// ParseForcedCall reads the flag's value: NAME, or NAME=ARGS where ARGS is a
// JSON object of the arguments to pin.
func ParseForcedCall(spec string) (*ForcedCall, error) {
	name, args, pinned := strings.Cut(spec, "=")
	if name == "" {
		return nil, fmt.Errorf("--force-tool-call %q: NAME or NAME={JSON arguments}", spec)
	}
	f := &ForcedCall{Name: name}
	if pinned {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("--force-tool-call %q: the arguments after = must be a JSON object", spec)
		}
		f.Args = json.RawMessage(args)
	}
	return f, nil
}

// Apply sets g's tool choice, when g qualifies; it reports whether it
// did. A nil f does nothing, so a caller needs no check.
func (f *ForcedCall) Apply(g *GenRequest) bool {
	if f == nil || !g.Chat || g.Tools.Choice != ToolChoiceAuto {
		return false
	}
	i := slices.IndexFunc(g.Tools.List, func(t Tool) bool { return t.Name == f.Name })
	if i < 0 {
		return false
	}
	for _, m := range g.Messages {
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Role == "tool" {
			g.Tools.Choice = ToolChoiceNone
			if g.Output.Grammar == nil {
				g.Output = Output{Grammar: &shortAnswer, Param: "tools"}
			}
			return true
		}
	}
	if f.Args != nil {
		list := slices.Clone(g.Tools.List) // the request's own list is not ours to change
		list[i].Parameters = pinnedSchema(f.Args)
		g.Tools.List = list
	}
	g.Tools.Choice, g.Tools.Function, g.Tools.Parallel = ToolChoiceFunction, f.Name, false
	return true
}

// shortAnswer is the text after a tool turn: one line of words, then the
// end of the reply.
var shortAnswer = grammar.Grammar{Kind: grammar.Regex, Data: `[A-Za-z][A-Za-z0-9 ,.'-]{0,59}`}

// pinnedSchema is the JSON Schema whose only instance is args (an object,
// checked by ParseForcedCall), property by property in args' order.
func pinnedSchema(args json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var keys []string
	var props bytes.Buffer
	_, _ = dec.Token() // {
	for dec.More() {
		tok, _ := dec.Token()
		key := tok.(string)
		var v json.RawMessage
		_ = dec.Decode(&v)
		k, _ := json.Marshal(key)
		if props.Len() > 0 {
			props.WriteByte(',')
		}
		fmt.Fprintf(&props, `%s:{"const":%s}`, k, v)
		keys = append(keys, key)
	}
	req, _ := json.Marshal(keys)
	if len(keys) == 0 {
		req = []byte("[]")
	}
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%s},"required":%s,"additionalProperties":false}`, props.String(), req))
}
