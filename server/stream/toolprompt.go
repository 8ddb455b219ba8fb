package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ToolTemplater is a Tokenizer whose chat template can be given tools and
// tool turns, as Hugging Face's apply_chat_template gives them; found by
// type assertion. Without it a request with tools is refused.
type ToolTemplater interface {
	// RenderChat renders msgs (message dicts: role, content, tool_calls
	// with function.arguments as an object, tool_call_id) and tools (OpenAI
	// tool objects; nil: none) with the generation prompt appended.
	RenderChat(msgs []map[string]any, tools []any) (string, error)
	// ChatTemplateSource is the template's Jinja source.
	ChatTemplateSource() string
}

// KwargsTemplater is a ToolTemplater whose template can be given a
// request's chat_template_kwargs as variables, and add_generation_prompt
// either way, as apply_chat_template takes them; found by type assertion.
type KwargsTemplater interface {
	RenderChatKwargs(msgs []map[string]any, tools []any, addGenerationPrompt bool, kwargs map[string]any) (string, error)
}

// reasoningKwargs are the kwargs that mean something without the
// template: they steer the reasoning (SetReasoning) on any model.
var reasoningKwargs = []string{"enable_thinking", "reasoning_effort"}

// kwargsRenderer is tok's KwargsTemplater when g has kwargs for it. A
// tokenizer without one (no Jinja template to give them to) takes only
// reasoningKwargs, which act through the reasoning controls; any other
// kwarg could change nothing, so it is refused by name rather than
// dropped.
func kwargsRenderer(tok any, g *GenRequest) (KwargsTemplater, error) {
	if len(g.TemplateKwargs) == 0 {
		return nil, nil
	}
	if kt, ok := tok.(KwargsTemplater); ok {
		return kt, nil
	}
	names := make([]string, 0, len(g.TemplateKwargs))
	for k := range g.TemplateKwargs {
		if !slices.Contains(reasoningKwargs, k) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	p := "chat_template_kwargs." + names[0]
	return nil, &ParamError{Param: p, Sentinel: ErrUnsupported,
		Message: p + ": this model's chat template cannot be given keyword arguments; only enable_thinking and reasoning_effort, which steer the reasoning, are served"}
}

// renderDicts renders message dicts and tools through tt, with g's
// kwargs when it has any.
func renderDicts(tt ToolTemplater, g *GenRequest, msgs []map[string]any, tools []any) (string, error) {
	kt, err := kwargsRenderer(tt, g)
	switch {
	case err != nil:
		return "", err
	case kt != nil:
		return kt.RenderChatKwargs(msgs, tools, true, g.TemplateKwargs)
	}
	return tt.RenderChat(msgs, tools)
}

// needsToolPrompt: the prompt must be rendered with tools or tool turns.
func needsToolPrompt(g *GenRequest) bool {
	if len(g.Tools.List) > 0 {
		return true
	}
	for _, m := range g.Messages {
		if len(m.ToolCalls) > 0 || m.Role == "tool" {
			return true
		}
	}
	return false
}

// toolPrompt renders g's chat with its tools and fixes g.Tools.Format. A
// template written for tools (it reads `tools` and `tool_calls`) gets them
// as Hugging Face passes them, and the model's call syntax is read from its
// markup; any other template gets the Hermes prompt instead (hermesSystem),
// with calls and results in the history written out in the same syntax.
func toolPrompt(tok Tokenizer, g *GenRequest) (string, error) {
	if err := checkToolHistory(g.Messages); err != nil {
		return "", err
	}
	tt, ok := tok.(ToolTemplater)
	if !ok {
		return "", &ParamError{Param: "tools", Sentinel: ErrUnsupported, Message: "tools: this backend's chat template cannot render tools"}
	}
	src := tt.ChatTemplateSource()
	if strings.Contains(src, "tools") && strings.Contains(src, "tool_call") {
		g.Tools.Format = formatOf(src)
		var tools []any
		for _, t := range g.Tools.List {
			tools = append(tools, toolDict(t))
		}
		return renderDicts(tt, g, hfMessages(g.Messages), tools)
	}
	g.Tools.Format = ToolsHermes
	return renderDicts(tt, g, hermesMessages(g.Messages, g.Tools.List), nil)
}

// chatPrompt renders g's chat: through toolPrompt when tools or tool turns
// are involved, else as plain messages.
func chatPrompt(tok Tokenizer, g *GenRequest) (string, error) {
	text, err := renderChat(tok, g)
	if err == nil {
		return text, nil
	}
	// System messages after the first turn (agents send them mid-chat) are
	// rendered where they stand when the template takes them; a template
	// that refuses them (most raise on a system turn past the first) gets
	// them merged into the leading system prompt, in order.
	merged, ok := mergeSystem(g.Messages)
	if !ok {
		return "", err
	}
	mg := *g
	mg.Messages = merged
	text, err2 := renderChat(tok, &mg)
	g.Tools.Format = mg.Tools.Format
	if err2 != nil {
		return "", err
	}
	return text, nil
}

func renderChat(tok Tokenizer, g *GenRequest) (string, error) {
	if needsToolPrompt(g) {
		return toolPrompt(tok, g)
	}
	// A turn's reasoning goes to the template as message dicts carry it
	// (reasoning_content), which plain messages cannot; so do kwargs.
	kt, err := kwargsRenderer(tok, g)
	if err != nil {
		return "", err
	}
	if kt != nil {
		return kt.RenderChatKwargs(hfMessages(g.Messages), nil, true, g.TemplateKwargs)
	}
	if tt, ok := tok.(ToolTemplater); ok && slices.ContainsFunc(g.Messages, func(m ChatMessage) bool { return m.Reasoning != "" }) {
		return tt.RenderChat(hfMessages(g.Messages), nil)
	}
	return tok.ChatPrompt(g.Messages)
}

// mergeSystem moves every system message after the first non-system one
// into one leading system message, joined by blank lines in order; false
// when there is none to move.
func mergeSystem(msgs []ChatMessage) ([]ChatMessage, bool) {
	var sys []string
	var rest []ChatMessage
	moved := false
	seenOther := false
	for _, m := range msgs {
		switch {
		case m.Role != "system":
			seenOther = true
			rest = append(rest, m)
		default:
			moved = moved || seenOther
			sys = append(sys, m.Content)
		}
	}
	if !moved {
		return nil, false
	}
	return append([]ChatMessage{{Role: "system", Content: strings.Join(sys, "\n\n")}}, rest...), true
}

// promptError keeps a field's own 400 and reports anything else as the
// template's failure.
func promptError(param string, err error) error {
	var pe *ParamError
	if errors.As(err, &pe) {
		return err
	}
	return InvalidParam(param, "applying the chat template: %v", err)
}

// formatOf finds a template's call syntax from the markup it writes.
func formatOf(src string) ToolFormat {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return ToolsHermes
	case strings.Contains(src, "[TOOL_CALLS]"):
		return ToolsMistral
	case strings.Contains(src, "<|python_tag|>"), strings.Contains(src, "ipython"):
		return ToolsLlama3
	}
	return ToolsHermes
}

