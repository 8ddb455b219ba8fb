package stream

import "github.com/sluicehq/sluice/engine"

// ToolEmitter is an Emitter that can also send tool-call deltas; a
// transport that serves tools implements it.
type ToolEmitter interface {
	Emitter
	ToolCall(d ToolCallDelta) error
}

// ToolStream sits between Pump and a transport's ToolEmitter for a request
// whose reply may call tools: it feeds the text Pump emits to a ToolParser
// and sends content and call deltas in output order. It lives as long as
// the stream (a resumed stream continues the same parse) while the emitter
// changes with each connection (Use).
type ToolStream struct {
	parser *ToolParser
	em     ToolEmitter
	ended  bool
	// parsed: the calls come parsed from upstream (a harmony reply's
	// ReasonStream) and the text is content as it stands.
	parsed bool
	calls  int // parsed calls sent
}

// callTaker is a ToolStream as the harmony split sees it: it takes the
// calls that split parsed, which then count for finish_reason as parsed
// ones do.
type callTaker interface {
	takeCalls()
	parsedCall(d ToolCallDelta) error
}

func (t *ToolStream) takeCalls() { t.parsed = true }

func (t *ToolStream) parsedCall(d ToolCallDelta) error {
	if d.ID != "" {
		t.calls++
	}
	return t.em.ToolCall(d)
}

// NewToolStream returns the ToolStream of g, or nil when g's reply is not
// parsed for calls (no tools, or tool_choice "none").
func NewToolStream(g *GenRequest) *ToolStream {
	if !g.Tools.Active() {
		return nil
	}
	return &ToolStream{parser: NewToolParser(g.Tools.Format, func() string { return NewID("call_") })}
}

// Use sends what follows to em and returns the Emitter Pump should write
// to; on a nil ToolStream it is em itself.
func (t *ToolStream) Use(em ToolEmitter) Emitter {
	if t == nil {
		return em
	}
	t.em = em
	return t
}

// Text implements Emitter. The ids go with the first content event, or
// alone when the text held only calls or held-back text, so none is lost.
func (t *ToolStream) Text(text string, ids []int32) error {
	if t.parsed {
		return t.em.Text(text, ids)
	}
	return t.send(t.parser.Feed(text), ids)
}

func (t *ToolStream) send(evs []ToolEvent, ids []int32) error {
	var err error
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	for _, e := range evs {
		if c := e.Call; c != nil {
			// The name goes out alone, at once; arguments follow in their
			// own deltas, even when the parser had both in hand.
			if c.ID != "" && c.Arguments != "" {
				keep(t.em.ToolCall(ToolCallDelta{Index: c.Index, ID: c.ID, Name: c.Name}))
				keep(t.em.ToolCall(ToolCallDelta{Index: c.Index, Arguments: c.Arguments}))
			} else {
				keep(t.em.ToolCall(*c))
			}
			continue
		}
		keep(t.em.Text(e.Content, ids))
		ids = nil
	}
	if len(ids) > 0 {
		keep(t.em.Text("", ids))
	}
	return err
}

// Logprobs implements LogprobEmitter when the transport's emitter does:
// the logprobs go with the ids of the Text that follows, wherever the
// parse sends those ids.
func (t *ToolStream) Logprobs(lps []engine.Logprob) {
	if le, ok := t.em.(LogprobEmitter); ok {
		le.Logprobs(lps)
	}
}

func (t *ToolStream) KeepAlive() error { return t.em.KeepAlive() }
func (t *ToolStream) Flush() error     { return t.em.Flush() }

// End sends what the parser still held once the generation finished, and
// turns a normal end into finish_reason "tool_calls" when the reply called
// a tool. Output that did not end with "stop" (the token limit, an error)
// was cut, perhaps inside a call or its opener, and is finished as such
// (ToolParser.FinishCut), so no fragment of a call reaches the text. It
// does nothing to a stream cut short (it may resume) and nothing the second
// time. On a nil ToolStream it returns out unchanged.
func (t *ToolStream) End(out Outcome) Outcome {
	if t == nil || out.CutShort || t.ended {
		return out
	}
	t.ended = true
	if t.parsed {
		if out.Finish == "stop" && t.calls > 0 {
			out.Finish = "tool_calls"
		}
		return out
	}
	finish := t.parser.FinishCut
	if out.Finish == "stop" {
		finish = t.parser.Finish
	}
	if err := t.send(finish(), nil); err != nil && !out.ClientGone {
		out.ClientGone = true
	}
	if out.Finish == "stop" && t.parser.Calls() > 0 {
		out.Finish = "tool_calls"
	}
	return out
}
