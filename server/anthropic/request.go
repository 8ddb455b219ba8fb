package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/stream"
)

// wireRequest is the body of POST /v1/messages and /v1/messages/count_tokens.
// A field it does not declare is refused before parsing (the server's
// fields.go; Anthropic's API ignores some), and the fields below that
// Sluice cannot honour are refused when present (refusals lists them).
type wireRequest struct {
	Model         string          `json:"model"`
	Messages      json.RawMessage `json:"messages"`
	System        json.RawMessage `json:"system"`
	MaxTokens     *int            `json:"max_tokens"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        *bool           `json:"stream"`
	Metadata      *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
	// Thinking and OutputConfig.Effort: reasoning controls (context.go).
	Thinking *struct {
		Type         string  `json:"type"`
		BudgetTokens *int    `json:"budget_tokens"`
		Display      *string `json:"display"`
	} `json:"thinking"`
	ServiceTier *string `json:"service_tier"`
	Speed       *string `json:"speed"`
	// UserProfileID attributes the request, as metadata.user_id does.
	UserProfileID *string `json:"user_profile_id"`
	// CacheControl is accepted: the prefix cache reuses every shared
	// prompt prefix without being asked.
	CacheControl json.RawMessage `json:"cache_control"`
	OutputConfig *struct {
		Effort *string         `json:"effort"`
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`

	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Container         json.RawMessage `json:"container"`
	MCPServers        json.RawMessage `json:"mcp_servers"`
	ContextManagement json.RawMessage `json:"context_management"`
	Diagnostics       json.RawMessage `json:"diagnostics"`
	InferenceGeo      json.RawMessage `json:"inference_geo"`
	OutputFormat      json.RawMessage `json:"output_format"`
	WorkspaceID       json.RawMessage `json:"workspace_id"`

	// AllowSpecialTokens: a control token's spelling in message text is
	// that control token (stream.GenRequest.AllowSpecialTokens).
	AllowSpecialTokens *bool `json:"allow_special_tokens"`
}

// refusals are the fields of the Messages API that Sluice does not serve.
func (wr *wireRequest) refusals() error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"container", wr.Container},
		{"mcp_servers", wr.MCPServers},
		{"diagnostics", wr.Diagnostics}, {"inference_geo", wr.InferenceGeo},
		{"output_format", wr.OutputFormat}, {"workspace_id", wr.WorkspaceID},
	} {
		if httpedge.Present(f.raw) {
			return httpedge.Unsupported(f.name, "%s is not supported by this server", f.name)
		}
	}
	if oc := wr.OutputConfig; oc != nil {
		if httpedge.Present(oc.Format) {
			return httpedge.Unsupported("output_config.format", "output_config.format (structured outputs) is not supported by this server")
		}
	}
	if wr.Speed != nil && *wr.Speed != "standard" {
		return httpedge.Unsupported("speed", "speed %q is not supported; the one speed is standard", *wr.Speed)
	}
	// Both tiers Anthropic defines mean "the normal queue" here: there is one.
	if wr.ServiceTier != nil && *wr.ServiceTier != "auto" && *wr.ServiceTier != "standard_only" {
		return stream.InvalidParam("service_tier", "service_tier must be auto or standard_only, got %q", *wr.ServiceTier)
	}
	return nil
}

// parse decodes and validates a Messages request. count is the
// count_tokens endpoint, where max_tokens is not required and the sampling
// fields do not matter.
func parse(body []byte, count bool) (*stream.GenRequest, error) {
	g, _, err := parseLeftOut(body, count)
	return g, err
}