// toolDict is a tool as the OpenAI wire shows it, for a template.
func toolDict(t Tool) map[string]any {
	fn := map[string]any{"name": t.Name}
	if t.Description != "" {
		fn["description"] = t.Description
	}
	var params any = map[string]any{"type": "object", "properties": map[string]any{}}
	if t.Parameters != nil {
		_ = json.Unmarshal(t.Parameters, &params) // validated JSON
	}
	fn["parameters"] = params
	return map[string]any{"type": "function", "function": fn}
}

// hfMessages are msgs as Hugging Face templates read them: tool call
// arguments as objects (templates write them with tojson), tool messages
// with tool_call_id.
func hfMessages(msgs []ChatMessage) []map[string]any {
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		d := map[string]any{"role": m.Role, "content": m.Content}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				var args any
				_ = json.Unmarshal([]byte(c.Arguments), &args) // validated by ParseToolCalls
				calls[j] = map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": args}}
			}
			d["tool_calls"] = calls
		}
		if m.ToolCallID != "" {
			d["tool_call_id"] = m.ToolCallID
		}
		if m.Reasoning != "" {
			d["reasoning_content"] = m.Reasoning
			// gpt-oss's template reads a turn's reasoning from thinking, and
			// raises when a tool-call turn has both content and thinking
			// (it renders the content as the analysis message then).
			if len(m.ToolCalls) == 0 || m.Content == "" {
				d["thinking"] = m.Reasoning
			}
		}
		out[i] = d
	}
	return out
}

