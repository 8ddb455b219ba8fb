package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/stream"
)

// wireRequest is the body of POST /v1/responses. A field it does not
// declare is refused before parsing (the server's fields.go); every
// declared one is honoured, refused (refusals), or a hint
// (wirefields.Hints).
type wireRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Stream             *bool             `json:"stream"`
	Store              *bool             `json:"store"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Metadata           map[string]string `json:"metadata"`
	User               *string           `json:"user"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	// PromptCacheKey is accepted and not a partition: the prefix cache
	// serves every shared prefix, keyed or not, and Codex sends one key per
	// conversation, so partitioning by it would lose the system prompt and
	// tools its conversations share. (cache_salt partitions, on chat.)
	PromptCacheKey *string `json:"prompt_cache_key"`
	// ClientMetadata is the client's attribution (Codex sends its
	// installation and session); accepted, not echoed, as OpenAI does.
	ClientMetadata map[string]any `json:"client_metadata"`
	// Reasoning and Include's reasoning.encrypted_content: reasoning.go.
	Reasoning *reasoningConfig `json:"reasoning"`
	// Tools, ToolChoice, ParallelToolCalls and Text.Format: tools.go.
	// parallel_tool_calls is honoured: false lets the model make one call.
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	Tools             json.RawMessage `json:"tools"`
	Include           []string        `json:"include"`
	TopLogprobs       *int            `json:"top_logprobs"`
	Truncation        *string         `json:"truncation"`
	ServiceTier       *string         `json:"service_tier"`
	Background        *bool           `json:"background"`
	StreamOptions     *struct {
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	Text *struct {
		Format    json.RawMessage `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	} `json:"text"`

	AccessPrograms       json.RawMessage `json:"access_programs"`
	BackgroundOptions    json.RawMessage `json:"background_options"`
	ContextManagement    json.RawMessage `json:"context_management"`
	Conversation         json.RawMessage `json:"conversation"`
	Image                json.RawMessage `json:"image"`
	MaxToolCalls         json.RawMessage `json:"max_tool_calls"`
	Moderation           json.RawMessage `json:"moderation"`
	Prompt               json.RawMessage `json:"prompt"`
	PromptCacheOptions   json.RawMessage `json:"prompt_cache_options"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention"`

	// AllowSpecialTokens: a control token's spelling in message text is
	// that control token (stream.GenRequest.AllowSpecialTokens).
	AllowSpecialTokens *bool `json:"allow_special_tokens"`
}

// refusals names the first field present that Sluice cannot honour.
func (wr *wireRequest) refusals() error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"access_programs", wr.AccessPrograms}, {"background_options", wr.BackgroundOptions},
		{"context_management", wr.ContextManagement}, {"conversation", wr.Conversation},
		{"image", wr.Image}, {"max_tool_calls", wr.MaxToolCalls}, {"moderation", wr.Moderation},
		{"prompt", wr.Prompt}, {"prompt_cache_options", wr.PromptCacheOptions},
		{"prompt_cache_retention", wr.PromptCacheRetention},
	} {
		if httpedge.Present(f.raw) {
			return httpedge.Unsupported(f.name, "%s is not supported by this server", f.name)
		}
	}
	if err := checkInclude(wr.Include); err != nil {
		return err
	}
	switch {
	case wr.TopLogprobs != nil && *wr.TopLogprobs != 0:
		return httpedge.Unsupported("top_logprobs", "top_logprobs is not supported by the Responses API here yet")
	case wr.Truncation != nil && *wr.Truncation != "disabled":
		return httpedge.Unsupported("truncation", "truncation %q is not supported; an input over the context is refused (disabled)", *wr.Truncation)
	case wr.ServiceTier != nil && *wr.ServiceTier != "auto" && *wr.ServiceTier != "default":
		return httpedge.Unsupported("service_tier", "service_tier %q is not supported; there is one tier (default)", *wr.ServiceTier)
	case wr.Background != nil && *wr.Background:
		return httpedge.Unsupported("background", "background responses are not supported; stream instead")
	case wr.StreamOptions != nil && wr.StreamOptions.IncludeObfuscation != nil && *wr.StreamOptions.IncludeObfuscation:
		return httpedge.Unsupported("stream_options.include_obfuscation", "stream obfuscation is not supported")
	}
	// medium is the default: asking for it asks for nothing.
	if t := wr.Text; t != nil && httpedge.Present(t.Verbosity) && string(bytes.TrimSpace(t.Verbosity)) != `"medium"` {
		return httpedge.Unsupported("text.verbosity", "text.verbosity other than medium (the default) is not supported by this server")
	}
	return nil
}

// parsed is a validated request: the generation, the wire fields a
// response echoes, and the conversation so far (the previous response's,
// then this input; never the instructions) that a stored response keeps.
type parsed struct {
	gen   *stream.GenRequest
	wire  *wireRequest
	conv  []stream.ChatMessage
	tools *toolMap
}

