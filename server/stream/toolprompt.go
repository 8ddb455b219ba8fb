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
		return tt.RenderChat(hfMessages(g.Messages), tools)
	}
	g.Tools.Format = ToolsHermes
	return tt.RenderChat(hermesMessages(g.Messages, g.Tools.List), nil)
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
	// (reasoning_content), which plain messages cannot.
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
