package stream_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	. "github.com/sluicehq/sluice/server/stream"
)

// listSource sends its events at once and ends properly.
type listSource struct {
	events chan TextEvent
	closed bool
}

func newListSource(evs ...TextEvent) *listSource {
	s := &listSource{events: make(chan TextEvent, len(evs))}
	for _, ev := range evs {
		s.events <- ev
	}
	close(s.events)
	return s
}

func (s *listSource) Events() <-chan TextEvent { return s.events }
func (s *listSource) Err() error               { return nil }
func (s *listSource) Close()                   { s.closed = true }

// orderEmitter records text and calls in the order written.
type orderEmitter struct{ log []string }

func (e *orderEmitter) Text(s string, _ []int32) error {
	if s != "" {
		e.log = append(e.log, "text "+s)
	}
	return nil
}
func (e *orderEmitter) KeepAlive() error { return nil }
func (e *orderEmitter) Flush() error     { return nil }
func (e *orderEmitter) ToolCall(d ToolCallDelta) error {
	e.log = append(e.log, fmt.Sprintf("call %d %s %s %s", d.Index, d.ID, d.Name, d.Arguments))
	return nil
}

type textOnly struct{ orderEmitter }

func (e *textOnly) ToolCall() {} // not stream.ToolEmitter's method

// TestPumpTextTools: a relayed chunk's tool-call deltas go to the
// ToolEmitter after the text before them, which is released from the stop
// hold-back first (a stop cannot span a call); the stop string is not
// looked for in the arguments; the upstream's finish passes through. An
// emitter that cannot carry calls fails the stream as upstream_malformed
// and closes the source instead of dropping them.
func TestPumpTextTools(t *testing.T) {
	evs := []TextEvent{
		{Text: "Let me check EN"},
		{Tools: []ToolCallDelta{{Index: 0, ID: "call_1", Name: "f"}, {Index: 0, Arguments: `{"q":"`}}},
		{Tools: []ToolCallDelta{{Index: 0, Arguments: `END"}`}}},
		{Text: "D", Finish: "tool_calls"},
	}
	var em orderEmitter
	src := newListSource(evs...)
	out := PumpText(t.Context(), src, NewTextOnlyStream([]string{"END"}), &em, PumpConfig{}, nil)
	want := []string{"text Let me check EN", "call 0 call_1 f ", `call 0   {"q":"`, `call 0   END"}`, "text D"}
	if !slices.Equal(em.log, want) || out.Finish != "tool_calls" || out.Err != nil {
		t.Errorf("wrote %q, outcome %+v; want %q, finish tool_calls", em.log, out, want)
	}

	var plain textOnly
	src = newListSource(evs...)
	out = PumpText(t.Context(), src, NewTextOnlyStream(nil), &plain, PumpConfig{}, nil)
	if !errors.Is(out.Err, ErrUpstreamMalformed) || !src.closed || out.Finish != "" {
		t.Errorf("an emitter without calls: outcome %+v, source closed %v; want upstream_malformed and the source closed", out, src.closed)
	}
}

// reasonEmitter records reasoning, seals and redacted blocks beside text
// and calls.
type reasonEmitter struct{ orderEmitter }

func (e *reasonEmitter) Reasoning(s string) error {
	e.log = append(e.log, "think "+s)
	return nil
}
func (e *reasonEmitter) Signed(s string) error {
	e.log = append(e.log, "seal "+s)
	return nil
}
func (e *reasonEmitter) Redacted(s string) error {
	e.log = append(e.log, "redacted "+s)
	return nil
}

// unsealed carries reasoning text but no seal (chat's edges before one).
type unsealed struct{ orderEmitter }

func (e *unsealed) Reasoning(s string) error {
	e.log = append(e.log, "think "+s)
	return nil
}

// TestPumpTextReasoning: an event's reasoning goes out before its text and
// after the text before it, released from the stop hold-back (a stop
// cannot span a thought); the stop string is not looked for in reasoning;
// each kind reaches its own emitter method. An emitter that cannot carry a
// kind fails the stream as upstream_malformed and closes the source rather
// than drop it.
func TestPumpTextReasoning(t *testing.T) {
	evs := []TextEvent{
		{Reasoning: []ReasoningDelta{{Kind: ReasoningText}}},
		{Text: "So EN"},
		{Reasoning: []ReasoningDelta{{Kind: ReasoningText, Text: "about END"}, {Kind: ReasoningSeal, Text: "sig1"}}, Text: "D."},
		{Reasoning: []ReasoningDelta{{Kind: ReasoningRedacted, Text: "opaque"}}, Finish: "stop"},
	}
	var em reasonEmitter
	src := newListSource(evs...)
	out := PumpText(t.Context(), src, NewTextOnlyStream([]string{"END"}), &em, PumpConfig{}, nil)
	want := []string{"think ", "text So EN", "think about END", "seal sig1", "text D.", "redacted opaque"}
	if !slices.Equal(em.log, want) || out.Finish != "stop" || out.Err != nil {
		t.Errorf("wrote %q, outcome %+v; want %q, finish stop", em.log, out, want)
	}

	for _, c := range []struct {
		name string
		em   Emitter
	}{
		{"no reasoning", &orderEmitter{}},
		{"no seal", &unsealed{}},
	} {
		src = newListSource(evs...)
		out = PumpText(t.Context(), src, NewTextOnlyStream(nil), c.em, PumpConfig{}, nil)
		if !errors.Is(out.Err, ErrUpstreamMalformed) || !src.closed || out.Finish != "" {
			t.Errorf("%s: outcome %+v, source closed %v; want upstream_malformed and the source closed", c.name, out, src.closed)
		}
	}
}
