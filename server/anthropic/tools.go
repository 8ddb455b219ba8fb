package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Tool use on the Messages API. Anthropic's tools ({name, description,
// input_schema}) and tool_choice ({"type": "auto"|"any"|"tool"|"none"},
// disable_parallel_tool_use) are rewritten into OpenAI's chat shape and read
// by the stream core's one reader (stream.SetTools), so the rules are
// chat's; errors name the Messages fields. tool_use blocks in the history
// become an assistant turn's calls and tool_result blocks tool turns, both
// rendered through the chat template as chat's are.

// serverTools are the prefixes of the versioned tool types Anthropic runs
// on its own side (web_search_20250305, web_fetch_20250910,
// code_execution_20250825, …): nothing here runs them, so they are left out
// of the model's tools and the message says so (sluice_warnings), as the
// Responses API does with OpenAI's hosted tools, instead of refusing a
// client that offers them by default. Anthropic's client tools (bash,
// text_editor, computer) are different: the client runs them, but their
// schema is Anthropic's own and not in the request, so they stay a 400.
var serverTools = []string{"web_search_", "web_fetch_", "code_execution_", "tool_search_tool_"}

func isServerTool(typ string) bool {
	for _, p := range serverTools {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// setTools reads tools and tool_choice into g, and returns what it left
// out (the server tools) for the message to report.
func setTools(g *stream.GenRequest, wr *wireRequest) (leftOut []string, err error) {
	var tools json.RawMessage
	if httpedge.Present(wr.Tools) {
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(wr.Tools, &list); err != nil {
			return nil, stream.InvalidParam("tools", "tools must be a list of tool objects")
		}
		chat := make([]map[string]any, 0, len(list))
		for i, t := range list {
			var typ string
			_ = json.Unmarshal(t["type"], &typ)
			if isServerTool(typ) {
				leftOut = append(leftOut, fmt.Sprintf("tools[%d]: %s is a tool this server cannot run; it was left out of the model's tools", i, typ))
				continue
			}
			if typ != "" && typ != "custom" {
				return nil, httpedge.Unsupported(fmt.Sprintf("tools[%d].type", i),
					"tool type %q is not supported by this server; custom tools (name, description, input_schema) are served, server tools (web search, web fetch, code execution) are left out", typ)
			}
			if !httpedge.Present(t["input_schema"]) {
				return nil, stream.InvalidParam(fmt.Sprintf("tools[%d].input_schema", i), "tools[%d].input_schema: field required", i)
			}
			// defer_loading (Anthropic's tool search): the tool is not put
			// in the model's context until a search loads it. Sluice runs
			// no tool search, so a deferred tool stays out of the prompt,
			// which is what the field asks for the first turn (Claude
			// Code defers the tools it can do without).
			if httpedge.Present(t["defer_loading"]) {
				var deferred bool
				if err := json.Unmarshal(t["defer_loading"], &deferred); err != nil {
					return nil, stream.InvalidParam(fmt.Sprintf("tools[%d].defer_loading", i), "tools[%d].defer_loading must be a boolean", i)
				}
				if deferred {
					continue
				}
			}
			// cache_control is accepted: the prefix cache reuses every
			// shared prompt prefix without being asked.
			fn := map[string]json.RawMessage{"parameters": t["input_schema"]}
			for k, v := range t {
				if k != "type" && k != "input_schema" && k != "cache_control" && k != "defer_loading" {
					fn[k] = v // name, description, strict; anything else is refused by the reader
				}
			}
			chat = append(chat, map[string]any{"type": "function", "function": fn})
		}
		if len(chat) > 0 {
			tools = mustJSON(chat)
		}
	}
	var choice json.RawMessage
	var parallel *bool
	if httpedge.Present(wr.ToolChoice) {
		var tc struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
		}
		if err := json.Unmarshal(wr.ToolChoice, &tc); err != nil {
			return nil, stream.InvalidParam("tool_choice", "tool_choice must be an object with a type")
		}
		switch tc.Type {
		case "auto":
			if httpedge.Present(tools) { // vacuous without tools
				choice = mustJSON("auto")
			}
		case "any":
			choice = mustJSON("required")
		case "none":
			choice = mustJSON("none")
		case "tool":
			if tc.Name == "" {
				return nil, stream.InvalidParam("tool_choice.name", "tool_choice.name is required with type tool")
			}
			choice = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		default:
			return nil, stream.InvalidParam("tool_choice.type", "tool_choice.type must be auto, any, tool or none, got %q", tc.Type)
		}
		if d := tc.DisableParallelToolUse; d != nil && httpedge.Present(tools) {
			p := !*d
			parallel = &p
		}
	}
	return leftOut, stream.RenameParams(g.SetTools(tools, choice, parallel), "function.parameters", "input_schema", "function.", "")
}

// contentBlock is any block of a message's content; its type says which
// fields it uses.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// thinking
	Signature string `json:"signature"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
}

// turns reads one message's content (a string or blocks) into chat turns:
// an assistant message is one turn, its text and tool_use blocks (calls);
// a user message is a tool turn per tool_result block and a user turn of
// its text blocks, in the order they came. calls holds the tool_use ids of
// the turns before; a tool_result must answer one of them.
func turns(role string, raw json.RawMessage, param string, calls map[string]bool) (_ []stream.ChatMessage, thought bool, _ error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		text, err := blocksText(raw, param)
		return []stream.ChatMessage{{Role: role, Content: text}}, false, err
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false, stream.InvalidParam(param, "%s must be a string or a list of content blocks", param)
	}
	var out []stream.ChatMessage
	var text bytes.Buffer
	var uses []map[string]any
	userText := false
	reasoning := ""
	for j, rb := range blocks {
		p := fmt.Sprintf("%s[%d]", param, j)
		var b contentBlock
		if err := httpedge.Decode(rb, &b, p); err != nil {
			return nil, false, err
		}
		switch {
		case b.Type == "text":
			text.WriteString(b.Text)
			userText = true
		case b.Type == "tool_use" && role == "assistant":
			if b.ID == "" || b.Name == "" {
				f := map[bool]string{true: "id", false: "name"}[b.ID == ""]
				return nil, false, stream.InvalidParam(p+"."+f, "%s.%s is required", p, f)
			}
			input := bytes.TrimSpace(b.Input)
			if len(input) == 0 || input[0] != '{' {
				return nil, false, stream.InvalidParam(p+".input", "%s.input must be an object", p)
			}
			uses = append(uses, map[string]any{"id": b.ID, "type": "function",
				"function": map[string]string{"name": b.Name, "arguments": string(input)}})
			calls[b.ID] = true
		case b.Type == "tool_result" && role == "user":
			if !calls[b.ToolUseID] {
				return nil, false, stream.InvalidParam(p+".tool_use_id", "%s.tool_use_id %q answers no earlier tool_use block", p, b.ToolUseID)
			}
			if userText { // the text before the result is a turn of its own
				out = append(out, stream.ChatMessage{Role: "user", Content: text.String()})
				text.Reset()
				userText = false
			}
			result := ""
			if httpedge.Present(b.Content) {
				var err error
				if result, err = blocksText(b.Content, p+".content"); err != nil {
					return nil, false, err
				}
			}
			// The template has no error flag: the model reads it.
			if b.IsError != nil && *b.IsError {
				result = "Error: " + result
			}
			out = append(out, stream.ChatMessage{Role: "tool", Content: result, ToolCallID: b.ToolUseID})
		case (b.Type == "thinking" || b.Type == "redacted_thinking") && role == "assistant":
			// An earlier turn's thinking, sent back as agents do: its
			// signature is this server's seal of what the model reasoned,
			// given back to the template as the turn's reasoning (which
			// the template shows or drops as the model was trained); a
			// signature this server did not make (another server's, before
			// a restart) carries nothing it can read, and is dropped.
			// Counted for clear_thinking.
			thought = true
			if r, err := httpedge.Unseal(b.Signature); err == nil {
				reasoning += r
			}
		case b.Type == "tool_use" || b.Type == "tool_result":
			return nil, false, stream.InvalidParam(p+".type", "%s: %s blocks belong in %s messages", p, b.Type,
				map[bool]string{true: "assistant", false: "user"}[b.Type == "tool_use"])
		default:
			return nil, false, httpedge.Unsupported(p+".type",
				"content block type %q is not supported (text, thinking, tool_use and tool_result only)", b.Type)
		}
	}
	if role == "assistant" {
		m := stream.ChatMessage{Role: role, Content: text.String(), Reasoning: reasoning}
		if len(uses) > 0 {
			var err error
			if m.ToolCalls, err = stream.ParseToolCalls(param, mustJSON(uses)); err != nil {
				return nil, false, err
			}
		}
		return append(out, m), thought, nil
	}
	if userText || len(out) == 0 {
		out = append(out, stream.ChatMessage{Role: role, Content: text.String()})
	}
	return out, thought, nil
}

// mustJSON marshals strings, maps and slices of already-valid JSON, which
// always marshal.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
