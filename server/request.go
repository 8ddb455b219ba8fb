package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// wireRequest is the JSON body of both endpoints. A field it does not
// declare is refused before parsing (fields.go); each declared one is
// honoured, refused when it asks for what Sluice cannot do (refused.go),
// or a hint (wirefields.Hints). Pointer fields distinguish "absent or
// null" from zero.
// Messages are decoded one by one, so an error can name the index.
type wireRequest struct {
	Model               string            `json:"model"`
	Messages            json.RawMessage   `json:"messages"`
	Prompt              json.RawMessage   `json:"prompt"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	TopK                *int              `json:"top_k"`
	MinP                *float64          `json:"min_p"`
	Seed                *int64            `json:"seed"`
	Stop                json.RawMessage   `json:"stop"`
	PresencePenalty     *float64          `json:"presence_penalty"`
	FrequencyPenalty    *float64          `json:"frequency_penalty"`
	RepetitionPenalty   *float64          `json:"repetition_penalty"`
	Stream              *bool             `json:"stream"`
	StreamOptions       *wireStreamOption `json:"stream_options"`
	User                *string           `json:"user"`
	N                   *int              `json:"n"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	StructuredOutputs   json.RawMessage   `json:"structured_outputs"`
	Tools               json.RawMessage   `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	Logprobs            json.RawMessage   `json:"logprobs"`     // logprobs.go
	TopLogprobs         *int              `json:"top_logprobs"` // logprobs.go

	// The engine's controls (controls.go).
	LogitBias    map[string]float64 `json:"logit_bias"`
	MinTokens    *int               `json:"min_tokens"`
	IgnoreEOS    *bool              `json:"ignore_eos"`
	StopTokenIDs []int32            `json:"stop_token_ids"`
	Echo         *bool              `json:"echo"` // echo.go

	// AllowSpecialTokens: a control token's spelling in message text is
	// that control token (stream.GenRequest.AllowSpecialTokens).
	AllowSpecialTokens *bool `json:"allow_special_tokens"`
	// CacheSalt: vLLM's prefix-cache partition (stream.GenRequest.CacheSalt).
	CacheSalt *string `json:"cache_salt"`
	// ReasoningEffort: the stream core's reasoning controls; and
	// ChatTemplateKwargs, the template's variables, of which
	// enable_thinking and reasoning_effort also set those (reasoning.go).
	ReasoningEffort    *string                    `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`

	// llama-server's output constraints: a GBNF grammar, and a JSON Schema
	// (stream.GenRequest.SetGBNF, SetJSONSchema).
	Grammar    json.RawMessage `json:"grammar"`
	JSONSchema json.RawMessage `json:"json_schema"`

	// Hints (wirefields.Hints): OpenAI's fields Sluice has nothing to do with.
	PromptCacheKey   *string `json:"prompt_cache_key"`
	SafetyIdentifier *string `json:"safety_identifier"`

	// vLLM's prompt and template extensions (request_ext.go).
	wireExtensions
}

type wireStreamOption struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"` // request_ext.go
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// An assistant turn's reasoning, as this server sends it back under
	// either name: given to the template (stream.ChatMessage.Reasoning).
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

// ParseRequest decodes and validates a request body. chat selects the
// /v1/chat/completions schema (messages) over /v1/completions (prompt).
// Errors are *APIError.
func ParseRequest(body []byte, chat bool) (*stream.GenRequest, error) {
	g, err := parseRequest(body, chat)
	if err != nil {
		return nil, toAPIError(err)
	}
	return g, nil
}

func parseRequest(body []byte, chat bool) (*stream.GenRequest, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, decodeError("", err)
	}
	if err := refuseUnserved(body, chat); err != nil {
		return nil, err
	}
	// Each endpoint's input field on the other is a mistake to name, not
	// to ignore.
	if chat && httpedge.Present(wr.Prompt) {
		return nil, stream.InvalidParam("prompt", "prompt is the input of /v1/completions; chat takes messages")
	}
	if !chat && httpedge.Present(wr.Messages) {
		return nil, stream.InvalidParam("messages", "messages are the input of /v1/chat/completions; completions take a prompt")
	}
	g := &stream.GenRequest{Model: wr.Model, Chat: chat}
	if chat {
		msgs, err := messages(wr.Messages)
		if err != nil {
			return nil, err
		}
		if err := g.SetMessages(msgs); err != nil {
			return nil, err
		}
	} else if err := setPrompt(g, wr.Prompt); err != nil {
		return nil, err
	}
	p, err := wr.params()
	if err != nil {
		return nil, err
	}
	if err := wr.logprobParams(chat, &p); err != nil {
		return nil, err
	}
	if err := wr.controlParams(&p); err != nil {
		return nil, err
	}
	if err := wr.echo(chat, p.Logprobs != nil && *p.Logprobs, g); err != nil {
		return nil, err
	}
	if err := g.SetParams(p); err != nil {
		return nil, err
	}
	if err := wr.reasoning(chat, g); err != nil {
		return nil, err
	}
	if err := g.SetResponseFormat(wr.ResponseFormat); err != nil {
		return nil, err
	}
	if err := g.SetStructuredOutputs(wr.StructuredOutputs); err != nil {
		return nil, err
	}
	if err := g.SetGBNF(wr.Grammar); err != nil {
		return nil, err
	}
	if err := g.SetJSONSchema(wr.JSONSchema); err != nil {
		return nil, err
	}
	if chat {
		if err := g.SetTools(wr.Tools, wr.ToolChoice, wr.ParallelToolCalls); err != nil {
			return nil, err
		}
	} else {
		for _, f := range []struct {
			name string
			set  bool
		}{{"tools", wr.Tools != nil}, {"tool_choice", wr.ToolChoice != nil}, {"parallel_tool_calls", wr.ParallelToolCalls != nil}} {
			if f.set {
				return nil, stream.InvalidParam(f.name, "%s: tools are only allowed in chat completions", f.name)
			}
		}
	}
	if err := setAllowSpecial(g, wr.AllowSpecialTokens); err != nil {
		return nil, err
	}
	if err := g.SetCacheSalt(wr.CacheSalt); err != nil {
		return nil, err
	}
	if wr.User != nil {
		g.User = *wr.User
	}
	g.Stream = wr.Stream != nil && *wr.Stream
	if wr.StreamOptions != nil {
		if !g.Stream {
			return nil, stream.InvalidParam("stream_options", "stream_options is only allowed when stream is true")
		}
		g.IncludeUsage = wr.StreamOptions.IncludeUsage != nil && *wr.StreamOptions.IncludeUsage
	}
	return g, nil
}