// parseLeftOut is parse, also returning what of the request was left out
// (server tools), for the message's sluice_warnings.
func parseLeftOut(body []byte, count bool) (g *stream.GenRequest, leftOut []string, err error) {
	var wr wireRequest
	if err := httpedge.Decode(body, &wr, ""); err != nil {
		return nil, nil, err
	}
	if err := wr.refusals(); err != nil {
		return nil, nil, err
	}
	msgs, thinkingTurns, err := wr.chat()
	if err != nil {
		return nil, nil, err
	}
	g = &stream.GenRequest{Model: wr.Model}
	if err := g.SetMessages(msgs); err != nil {
		return nil, nil, err
	}
	if g.ContextEdits, err = contextEdits(wr.ContextManagement, thinkingTurns); err != nil {
		return nil, nil, err
	}
	if err := setThinking(g, &wr); err != nil {
		return nil, nil, err
	}
	if leftOut, err = setTools(g, &wr); err != nil {
		return nil, nil, err
	}
	g.AllowSpecialTokens = wr.AllowSpecialTokens != nil && *wr.AllowSpecialTokens
	if count {
		return g, leftOut, nil
	}
	if wr.MaxTokens == nil {
		return nil, nil, stream.InvalidParam("max_tokens", "max_tokens: field required")
	}
	// Anthropic's ranges, narrower than OpenAI's: temperature [0, 1], top_k ≥ 1.
	if t := wr.Temperature; t != nil && (*t < 0 || *t > 1) {
		return nil, nil, stream.InvalidParam("temperature", "temperature must be between 0 and 1, got %g", *t)
	}
	if k := wr.TopK; k != nil && *k < 1 {
		return nil, nil, stream.InvalidParam("top_k", "top_k must be at least 1, got %d", *k)
	}
	if len(wr.StopSequences) > stream.MaxStops {
		return nil, nil, stream.InvalidParam("stop_sequences", "at most %d stop sequences, got %d", stream.MaxStops, len(wr.StopSequences))
	}
	p := stream.Params{MaxTokens: wr.MaxTokens, Temperature: wr.Temperature, TopP: wr.TopP, TopK: wr.TopK, Stop: wr.StopSequences}
	if err := g.SetParams(p); err != nil {
		if pe, ok := err.(*stream.ParamError); ok && pe.Param == "stop" {
			pe.Param = "stop_sequences"
		}
		return nil, nil, err
	}
	g.Stream = wr.Stream != nil && *wr.Stream
	if wr.UserProfileID != nil {
		g.User = *wr.UserProfileID
	}
	if wr.Metadata != nil && wr.Metadata.UserID != nil {
		g.User = *wr.Metadata.UserID
	}
	return g, leftOut, nil
}

// chat flattens system and messages into the turns the chat template reads,
// and counts the assistant turns that carried thinking blocks. A system
// message inside messages (Claude Code sends them) is a system turn where
// it stands (the stream core merges it into the leading system prompt when
// the template allows none there). A conversation must end with the user: a
// final assistant message asks the model to continue it (Anthropic's
// prefill), which a template that always opens a new assistant turn cannot
// render faithfully, so it is refused.
func (wr *wireRequest) chat() ([]stream.ChatMessage, int, error) {
	var msgs []stream.ChatMessage
	if httpedge.Present(wr.System) {
		text, err := blocksText(wr.System, "system")
		if err != nil {
			return nil, 0, err
		}
		msgs = append(msgs, stream.ChatMessage{Role: "system", Content: text})
	}
	raw := bytes.TrimSpace(wr.Messages)
	if !httpedge.Present(raw) {
		return nil, 0, stream.InvalidParam("messages", "messages: field required")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil || len(elems) == 0 {
		return nil, 0, stream.InvalidParam("messages", "messages must be a non-empty list of messages")
	}
	calls := map[string]bool{} // the tool_use ids so far, which a tool_result answers
	thinking := 0
	for i, e := range elems {
		param := fmt.Sprintf("messages[%d]", i)
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := httpedge.Decode(e, &m, param); err != nil {
			return nil, 0, err
		}
		switch m.Role {
		case "system":
			text, err := blocksText(m.Content, param+".content")
			if err != nil {
				return nil, 0, err
			}
			msgs = append(msgs, stream.ChatMessage{Role: "system", Content: text})
			continue
		case "user", "assistant":
		default:
			return nil, 0, stream.InvalidParam(param+".role", "%s.role must be user, assistant or system, got %q", param, m.Role)
		}
		turns, thought, err := turns(m.Role, m.Content, param+".content", calls)
		if err != nil {
			return nil, 0, err
		}
		if thought {
			thinking++
		}
		msgs = append(msgs, turns...)
	}
	// A user message of tool results is the user's turn too: the model
	// answers the results. A system message after it changes nothing.
	last := ""
	for _, m := range msgs {
		if m.Role != "system" {
			last = m.Role
		}
	}
	switch last {
	case "user", "tool":
	case "":
		return nil, 0, stream.InvalidParam("messages", "messages must hold a user message")
	default:
		return nil, 0, httpedge.Unsupported(fmt.Sprintf("messages[%d].role", len(elems)-1),
			"the last message must be the user's: continuing a prefilled assistant message is not supported")
	}
	return msgs, thinking, nil
}

// blocksText accepts a string or a list of text blocks and joins their text.
// cache_control on a block is accepted: the prefix cache reuses every shared
// prompt prefix without being asked.
func blocksText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", stream.InvalidParam(param, "%s must be a string or a list of content blocks", param)
	}
	var b bytes.Buffer
	for j, bl := range blocks {
		if bl.Type != "text" {
			return "", httpedge.Unsupported(fmt.Sprintf("%s[%d].type", param, j),
				"content block type %q is not supported (text only)", bl.Type)
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// KnownFields are the top-level fields of a Messages body (and of
// count_tokens'); the server refuses any other (wirefields).
func KnownFields() map[string]bool { return wirefields.Known(reflect.TypeFor[wireRequest]()) }
