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
	Index int `json:"index"`
	Delta *struct {
		Type         string          `json:"type"`
		Text         json.RawMessage `json:"text"`
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
			u.PromptTokens = e.Message.Usage.InputTokens
			u.cached(e.Message.Usage.CacheReadTokens)
		}
	case "content_block_delta":
		if e.Delta == nil || e.Delta.Type != "text_delta" {
			return p.malformed("a content_block_delta that is not a text_delta (the relay carries text): %.120q", data)
		}
		return p.text(e.Delta.Text, "")
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
	}
	return r
}

// responsesEvent is what the relay reads of a Responses stream event.
type responsesEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Delta       json.RawMessage `json:"delta"`
	Message     string          `json:"message"` // the "error" event
	Response    *struct {
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
	case "response.output_text.delta":
		if e.OutputIndex != 0 {
			return ev, true, false, nil // the relay carries one output item; another is not the client's
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

// text is a text delta of any shape: raw JSON string, joined across chunks.
func (p *parser) text(raw json.RawMessage, finish string) (ev stream.TextEvent, send, done bool, err error) {
	b, ok := decodeString(raw)
	if !ok {
		return p.malformed("the text is not a string: %.120q", raw)
	}
	ev.Seq, ev.Finish = p.seq, finish
	ev.Text = p.joiner.Add(b)
	p.timing(ev.Text)
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
