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

// setTools reads tools, tool_choice and parallel_tool_calls into g.
func setTools(g *stream.GenRequest, wr *wireRequest) error {
	var tools json.RawMessage
	if httpedge.Present(wr.Tools) {
		var list []json.RawMessage
		if err := json.Unmarshal(wr.Tools, &list); err != nil {
			return stream.InvalidParam("tools", "tools must be a list of tool objects")
		}
		chat := make([]map[string]json.RawMessage, len(list))
		for i, raw := range list {
			var t map[string]json.RawMessage
			if err := json.Unmarshal(raw, &t); err != nil {
				return stream.InvalidParam(fmt.Sprintf("tools[%d]", i), "tools[%d] must be a tool object", i)
			}
			var typ string
			_ = json.Unmarshal(t["type"], &typ)
			if typ != "function" {
				// web_search, file_search, computer_use, mcp, code_interpreter…
				// are hosted tools: there is nothing here to run them.
				return httpedge.Unsupported(fmt.Sprintf("tools[%d].type", i),
					"tool type %q is not supported by this server; only function tools", typ)
			}
			delete(t, "type")
			chat[i] = map[string]json.RawMessage{"type": json.RawMessage(`"function"`), "function": mustJSON(t)}
		}
		tools = mustJSON(chat)
	}
	choice := wr.ToolChoice
	if c := bytes.TrimSpace(choice); len(c) > 0 && c[0] == '{' {
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(c, &named); err != nil {
			return stream.InvalidParam("tool_choice", "tool_choice: %v", err)
		}
		if named.Type != "function" {
			return httpedge.Unsupported("tool_choice.type",
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
	return stream.RenameParams(g.SetTools(tools, choice, parallel), "function.", "")
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
	chat := []map[string]any{{"id": it.CallID, "type": "function",
		"function": map[string]string{"name": it.Name, "arguments": it.Arguments}}}
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
