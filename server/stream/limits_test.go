package stream_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// TestRequestLimits: Prepare, which every transport calls, refuses a
// request over each limit with a 400 naming the field, before the template
// or the tokenizer sees it, and accepts one exactly at the limit.
func TestRequestLimits(t *testing.T) {
	b := &stream.Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: streamtest.NewPieceVocab(), ContextLen: stream.MaxPromptBytes + 2}
	msgs := func(n int) []stream.ChatMessage {
		out := make([]stream.ChatMessage, n)
		for i := range out {
			out[i] = stream.ChatMessage{Role: "user", Content: "x"}
		}
		return out
	}
	tools := func(n int) stream.Tools {
		var t stream.Tools
		for i := range n {
			t.List = append(t.List, stream.Tool{Name: fmt.Sprintf("f%d", i), Parameters: json.RawMessage(`{"type":"object"}`)})
		}
		t.Choice = stream.ToolChoiceNone // nothing to render or constrain: only the count matters here
		return t
	}
	stops := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat(string(rune('a'+i%26)), size)
		}
		return out
	}
	big := strings.Repeat("y", stream.MaxPromptBytes)
	for _, tc := range []struct {
		name  string
		g     stream.GenRequest
		param string // "" = accepted
	}{
		{"messages at the limit", stream.GenRequest{Chat: true, Messages: msgs(stream.MaxMessages)}, ""},
		{"messages over", stream.GenRequest{Chat: true, Messages: msgs(stream.MaxMessages + 1)}, "messages"},
		{"tools at the limit", stream.GenRequest{Chat: true, Messages: msgs(1), Tools: tools(stream.MaxTools)}, ""},
		{"tools over", stream.GenRequest{Chat: true, Messages: msgs(1), Tools: tools(stream.MaxTools + 1)}, "tools"},
		{"stops at the limit", stream.GenRequest{Prompt: "p", Stop: stops(stream.MaxStops, stream.MaxStopLength)}, ""},
		{"stops over", stream.GenRequest{Prompt: "p", Stop: stops(stream.MaxStops+1, 1)}, "stop"},
		{"a stop too long", stream.GenRequest{Prompt: "p", Stop: stops(1, stream.MaxStopLength+1)}, "stop"},
		{"an empty stop", stream.GenRequest{Prompt: "p", Stop: []string{""}}, "stop"},
		{"prompt bytes at the limit", stream.GenRequest{Prompt: big}, ""},
		{"prompt bytes over", stream.GenRequest{Prompt: big + "y"}, "prompt"},
		{"message bytes over", stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{
			{Role: "user", Content: big[:stream.MaxPromptBytes/2]}, {Role: "assistant", Content: big[:stream.MaxPromptBytes/2]},
			{Role: "user", Content: "z"}}}, "messages"},
		{"tool call arguments count", stream.GenRequest{Chat: true, Messages: []stream.ChatMessage{
			{Role: "assistant", ToolCalls: []stream.ToolCall{{ID: "c", Name: "f", Arguments: big}}}}}, "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stream.Prepare(b, &tc.g)
			if tc.param == "" {
				// PieceVocab's template renders no tools: past the limits,
				// that refusal is the next one a request can meet.
				if err != nil && overLimit(err) {
					t.Fatalf("refused at the limit: %v", err)
				}
				return
			}
			c := stream.Classify(err)
			if c.HTTP != 400 || c.Param != tc.param || c.GRPC.String() != "InvalidArgument" {
				t.Fatalf("%v → %+v, want 400 naming %s", err, c, tc.param)
			}
			if !overLimit(err) {
				t.Errorf("the message does not say the limit: %v", err)
			}
		})
	}
}

func overLimit(err error) bool {
	return strings.Contains(err.Error(), "at most") || strings.Contains(err.Error(), "must be 1 to")
}