// decodeError turns a JSON error into a 400 naming the field (under prefix,
// for an element of a list) and the JSON kinds involved, never a Go type.
func decodeError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		param := te.Field
		if prefix != "" {
			param = strings.TrimSuffix(prefix+"."+te.Field, ".")
		}
		return stream.InvalidParam(param, "%s: expected %s, got JSON %s", param, httpedge.JSONKind(te.Type), te.Value)
	}
	return stream.InvalidParam(prefix, "request body is not valid JSON: %v", err)
}

// messages decodes the messages list one element at a time, so an error
// names its index (messages[2].role).
func messages(raw json.RawMessage) ([]stream.ChatMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, stream.InvalidParam("messages", "messages must be a non-empty list")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, stream.InvalidParam("messages", "messages: expected a list of messages")
	}
	msgs := make([]stream.ChatMessage, len(elems))
	for i, e := range elems {
		param := fmt.Sprintf("messages[%d]", i)
		var m wireMessage
		if err := json.Unmarshal(e, &m); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				return nil, stream.InvalidParam(param, "%s: expected a message object, got JSON %s", param, te.Value)
			}
			return nil, decodeError(param, err)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return nil, stream.InvalidParam(param+".content", "%s.content: %v", param, err)
		}
		calls, err := stream.ParseToolCalls(param+".tool_calls", m.ToolCalls)
		if err != nil {
			return nil, err
		}
		msgs[i] = stream.ChatMessage{Role: m.Role, Content: text, ToolCalls: calls, ToolCallID: m.ToolCallID}
		if r := cmp.Or(m.ReasoningContent, m.Reasoning); r != nil && m.Role == "assistant" {
			msgs[i].Reasoning = *r
		}
	}
	return msgs, nil
}

// messageText accepts a string, null, or a list of {"type":"text","text":...} parts.
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("expected a string or a list of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// setPrompt accepts a string, a list of token ids, or a list of either
// (strings or token-id lists: one set of choices per prompt).
func setPrompt(g *stream.GenRequest, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return stream.InvalidParam("prompt", "prompt is required")
	}
	const want = "prompt must be a string, a list of token ids, or a non-empty list of strings or of token-id lists"
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &g.Prompt); err != nil {
			return stream.InvalidParam("prompt", "prompt: %v", err)
		}
		return nil
	case '[':
		var ids []int32
		if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
			return g.SetPromptIDs(ids)
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return stream.InvalidParam("prompt", want)
		}
		batch := make([]stream.BatchPrompt, len(elems))
		for i, e := range elems {
			if json.Unmarshal(e, &batch[i].Text) == nil && len(e) > 0 && e[0] == '"' {
				continue
			}
			if json.Unmarshal(e, &batch[i].IDs) != nil || batch[i].IDs == nil {
				return stream.InvalidParam(fmt.Sprintf("prompt[%d]", i), "prompt[%d] must be a string or a list of token ids", i)
			}
		}
		return g.SetBatch(batch)
	}
	return stream.InvalidParam("prompt", want)
}

// params restates the body's generation fields for the stream core.
func (wr *wireRequest) params() (stream.Params, error) {
	p := stream.Params{
		MaxTokens: wr.MaxCompletionTokens, MaxTokensParam: "max_completion_tokens",
		Temperature: wr.Temperature, TopP: wr.TopP, TopK: wr.TopK, MinP: wr.MinP,
		PresencePenalty: wr.PresencePenalty, FrequencyPenalty: wr.FrequencyPenalty, RepetitionPenalty: wr.RepetitionPenalty,
		N: wr.N,
	}
	if p.MaxTokens == nil {
		p.MaxTokens, p.MaxTokensParam = wr.MaxTokens, "max_tokens"
	}
	if wr.Seed != nil {
		seed := uint64(*wr.Seed) // the bits, negative seeds included
		p.Seed = &seed
	}
	raw := bytes.TrimSpace(wr.Stop)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, stream.InvalidParam("stop", "stop: %v", err)
		}
		p.Stop = []string{s}
	default:
		if err := json.Unmarshal(raw, &p.Stop); err != nil {
			return p, stream.InvalidParam("stop", "stop must be a string or a list of strings")
		}
	}
	return p, nil
}

// setAllowSpecial reads allow_special_tokens. A completion prompt is the
// client's own text, always tokenized with its control tokens (as vLLM
// does): only true, the default, is served there.
func setAllowSpecial(g *stream.GenRequest, v *bool) error {
	if v == nil {
		return nil
	}
	if !g.Chat && !*v {
		return httpedge.Unsupported("allow_special_tokens", "allow_special_tokens false is only served for chat messages: a completion prompt is always tokenized with its control tokens")
	}
	g.AllowSpecialTokens = *v
	return nil
}