// parse decodes and validates a request; history returns the conversation
// a stored response ended (false when there is no such response).
func parse(body []byte, history func(id string) ([]stream.ChatMessage, bool)) (*parsed, error) {
	var wr wireRequest
	if err := httpedge.Decode(body, &wr, ""); err != nil {
		return nil, err
	}
	if err := wr.refusals(); err != nil {
		return nil, err
	}
	var conv []stream.ChatMessage
	if wr.PreviousResponseID != nil {
		prev, ok := history(*wr.PreviousResponseID)
		if !ok {
			return nil, stream.InvalidParam("previous_response_id",
				"previous response %q not found (never stored, store false, or expired)", *wr.PreviousResponseID)
		}
		conv = append(conv, prev...)
	}
	input, err := inputMessages(wr.Input, conv)
	if err != nil {
		return nil, err
	}
	conv = append(conv, input...)
	msgs := conv
	// Instructions apply to this response only: they are not carried over
	// to the next one, as OpenAI documents.
	if wr.Instructions != nil && *wr.Instructions != "" {
		msgs = append([]stream.ChatMessage{{Role: "system", Content: *wr.Instructions}}, conv...)
	}
	g := &stream.GenRequest{Model: wr.Model}
	if err := g.SetMessages(msgs); err != nil {
		return nil, err
	}
	if len(wr.Metadata) > 16 {
		return nil, stream.InvalidParam("metadata", "metadata holds at most 16 pairs, got %d", len(wr.Metadata))
	}
	p := stream.Params{MaxTokens: wr.MaxOutputTokens, MaxTokensParam: "max_output_tokens", Temperature: wr.Temperature, TopP: wr.TopP}
	if err := g.SetParams(p); err != nil {
		return nil, err
	}
	tools, err := setTools(g, &wr)
	if err != nil {
		return nil, err
	}
	if err := setReasoning(g, wr.Reasoning); err != nil {
		return nil, err
	}
	g.AllowSpecialTokens = wr.AllowSpecialTokens != nil && *wr.AllowSpecialTokens
	if wr.Text != nil {
		if err := setTextFormat(g, wr.Text.Format); err != nil {
			return nil, err
		}
	}
	g.Stream = wr.Stream != nil && *wr.Stream
	switch {
	case wr.SafetyIdentifier != nil:
		g.User = *wr.SafetyIdentifier
	case wr.User != nil:
		g.User = *wr.User
	}
	return &parsed{gen: g, wire: &wr, conv: conv, tools: tools}, nil
}

// inputMessages reads input: a string (one user message) or a list of
// items: messages, each {"role", "content"} with content a string or a
// list of input_text / output_text parts, and the function_call and
// function_call_output items of a tool round trip (tools.go), and
// reasoning items (skipped). Other item and part types (images, files,
// hosted tools) are refused.
func inputMessages(raw json.RawMessage, prior []stream.ChatMessage) ([]stream.ChatMessage, error) {
	raw = bytes.TrimSpace(raw)
	if !httpedge.Present(raw) {
		return nil, stream.InvalidParam("input", "input: field required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, stream.InvalidParam("input", "input: %v", err)
		}
		return []stream.ChatMessage{{Role: "user", Content: s}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, stream.InvalidParam("input", "input must be a string or a non-empty list of items")
	}
	msgs := make([]stream.ChatMessage, 0, len(items))
	reasoning := "" // read from reasoning items, for the next assistant turn
	// withReasoning gives the assistant turn just made the reasoning before it.
	withReasoning := func() {
		if n := len(msgs); n > 0 && reasoning != "" && msgs[n-1].Role == "assistant" {
			msgs[n-1].Reasoning += reasoning
			reasoning = ""
		}
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		var m struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := httpedge.Decode(it, &m, param); err != nil {
			return nil, err
		}
		var err error
		switch m.Type {
		case "function_call":
			if msgs, err = appendCall(msgs, it, param); err != nil {
				return nil, err
			}
			withReasoning()
			continue
		case "function_call_output":
			if msgs, err = appendOutput(prior, msgs, it, param); err != nil {
				return nil, err
			}
			continue
		case "reasoning":
			// An earlier turn's reasoning, sent back by a stateless client
			// (Codex with store false): its encrypted_content is this
			// server's seal of what the model reasoned, given back to the
			// template with the assistant turn that follows it; one this
			// server did not seal (another's, before a restart) carries
			// nothing it can read, and is dropped.
			var r struct {
				EncryptedContent string `json:"encrypted_content"`
			}
			_ = json.Unmarshal(it, &r)
			if text, err := httpedge.Unseal(r.EncryptedContent); err == nil {
				reasoning += text
			}
			continue
		}
		if m.Type != "" && m.Type != "message" {
			return nil, httpedge.Unsupported(param+".type", "input item type %q is not supported (message, function_call and function_call_output only)", m.Type)
		}
		switch m.Role {
		case "user", "assistant", "system", "developer":
		default:
			return nil, stream.InvalidParam(param+".role", "%s.role must be user, assistant, system or developer, got %q", param, m.Role)
		}
		text, err := partsText(m.Content, param+".content")
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, stream.ChatMessage{Role: m.Role, Content: text})
		withReasoning()
	}
	return msgs, nil
}

func partsText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", stream.InvalidParam(param, "%s must be a string or a list of content parts", param)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			return "", httpedge.Unsupported(fmt.Sprintf("%s[%d].type", param, j),
				"content part type %q is not supported (input_text and output_text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// KnownFields are the top-level fields of a Responses body; the server
// refuses any other (wirefields).
func KnownFields() map[string]bool { return wirefields.Known(reflect.TypeFor[wireRequest]()) }
