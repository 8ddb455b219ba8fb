package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Tool calling, as OpenAI's chat completions define it: a request lists
// tools (functions with JSON Schema parameters) and a tool_choice; the
// model's reply may call them; the calls stream as deltas and the history
// carries them back (assistant tool_calls, tool messages). The transports
// read the wire shapes into GenRequest.Tools and ChatMessage; Prepare
// renders the tools into the prompt (toolprompt.go) and, for "required" or
// a named function, constrains the reply to a call (toolgrammar.go);
// ToolStream parses the reply (toolparse.go).

// Tool is one function a request offers the model.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // a JSON Schema; nil: no parameters
	Strict      bool
}

// ToolCall is a call the model made, in a reply or in the history.
// Arguments is JSON text, as OpenAI carries it.
type ToolCall struct {
	ID, Name, Arguments string
}

// Tool choice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function" // Tools.Function names it
)

// Tools is a request's tool configuration; the zero value offers none.
type Tools struct {
	List     []Tool
	Choice   string // one of the ToolChoice modes; "" before SetTools
	Function string // ToolChoiceFunction: the function that must be called
	Parallel bool   // several calls in one reply (OpenAI's default: true)
	// Format is how the model writes calls, fixed by Prepare from the chat
	// template.
	Format ToolFormat
}

// Active reports whether the reply may contain tool calls to parse.
func (t *Tools) Active() bool { return len(t.List) > 0 && t.Choice != ToolChoiceNone }

// Forced reports whether the reply must be a call.
func (t *Tools) Forced() bool {
	return len(t.List) > 0 && (t.Choice == ToolChoiceRequired || t.Choice == ToolChoiceFunction)
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// SetTools reads OpenAI's tools, tool_choice and parallel_tool_calls.
func (g *GenRequest) SetTools(tools, choice json.RawMessage, parallel *bool) error {
	g.Tools = Tools{}
	if !absent(tools) {
		var list []json.RawMessage
		if err := json.Unmarshal(tools, &list); err != nil {
			return InvalidParam("tools", "tools must be a list of tool objects")
		}
		for i, raw := range list {
			t, err := parseTool(fmt.Sprintf("tools[%d]", i), raw)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(g.Tools.List, func(o Tool) bool { return o.Name == t.Name }) {
				return InvalidParam(fmt.Sprintf("tools[%d].function.name", i), "tools[%d]: function %q is listed twice", i, t.Name)
			}
			g.Tools.List = append(g.Tools.List, t)
		}
	}
	if len(g.Tools.List) > 0 {
		g.Tools.Choice, g.Tools.Parallel = ToolChoiceAuto, true // OpenAI's defaults
	}
	if parallel != nil {
		if len(g.Tools.List) == 0 {
			return InvalidParam("parallel_tool_calls", "parallel_tool_calls is only allowed when tools are specified")
		}
		g.Tools.Parallel = *parallel
	}
	if absent(choice) {
		return nil
	}
	var mode string
	if choice[0] == '"' {
		_ = json.Unmarshal(choice, &mode)
		switch mode {
		case ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNone:
		default:
			return InvalidParam("tool_choice", `tool_choice %q is not one of "none", "auto", "required" or a function object`, mode)
		}
	} else {
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := strictDecode(choice, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
			return InvalidParam("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": …}}`)
		}
		if !slices.ContainsFunc(g.Tools.List, func(t Tool) bool { return t.Name == named.Function.Name }) {
			return InvalidParam("tool_choice.function.name", "tool_choice names function %q, which tools does not list", named.Function.Name)
		}
		mode, g.Tools.Function = ToolChoiceFunction, named.Function.Name
	}
	if len(g.Tools.List) == 0 {
		if mode != ToolChoiceNone {
			return InvalidParam("tool_choice", "tool_choice is only allowed when tools are specified")
		}
		return nil // "none" of no tools: nothing to do
	}
	g.Tools.Choice = mode
	return nil
}

func parseTool(param string, raw json.RawMessage) (Tool, error) {
	var w struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	if err := strictDecode(raw, &w); err != nil {
		return Tool{}, InvalidParam(param, "%s: %v", param, err)
	}
	if w.Type != "function" {
		return Tool{}, InvalidParam(param+".type", "%s.type must be \"function\", got %q", param, w.Type)
	}
	if w.Function == nil {
		return Tool{}, InvalidParam(param+".function", "%s.function is required", param)
	}
	if !toolNameRE.MatchString(w.Function.Name) {
		return Tool{}, InvalidParam(param+".function.name", "%s.function.name must be 1 to 64 letters, digits, underscores or dashes, got %q", param, w.Function.Name)
	}
	t := Tool{Name: w.Function.Name, Description: w.Function.Description}
	if !absent(w.Function.Parameters) {
		p := bytes.TrimSpace(w.Function.Parameters)
		if p[0] != '{' {
			return Tool{}, InvalidParam(param+".function.parameters", "%s.function.parameters must be a JSON Schema object", param)
		}
		t.Parameters = p
	}
	t.Strict = w.Function.Strict != nil && *w.Function.Strict
	return t, nil
}

// WireToolCall is a tool call in OpenAI's chat shape: an assistant
// message's tool_calls[i] in a request, a message's call in a whole
// response.
type WireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ParseToolCalls reads an assistant message's tool_calls (param names the
// field for errors). Arguments must be JSON text: the template renders them
// as an object.
func ParseToolCalls(param string, raw json.RawMessage) ([]ToolCall, error) {
	if absent(raw) {
		return nil, nil
	}
	var list []WireToolCall
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, InvalidParam(param, "%s must be a list of {id, type, function: {name, arguments}}", param)
	}
	calls := make([]ToolCall, len(list))
	for i, c := range list {
		p := fmt.Sprintf("%s[%d]", param, i)
		if c.Type != "" && c.Type != "function" {
			return nil, InvalidParam(p+".type", "%s.type must be \"function\", got %q", p, c.Type)
		}
		if c.Function.Name == "" {
			return nil, InvalidParam(p+".function.name", "%s.function.name is required", p)
		}
		args := strings.TrimSpace(c.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return nil, InvalidParam(p+".function.arguments", "%s.function.arguments must be JSON text, got %q", p, c.Function.Arguments)
		}
		calls[i] = ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return calls, nil
}

// checkToolHistory applies the rules on tool turns that do not depend on
// the template: a tool message answers a call made before it.
func checkToolHistory(msgs []ChatMessage) error {
	ids := map[string]bool{}
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID != "" {
				ids[c.ID] = true
			}
		}
		if m.Role == "tool" {
			if m.ToolCallID == "" {
				return InvalidParam(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d]: a tool message needs tool_call_id", i)
			}
			if !ids[m.ToolCallID] {
				return InvalidParam(fmt.Sprintf("messages[%d].tool_call_id", i), "messages[%d]: tool_call_id %q answers no earlier tool call", i, m.ToolCallID)
			}
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return InvalidParam(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d]: only assistant messages carry tool_calls", i)
		}
	}
	return nil
}
