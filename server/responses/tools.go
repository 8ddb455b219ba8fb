package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Tools and text.format on the Responses API. The Responses shapes are
// flatter than chat's (a tool is {"type":"function","name",…}, a named
// choice {"type":"function","name"}, a schema format carries name and
// schema beside its type), so each is rewritten into the chat shape and
// read by the stream core's one reader (SetTools, SetResponseFormat): a
// value is valid here exactly when it is on chat, and an error names the
// Responses field (renamed).

// hostedTools are the tool types OpenAI runs on its side (and Codex's
// freeform custom tools): nothing here runs them, so they are left out of
// the model's tools and the response says so (toolMap.warnings), instead
// of refusing a client that offers them by default.
var hostedTools = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_preview_2025_03_11": true, "web_search_2025_08_26": true,
	"file_search": true, "computer_use_preview": true, "computer_use": true, "code_interpreter": true,
	"image_generation": true, "mcp": true, "local_shell": true, "shell": true, "custom": true, "apply_patch": true,
	"tool_search": true,
}

// toolMap is what reading the tools left beside g.Tools: the qualified
// names of namespace tools (Codex's MCP servers, flattened as
// <namespace>__<name>, the function names Codex itself uses when it
// flattens them) and the hosted tools left out.
type toolMap struct {
	ns       map[string]nsName // qualified name → its namespace and own name
	warnings []string
}

type nsName struct{ namespace, name string }

// qualify is a namespace tool's name in the model's function list.
func qualify(namespace, name string) string { return namespace + "__" + name }

// setTools reads tools, tool_choice and parallel_tool_calls into g.
func setTools(g *stream.GenRequest, wr *wireRequest) (*toolMap, error) {
	tm := &toolMap{ns: map[string]nsName{}}
	var tools json.RawMessage
	if httpedge.Present(wr.Tools) {
		var list []json.RawMessage
		if err := json.Unmarshal(wr.Tools, &list); err != nil {
			return nil, stream.InvalidParam("tools", "tools must be a list of tool objects")
		}
		chat := []map[string]json.RawMessage{}
		for i, raw := range list {
			param := fmt.Sprintf("tools[%d]", i)
			var t map[string]json.RawMessage
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, stream.InvalidParam(param, "%s must be a tool object", param)
			}
			var typ string
			_ = json.Unmarshal(t["type"], &typ)
			switch {
			case typ == "function":
				chat = append(chat, chatTool(t))
			case typ == "namespace":
				inner, err := namespaceTools(t, param, tm)
				if err != nil {
					return nil, err
				}
				chat = append(chat, inner...)
			case hostedTools[typ]:
				tm.warnings = append(tm.warnings, fmt.Sprintf("%s: %s is a tool this server cannot run; it was left out of the model's tools", param, typ))
			default:
				return nil, httpedge.Unsupported(param+".type",
					"tool type %q is not supported by this server; function and namespace tools are served, hosted tools are left out", typ)
			}
		}
		if len(chat) > 0 {
			tools = mustJSON(chat)
		}
	}
	choice := wr.ToolChoice
	if c := bytes.TrimSpace(choice); len(c) > 0 && c[0] == '{' {
		var named struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal(c, &named); err != nil {
			return nil, stream.InvalidParam("tool_choice", "tool_choice: %v", err)
		}
		if named.Type == "function" && named.Namespace != "" {
			named.Name = qualify(named.Namespace, named.Name)
		}
		if named.Type != "function" {
			return nil, httpedge.Unsupported("tool_choice.type",
				"tool_choice type %q is not supported; use auto, none, required or {\"type\": \"function\", \"name\": …}", named.Type)
		}
		choice = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
	}
	parallel := wr.ParallelToolCalls
	if string(tools) == "[]" || tools == nil {
		// Vacuous without tools, as OpenAI takes them (the SDKs send
		// parallel_tool_calls and tool_choice "auto" by default).
		tools, parallel = nil, nil
		if string(bytes.TrimSpace(choice)) == `"auto"` {
			choice = nil
		}
	}
	return tm, stream.RenameParams(g.SetTools(tools, choice, parallel), "function.", "")
}

// chatTool is a Responses function tool in chat's shape.
func chatTool(t map[string]json.RawMessage) map[string]json.RawMessage {
	delete(t, "type")
	return map[string]json.RawMessage{"type": json.RawMessage(`"function"`), "function": mustJSON(t)}
}

