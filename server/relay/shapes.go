package relay

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/server/stream"
)

// The paths the relay forwards. A request is sent to the upstream's same
// endpoint and its stream read in that API's shape: an upstream that lacks
// the endpoint (llama.cpp's server and vLLM have no /v1/messages) answers
// 404, which the client gets as a clear not-found error in its own API's
// shape, never a translation to chat completions that would lose the API's
// own fields.
const (
	PathChat        = "/v1/chat/completions"
	PathCompletions = "/v1/completions"
	PathMessages    = "/v1/messages"
	PathResponses   = "/v1/responses"
	// PathCountTokens is not a stream: Relay.Call forwards it.
	PathCountTokens = "/v1/messages/count_tokens"
)

// api is an upstream stream's wire shape.
type api int

const (
	apiOpenAI    api = iota // chat and completions chunks, ended by [DONE]
	apiMessages             // Anthropic's events, ended by message_stop
	apiResponses            // Responses events, ended by response.completed or .incomplete
	apiCall                 // one JSON answer, not a stream (Relay.Call)
)

func apiOf(path string) api {
	switch path {
	case PathMessages:
		return apiMessages
	case PathResponses:
		return apiResponses
	case PathCountTokens:
		return apiCall
	}
	return apiOpenAI
}

// end names the event that ends a proper stream of the API.
func (a api) end() string {
	switch a {
	case apiMessages:
		return "message_stop"
	case apiResponses:
		return "response.completed"
	}
	return "[DONE]"
}