// hermesSystem is the system prompt that offers tools to a model whose
// template does not: the one Hermes 2 Pro was trained on (Qwen2.5 uses the
// same markup), which small instruction-tuned models follow too.
const hermesSystem = `You are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about what values to plug into functions. Here are the available tools:
<tools>
%s
</tools>
For each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags as follows:
<tool_call>
{"name": <function-name>, "arguments": <args-dict>}
</tool_call>`

// hermesMessages rewrites msgs for a template without tool support: the
// tools go into the system message (hermesSystem), an assistant's calls
// into its content as <tool_call> blocks, a tool's result into a
// <tool_response> block.
func hermesMessages(msgs []ChatMessage, tools []Tool) []map[string]any {
	var out []map[string]any
	if len(tools) > 0 {
		lines := make([]string, len(tools))
		for i, t := range tools {
			b, _ := json.Marshal(toolDict(t))
			lines[i] = string(b)
		}
		sys := fmt.Sprintf(hermesSystem, strings.Join(lines, "\n"))
		if len(msgs) > 0 && msgs[0].Role == "system" {
			sys = msgs[0].Content + "\n\n" + sys
			msgs = msgs[1:]
		}
		out = append(out, map[string]any{"role": "system", "content": sys})
	}
	for _, m := range msgs {
		content := m.Content
		for _, c := range m.ToolCalls {
			name, _ := json.Marshal(c.Name)
			if content != "" {
				content += "\n"
			}
			content += fmt.Sprintf("<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", name, c.Arguments)
		}
		if m.Role == "tool" {
			content = "<tool_response>\n" + content + "\n</tool_response>"
		}
		d := map[string]any{"role": m.Role, "content": content}
		if m.Reasoning != "" {
			d["reasoning_content"] = m.Reasoning
		}
		out = append(out, d)
	}
	return out
}

// protectKwargs is a copy of kwargs with every string in them, values and
// the keys of objects (a template may write those too), guard.Protect'ed:
// a kwarg is request text, as a message is. The top-level names are
// identifiers (SetTemplateKwargs) and are not written out.
func protectKwargs(kwargs map[string]any, guard TextGuard) map[string]any {
	if kwargs == nil {
		return nil
	}
	out := make(map[string]any, len(kwargs))
	for k, v := range kwargs {
		out[k] = protectedCopy(v, guard)
	}
	return out
}

func protectedCopy(v any, guard TextGuard) any {
	switch x := v.(type) {
	case string:
		return guard.Protect(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = protectedCopy(e, guard)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[guard.Protect(k)] = protectedCopy(e, guard)
		}
		return out
	}
	return v
}

// checkKwargsEncodable runs check (checkEncodable's) over every string in
// g's kwargs, naming the kwarg.
func checkKwargsEncodable(check func(param, text string) error, g *GenRequest) error {
	var walk func(p string, v any) error
	walk = func(p string, v any) error {
		switch x := v.(type) {
		case string:
			return check(p, x)
		case []any:
			for _, e := range x {
				if err := walk(p, e); err != nil {
					return err
				}
			}
		case map[string]any:
			for k, e := range x {
				if err := check(p, k); err != nil {
					return err
				}
				if err := walk(p, e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	names := make([]string, 0, len(g.TemplateKwargs))
	for k := range g.TemplateKwargs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := walk("chat_template_kwargs."+k, g.TemplateKwargs[k]); err != nil {
			return err
		}
	}
	return nil
}