// namespaceTools flattens a namespace tool ({"type": "namespace", "name",
// "description", "tools": [function tools]}) into chat tools named
// <namespace>__<name>, recorded in tm so a call is reported back in the
// namespace's shape.
func namespaceTools(t map[string]json.RawMessage, param string, tm *toolMap) ([]map[string]json.RawMessage, error) {
	var ns struct {
		Name  string                       `json:"name"`
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := httpedge.Decode(mustJSON(t), &ns, param); err != nil {
		return nil, err
	}
	if ns.Name == "" {
		return nil, stream.InvalidParam(param+".name", "%s.name is required", param)
	}
	var out []map[string]json.RawMessage
	for j, it := range ns.Tools {
		p := fmt.Sprintf("%s.tools[%d]", param, j)
		var typ, name string
		_ = json.Unmarshal(it["type"], &typ)
		_ = json.Unmarshal(it["name"], &name)
		if typ != "function" {
			return nil, httpedge.Unsupported(p+".type", "%s.type must be function, got %q", p, typ)
		}
		if name == "" {
			return nil, stream.InvalidParam(p+".name", "%s.name is required", p)
		}
		q := qualify(ns.Name, name)
		tm.ns[q] = nsName{ns.Name, name}
		it["name"] = mustJSON(q)
		out = append(out, chatTool(it))
	}
	return out, nil
}

// setTextFormat reads text.format, the Responses API's response_format.
func setTextFormat(g *stream.GenRequest, raw json.RawMessage) error {
	if !httpedge.Present(raw) {
		return nil
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return stream.InvalidParam("text.format", "text.format must be an object")
	}
	rf := map[string]json.RawMessage{}
	if t, ok := f["type"]; ok {
		rf["type"] = t
		delete(f, "type")
	}
	var typ string
	_ = json.Unmarshal(rf["type"], &typ)
	if typ == "json_schema" {
		rf["json_schema"] = mustJSON(f)
	} else {
		for k, v := range f { // refused by the reader as fields of the wrong type
			rf[k] = v
		}
	}
	return formatNames(g.SetResponseFormat(mustJSON(rf)))
}

// formatNames renames response_format in err to text.format: the reader's
// errors, and Prepare's when the grammar does not compile.
func formatNames(err error) error {
	return stream.RenameParams(err, "response_format.json_schema", "text.format", "response_format", "text.format")
}

// mustJSON marshals maps and slices of already-valid JSON, which always
// marshal.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// outputItem is a function_call_output input item: a call's result.
type outputItem struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
	Status string          `json:"status"`
}

// appendCall adds a function_call item to msgs: to the assistant turn just
// before it when there is one (a reply with text and calls, or several
// calls, is one assistant message in the chat template), else as a turn of
// its own.
func appendCall(msgs []stream.ChatMessage, raw json.RawMessage, param string) ([]stream.ChatMessage, error) {
	var it functionCall // an output item the model made, sent back as input
	if err := httpedge.Decode(raw, &it, param); err != nil {
		return nil, err
	}
	if it.CallID == "" {
		return nil, stream.InvalidParam(param+".call_id", "%s.call_id is required", param)
	}
	name := it.Name
	if it.Namespace != "" {
		name = qualify(it.Namespace, it.Name)
	}
	chat := []map[string]any{{"id": it.CallID, "type": "function",
		"function": map[string]string{"name": name, "arguments": it.Arguments}}}
	calls, err := stream.ParseToolCalls(param, mustJSON(chat))
	if err != nil {
		return nil, stream.RenameParams(err, param+"[0].function.", param+".")
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, calls...)
		return msgs, nil
	}
	return append(msgs, stream.ChatMessage{Role: "assistant", ToolCalls: calls}), nil
}

// appendOutput adds a function_call_output item to msgs as a tool turn.
// The output is a string or a list of input_text parts, and it answers a
// call made before it, in the input or in the previous response.
func appendOutput(prior, msgs []stream.ChatMessage, raw json.RawMessage, param string) ([]stream.ChatMessage, error) {
	var it outputItem
	if err := httpedge.Decode(raw, &it, param); err != nil {
		return nil, err
	}
	if it.CallID == "" {
		return nil, stream.InvalidParam(param+".call_id", "%s.call_id is required", param)
	}
	if !httpedge.Present(it.Output) {
		return nil, stream.InvalidParam(param+".output", "%s.output is required", param)
	}
	text, err := partsText(it.Output, param+".output")
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(slices.Concat(prior, msgs), func(m stream.ChatMessage) bool {
		return slices.ContainsFunc(m.ToolCalls, func(c stream.ToolCall) bool { return c.ID == it.CallID })
	}) {
		return nil, stream.InvalidParam(param+".call_id", "%s.call_id %q answers no function_call before it", param, it.CallID)
	}
	return append(msgs, stream.ChatMessage{Role: "tool", Content: text, ToolCallID: it.CallID}), nil
}
