package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// ChatMessage is one turn of a chat, its content flattened to text.
type ChatMessage struct {
	Role    string
	Content string
}

// GenRequest is a validated /v1/chat/completions or /v1/completions request,
// before tokenization. It is framing-independent: the gRPC endpoint builds
// the same value from its messages.
type GenRequest struct {
	Model     string
	Chat      bool
	Messages  []ChatMessage // Chat
	Prompt    string        // !Chat, text prompt
	PromptIDs []int32       // !Chat, token-id prompt (used instead of Prompt when set)
	// MaxTokens bounds the output; 0 means up to the context length.
	MaxTokens    int
	Sampling     engine.SamplingParams
	Stop         []string
	Stream       bool
	IncludeUsage bool
	User         string
}

// maxStops bounds the stop list; the hold-back window is the longest stop.
const (
	maxStops      = 16
	maxStopLength = 256
)

// wireRequest is the JSON body of both endpoints. Unknown fields are ignored
// as OpenAI does; pointer fields distinguish "absent or null" from zero.
type wireRequest struct {
	Model               string            `json:"model"`
	Messages            []wireMessage     `json:"messages"`
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
}

type wireStreamOption struct {
	IncludeUsage *bool `json:"include_usage"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// readBody reads at most limit bytes; a larger body is ErrBodyTooLarge.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	if err != nil {
		return nil, invalidParam("", "reading request body: %v", err)
	}
	return body, nil
}

// ParseRequest decodes and validates a request body. chat selects the
// /v1/chat/completions schema (messages) over /v1/completions (prompt).
func ParseRequest(body []byte, chat bool) (*GenRequest, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, decodeError(err)
	}
	g := &GenRequest{Model: wr.Model, Chat: chat}
	if chat {
		if err := g.setMessages(wr.Messages); err != nil {
			return nil, err
		}
	} else if err := g.setPrompt(wr.Prompt); err != nil {
		return nil, err
	}
	steps := []func(*wireRequest) error{g.setLimits, g.setSampling, g.setStop, g.setStream}
	for _, step := range steps {
		if err := step(&wr); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// decodeError turns a JSON error into a 400 naming the field when it can.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return invalidParam(te.Field, "%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return invalidParam("", "request body is not valid JSON: %v", err)
}

func (g *GenRequest) setMessages(msgs []wireMessage) error {
	if len(msgs) == 0 {
		return invalidParam("messages", "messages must be a non-empty list")
	}
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return invalidParam(param+".role", "%s.role %q is not one of system, developer, user, assistant, tool", param, m.Role)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return invalidParam(param+".content", "%s.content: %v", param, err)
		}
		role := m.Role
		if role == "developer" { // OpenAI's newer name for system; templates know only "system"
			role = "system"
		}
		g.Messages = append(g.Messages, ChatMessage{Role: role, Content: text})
	}
	return nil
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

// setPrompt accepts a string, a one-element list of strings, or a list of token ids.
func (g *GenRequest) setPrompt(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return invalidParam("prompt", "prompt is required")
	}
	switch raw[0] {
	case '"':
		return json.Unmarshal(raw, &g.Prompt)
	case '[':
		var ss []string
		if json.Unmarshal(raw, &ss) == nil {
			if len(ss) != 1 {
				return invalidParam("prompt", "prompt lists must hold exactly one prompt, got %d", len(ss))
			}
			g.Prompt = ss[0]
			return nil
		}
		var ids []int32
		if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
			g.PromptIDs = ids
			return nil
		}
	}
	return invalidParam("prompt", "prompt must be a string, a list of one string, or a non-empty list of token ids")
}

func (g *GenRequest) setLimits(wr *wireRequest) error {
	limit := wr.MaxCompletionTokens
	param := "max_completion_tokens"
	if limit == nil {
		limit, param = wr.MaxTokens, "max_tokens"
	}
	if limit != nil {
		if *limit < 1 {
			return invalidParam(param, "%s must be at least 1, got %d", param, *limit)
		}
		g.MaxTokens = *limit
	}
	if wr.N != nil && *wr.N != 1 {
		return invalidParam("n", "n must be 1 (one choice per request), got %d", *wr.N)
	}
	if wr.User != nil {
		g.User = *wr.User
	}
	return nil
}

// inRange checks an optional float field against [lo, hi].
func inRange(param string, v *float64, lo, hi float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < lo || *v > hi {
		return invalidParam(param, "%s must be between %g and %g, got %g", param, lo, hi, *v)
	}
	return nil
}

func (g *GenRequest) setSampling(wr *wireRequest) error {
	for _, c := range []struct {
		param  string
		v      *float64
		lo, hi float64
		dst    *float32
	}{
		{"temperature", wr.Temperature, 0, 2, &g.Sampling.Temperature},
		{"top_p", wr.TopP, 0, 1, &g.Sampling.TopP},
		{"min_p", wr.MinP, 0, 1, &g.Sampling.MinP},
		{"presence_penalty", wr.PresencePenalty, -2, 2, &g.Sampling.PresencePenalty},
		{"frequency_penalty", wr.FrequencyPenalty, -2, 2, &g.Sampling.FrequencyPenalty},
		{"repetition_penalty", wr.RepetitionPenalty, 0, 10, &g.Sampling.RepetitionPenalty},
	} {
		if err := inRange(c.param, c.v, c.lo, c.hi); err != nil {
			return err
		}
		if c.v != nil {
			*c.dst = float32(*c.v)
		}
	}
	if wr.TopP != nil && *wr.TopP == 0 {
		return invalidParam("top_p", "top_p must be above 0, got 0")
	}
	if wr.RepetitionPenalty != nil && *wr.RepetitionPenalty == 0 {
		return invalidParam("repetition_penalty", "repetition_penalty must be above 0, got 0")
	}
	if wr.TopK != nil {
		switch k := *wr.TopK; {
		case k == -1: // vLLM's spelling of "off"
		case k < 0:
			return invalidParam("top_k", "top_k must be -1, 0 (off) or positive, got %d", k)
		default:
			g.Sampling.TopK = k
		}
	}
	if wr.Seed != nil {
		seed := uint64(*wr.Seed)
		g.Sampling.Seed = &seed
	}
	return nil
}

// setStop accepts a string or a list of strings.
func (g *GenRequest) setStop(wr *wireRequest) error {
	raw := bytes.TrimSpace(wr.Stop)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var stops []string
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return invalidParam("stop", "stop: %v", err)
		}
		stops = []string{s}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return invalidParam("stop", "stop must be a string or a list of strings")
	}
	if len(stops) > maxStops {
		return invalidParam("stop", "at most %d stop strings, got %d", maxStops, len(stops))
	}
	for i, s := range stops {
		if s == "" || len(s) > maxStopLength {
			return invalidParam("stop", "stop[%d] must be 1 to %d bytes long, got %d", i, maxStopLength, len(s))
		}
	}
	g.Stop = stops
	return nil
}

func (g *GenRequest) setStream(wr *wireRequest) error {
	g.Stream = wr.Stream != nil && *wr.Stream
	if wr.StreamOptions != nil {
		if !g.Stream {
			return invalidParam("stream_options", "stream_options is only allowed when stream is true")
		}
		g.IncludeUsage = wr.StreamOptions.IncludeUsage != nil && *wr.StreamOptions.IncludeUsage
	}
	return nil
}
