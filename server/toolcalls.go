package server

import (
	"strconv"

	"github.com/sluicehq/sluice/server/stream"
)

// toolCall appends a chunk carrying one tool-call delta: the first of a
// call names it (index, id, type, function.name, empty arguments), later
// ones carry argument fragments only.
//
//	{…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_…","type":"function","function":{"name":"f","arguments":""}}]},…}]}
func (f *chunkFormat) toolCall(dst []byte, d stream.ToolCallDelta) []byte {
	dst = append(dst, f.head...)
	dst = append(dst, `"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(d.Index), 10)
	if d.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = appendJSONString(dst, d.ID)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = appendJSONString(dst, d.Name)
		dst = append(dst, `,"arguments":`...)
	} else {
		dst = append(dst, `,"function":{"arguments":`...)
	}
	dst = appendJSONString(dst, d.Arguments)
	return append(dst, `}}]},"logprobs":null,"finish_reason":null}]}`...)
}

// ToolCall implements stream.ToolEmitter: one tool-call chunk, logged like
// every event so a resumed stream replays it exactly.
func (s *sseWriter) ToolCall(d stream.ToolCallDelta) error {
	s.payload = s.format.toolCall(s.payload[:0], d)
	s.event(s.payload)
	return s.Err()
}

// toolCallJSON is a tool call in a non-streaming response.
type toolCallJSON = stream.WireToolCall

// ToolCall implements stream.ToolEmitter for a non-streaming response.
func (c *collector) ToolCall(d stream.ToolCallDelta) error {
	if d.ID != "" {
		var tc toolCallJSON
		tc.ID, tc.Type, tc.Function.Name = d.ID, "function", d.Name
		c.calls = append(c.calls, tc)
	}
	if n := len(c.calls); n > 0 {
		c.calls[n-1].Function.Arguments += d.Arguments
	}
	return nil
}

// withToolCalls puts the collected calls into a chat response's message.
func (c *collector) withToolCalls(r *completionResponse) *completionResponse {
	if len(c.calls) > 0 && len(r.Choices) == 1 && r.Choices[0].Message != nil {
		r.Choices[0].Message.ToolCalls = c.calls
	}
	return r
}