// messagesEvent is what the relay reads of an Anthropic stream event.
type messagesEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *struct {
			InputTokens     int `json:"input_tokens"`
			CacheReadTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
		Data string `json:"data"` // redacted_thinking
	} `json:"content_block"`
	Delta *struct {
		Type         string          `json:"type"`
		Text         json.RawMessage `json:"text"`
		PartialJSON  json.RawMessage `json:"partial_json"`
		Thinking     json.RawMessage `json:"thinking"`
		Signature    string          `json:"signature"`
		StopReason   *string         `json:"stop_reason"`
		StopSequence *string         `json:"stop_sequence"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// messages reads one Anthropic event. Event types it does not know are
// proof of life and nothing more: Anthropic adds event types and asks
// clients to pass over those they do not know.
func (p *parser) messages(data []byte) (ev stream.TextEvent, send, done bool, err error) {
	var e messagesEvent
	if err := json.Unmarshal(data, &e); err != nil || e.Type == "" {
		return p.malformed("not an Anthropic stream event: %.120q", data)
	}
	s := p.s
	switch e.Type {
	case "message_start":
		if e.Message != nil && e.Message.Usage != nil {
			u := s.usageOf()
			// Anthropic's input_tokens leaves out the cache reads; the
			// prompt is their sum (OpenAI's prompt_tokens counts both).
			u.PromptTokens = e.Message.Usage.InputTokens + e.Message.Usage.CacheReadTokens
			u.cached(e.Message.Usage.CacheReadTokens)
		}
	case "content_block_start":
		// A tool_use block's start names its call; the call's index is the
		// block's. A text block's start carries no text of its own.
		if b := e.ContentBlock; b != nil && b.Type == "tool_use" {
			return p.tool(e.Index, b.ID, b.Name, nil, data)
		}
		// A thinking block opens the client's even before any text: with
		// display omitted it has none, only its signature.
		if b := e.ContentBlock; b != nil && b.Type == "thinking" {
			return p.reasoningEvent(stream.ReasoningText, ""), true, false, nil
		}
		// Redacted thinking comes whole in its start.
		if b := e.ContentBlock; b != nil && b.Type == "redacted_thinking" {
			return p.reasoningEvent(stream.ReasoningRedacted, b.Data), true, false, nil
		}
	case "content_block_delta":
		switch {
		case e.Delta != nil && e.Delta.Type == "text_delta":
			return p.text(e.Delta.Text, "")
		case e.Delta != nil && e.Delta.Type == "thinking_delta":
			return p.reasoningDelta(e.Delta.Thinking, data)
		case e.Delta != nil && e.Delta.Type == "signature_delta":
			return p.signature(e.Delta.Signature)
		case e.Delta != nil && e.Delta.Type == "input_json_delta":
			if _, ok := p.calls.calls[e.Index]; !ok {
				return p.malformed("an input_json_delta outside a tool_use block: %.120q", data)
			}
			return p.tool(e.Index, "", "", e.Delta.PartialJSON, data)
		}
		return p.malformed("a content_block_delta that is not a text_delta, thinking_delta, signature_delta or input_json_delta (the relay carries text, thinking and tool calls): %.120q", data)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != nil {
			ev.Finish = finishOfStopReason(*e.Delta.StopReason)
			if e.Delta.StopSequence != nil {
				s.stopSeq = *e.Delta.StopSequence
			}
		}
		if e.Usage != nil {
			s.usageOf().completion(e.Usage.OutputTokens)
		}
	case "message_stop":
		return ev, false, true, nil
	case "error":
		msg := string(data)
		if e.Error != nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return p.inBand(msg)
	}
	return ev, true, false, nil
}

// finishOfStopReason maps Anthropic's stop reasons onto the stream core's
// finish reasons; the Messages edge maps them back (a stop sequence is
// kept beside it, StopSequence).
func finishOfStopReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	}
	return r
}

// responsesEvent is what the relay reads of a Responses stream event.
type responsesEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Delta       json.RawMessage `json:"delta"`
	Item        *struct {
		Type             string `json:"type"`
		CallID           string `json:"call_id"`
		Name             string `json:"name"`
		EncryptedContent string `json:"encrypted_content"`
	} `json:"item"`
	Message  string `json:"message"` // the "error" event
	Response *struct {
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Usage *struct {
			InputTokens        int `json:"input_tokens"`
			OutputTokens       int `json:"output_tokens"`
			InputTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails *struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	} `json:"response"`
}

// responses reads one Responses event; the ones that carry neither text
// nor the ending (created, in_progress, the item and part events) are
// proof of life.
func (p *parser) responses(data []byte) (ev stream.TextEvent, send, done bool, err error) {
	var e responsesEvent
	if err := json.Unmarshal(data, &e); err != nil || e.Type == "" {
		return p.malformed("not a Responses stream event: %.120q", data)
	}
	switch e.Type {
	case "response.output_item.added":
		if it := e.Item; it != nil && it.Type == "function_call" {
			return p.tool(e.OutputIndex, it.CallID, it.Name, nil, data)
		}
		if it := e.Item; it != nil && it.Type == "message" {
			p.messageItems[e.OutputIndex] = true
		}
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		// An item's reasoning is one kind of delta: Sluice and open-weight
		// servers send reasoning_text (and its copy as the summary when
		// asked), OpenAI's models only the summary.
		kind, ok := p.reasoningKind[e.OutputIndex]
		if !ok {
			kind = e.Type
			p.reasoningKind[e.OutputIndex] = kind
		}
		if kind != e.Type {
			return ev, true, false, nil
		}
		return p.reasoningDelta(e.Delta, data)
	case "response.output_item.done":
		if it := e.Item; it != nil && it.Type == "reasoning" {
			return p.signature(it.EncryptedContent)
		}
	case "response.function_call_arguments.delta":
		if _, ok := p.calls.calls[e.OutputIndex]; !ok {
			return p.malformed("function_call_arguments.delta for no function_call item: %.120q", data)
		}
		return p.tool(e.OutputIndex, "", "", e.Delta, data)
	case "response.output_text.delta":
		// Text is a message item's: the first item, or one announced as a
		// message (after a call). Another item's is not the client's.
		if e.OutputIndex != 0 && !p.messageItems[e.OutputIndex] {
			return ev, true, false, nil
		}
		return p.text(e.Delta, "")
	case "response.completed", "response.incomplete":
		if r := e.Response; r != nil {
			if r.Usage != nil {
				u := p.s.usageOf()
				u.PromptTokens = r.Usage.InputTokens
				u.completion(r.Usage.OutputTokens)
				if d := r.Usage.InputTokensDetails; d != nil {
					u.cached(d.CachedTokens)
				}
				if d := r.Usage.OutputTokensDetails; d != nil {
					u.reasoning(d.ReasoningTokens)
				}
			}
			ev.Finish = "stop"
			if d := r.IncompleteDetails; d != nil {
				ev.Finish = d.Reason
				if d.Reason == "max_output_tokens" {
					ev.Finish = "length"
				}
			}
		}
		return ev, true, true, nil
	case "response.failed":
		msg := string(data)
		if r := e.Response; r != nil && r.Error != nil && r.Error.Message != "" {
			msg = r.Error.Message
		}
		return p.inBand(msg)
	case "error":
		msg := e.Message
		if msg == "" {
			msg = string(data)
		}
		return p.inBand(msg)
	}
	return ev, true, false, nil
}

// tool is a call's delta of any shape: its start (id and name) or an
// arguments fragment (raw, a JSON string).
func (p *parser) tool(i int, id, name string, raw json.RawMessage, data []byte) (ev stream.TextEvent, send, done bool, err error) {
	d, err := p.calls.delta(i, id, name, raw)
	if err != nil {
		return p.malformed("%v in %.120q", err, data)
	}
	ev.Seq, ev.Tools = p.seq, []stream.ToolCallDelta{d}
	p.timing(true)
	return ev, true, false, nil
}

// text is a text delta of any shape: raw JSON string, joined across chunks.
func (p *parser) text(raw json.RawMessage, finish string) (ev stream.TextEvent, send, done bool, err error) {
	b, ok := decodeString(raw)
	if !ok {
		return p.malformed("the text is not a string: %.120q", raw)
	}
	ev.Seq, ev.Finish = p.seq, finish
	ev.Text = p.joiner.Add(b)
	p.timing(ev.Text != "")
	return ev, true, false, nil
}

// inBand is an error the upstream reported inside its stream.
func (p *parser) inBand(msg string) (stream.TextEvent, bool, bool, error) {
	s := p.s
	s.m.errors.WithLabelValues(s.up.label, KindInBand).Inc()
	return stream.TextEvent{}, false, false, fmt.Errorf("%w: %s: %s", stream.ErrUpstreamFailed, s.up.label, bytes.TrimSpace([]byte(msg)))
}

// usageOf is the stream's usage, made on first use.
func (s *Stream) usageOf() *Usage {
	if s.usage == nil {
		s.usage = &Usage{}
	}
	return s.usage
}

func (u *Usage) completion(n int) {
	u.CompletionTokens = n
	u.TotalTokens = u.PromptTokens + n
}

func (u *Usage) cached(n int) {
	if n > 0 {
		u.Details = &struct {
			CachedTokens int `json:"cached_tokens"`
		}{n}
	}
}
