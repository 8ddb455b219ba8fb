package stream

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Reasoning output, split from the answer once here for every API: a
// model's reasoning markup (ReasoningMarkup, the Backend's) is parsed out
// of the text Pump emits, the reasoning goes to the framer's
// ReasoningEmitter and the rest on as content (to the ToolStream, then the
// framer). Markup that may still be forming is held back, as stop strings
// are, so no part of a marker reaches either side; the split depends only
// on the text, never on how tokens or flushes cut it, so a streamed reply
// and a whole one split alike.

// ReasoningMarkup is how a model marks its reasoning in what it generates:
// the text opening and closing it, before the answer. The zero value is a
// model that does not reason.
type ReasoningMarkup struct {
	Open, Close string
	// Skip is what the chat template writes after the generation prompt
	// when thinking is off: an empty reasoning block, so the model answers
	// at once.
	Skip string
	// Harmony: the reply is harmony messages (gpt-oss; harmony.go), which
	// carry tool calls too. Open and Close are then its analysis message's
	// header and end, which the reasoning budget and the token count read.
	Harmony bool
}

// On reports whether the model has reasoning markup.
func (m ReasoningMarkup) On() bool { return m.Open != "" }

// ReasoningFormats are the formats --reasoning-format names (the models
// package's ReasoningFormat values), "none" turning the split off.
var ReasoningFormats = []string{"none", "think-tags", "gemma4-channel", "harmony"}

// ReasoningMarkupFor is the markup of a named format ("" and "none": none).
func ReasoningMarkupFor(format string) (ReasoningMarkup, error) {
	switch format {
	case "", "none":
		return ReasoningMarkup{}, nil
	case "think-tags": // Qwen3, SmolLM3, DeepSeek-R1 style
		return ReasoningMarkup{Open: "<think>", Close: "</think>", Skip: "<think>\n\n</think>\n\n"}, nil
	case "gemma4-channel":
		return ReasoningMarkup{Open: "<|channel>thought\n", Close: "<channel|>", Skip: "<|channel>thought\n<channel|>"}, nil
	case "harmony": // gpt-oss: no empty block turns its reasoning off (reasoningPrompt)
		return ReasoningMarkup{Open: hChannel + "analysis" + hMessage, Close: hEnd, Harmony: true}, nil
	}
	return ReasoningMarkup{}, fmt.Errorf("unknown reasoning format %q (one of %s)", format, strings.Join(ReasoningFormats, ", "))
}

// ReasoningEmitter is an Emitter that frames reasoning text beside the
// reply (found by type assertion, as LogprobEmitter is). Reasoning comes
// before any content.
type ReasoningEmitter interface {
	Reasoning(text string) error
}

// Split states.
const (
	splitBefore = iota // nothing decided: the reply may open with reasoning
	splitInside        // in the reasoning
	splitLead          // just past the reasoning: leading newlines are dropped
	splitAfter         // the answer
)

// ReasonStream sits between Pump and the next Emitter (a ToolStream or the
// framer) for a model with reasoning markup. It lives as long as the
// stream; Use points it at each connection's framer.
type ReasonStream struct {
	mk    ReasoningMarkup
	state int
	held  string
	next  Emitter
	re    ReasoningEmitter // the framer's; nil: reasoning is dropped
	// tokens counts the reasoning's tokens exactly: a second decoder reads
	// the ids until the closing marker is complete.
	dec             Detokenizer
	closeIDs        []int32 // the closing marker's tokens: seen, the reasoning ends there
	tail            []int32 // the last ids, to spot them
	seen            string  // the decoded text not yet ruled out as the closing marker
	tokens          int
	inside, counted bool
	text            strings.Builder // the whole reasoning, for the sealed copies
	// harmony splits a harmony reply (nil for other markup); its calls go
	// to calls, the ToolStream, when the request offers tools.
	harmony *HarmonyParser
	calls   callTaker
}

// NewReasonStream returns the split for g's reply on b, or nil when the
// model has no reasoning markup. opened: the prompt already opened the
// reasoning (templates that write the opening marker themselves).
func NewReasonStream(b *Backend, g *GenRequest, prompt []int32) *ReasonStream {
	if !b.Reasoning.On() || !g.Chat {
		return nil
	}
	if b.Reasoning.Harmony && (g.Tools.Forced() || g.Output.Grammar != nil) {
		// A grammar holds the whole reply (a forced call in the template's
		// call syntax, a response format): there are no harmony messages
		// to split, and the ToolStream parses the call as for any model.
		return nil
	}
	r := &ReasonStream{mk: b.Reasoning, dec: NewDetokenizerFor(b.Tokenizer, prompt)}
	// The decoder may hold text back a few tokens (until later ones settle
	// its merge), so the closing marker's own tokens end the count where
	// they are, and its text only when spelled some other way.
	r.closeIDs, _ = b.Tokenizer.Encode(b.Reasoning.Close, false)
	if g.reasoningOpened {
		r.state, r.inside = splitInside, true
	}
	if b.Reasoning.Harmony {
		r.harmony = NewHarmonyParser(false, func() string { return NewID("call_") })
		if g.reasoningOpened {
			r.harmony.st, r.harmony.route = hsBody, HarmonyReasoning
		}
	}
	return r
}

// Use sends what follows to next (the ToolStream's or the framer's
// Emitter) and reasoning to framer, when it frames reasoning; it returns
// the Emitter Pump should write to. On a nil ReasonStream it is next.
func (r *ReasonStream) Use(next Emitter, framer any) Emitter {
	if r == nil {
		return next
	}
	r.next = next
	r.re, _ = framer.(ReasoningEmitter)
	if r.harmony != nil {
		// A ToolStream is there when the request offers tools: it takes
		// the calls parsed here instead of parsing the content itself.
		// Without one, a message to a function is content.
		r.calls, _ = next.(callTaker)
		if r.calls != nil {
			r.calls.takeCalls()
		}
		r.harmony.calls = r.calls != nil
	}
	return r
}

// Tokens is how many tokens the reasoning took, its markers (and any
// whitespace before the opening one, which no side shows) included.
func (r *ReasonStream) Tokens() int {
	if r == nil {
		return 0
	}
	return r.tokens
}

// Reasoned is the reasoning so far.
func (r *ReasonStream) Reasoned() string {
	if r == nil {
		return ""
	}
	return r.text.String()
}

// Text implements Emitter.
func (r *ReasonStream) Text(text string, ids []int32) error {
	r.count(ids)
	if r.harmony != nil {
		return r.sendHarmony(r.harmony.Feed(text), ids)
	}
	reasoning, content := r.split(text, false)
	return r.send(reasoning, content, ids)
}

// count adds the ids of the reasoning to the token count, reading them
// with its own decoder until the closing marker is complete.
func (r *ReasonStream) count(ids []int32) {
	for _, id := range ids {
		if r.counted {
			return
		}
		r.seen += r.dec.Add(id)
		r.tokens++
		if len(r.closeIDs) > 0 {
			r.tail = append(r.tail, id)
			if len(r.tail) > len(r.closeIDs) {
				r.tail = r.tail[1:]
			}
		}
		if !r.inside {
			t := strings.TrimLeft(r.seen, " \t\r\n")
			switch {
			case strings.HasPrefix(t, r.mk.Open):
				r.inside, r.seen = true, t[len(r.mk.Open):]
			case !strings.HasPrefix(r.mk.Open, t):
				r.tokens, r.counted = 0, true // the reply did not open with reasoning
				continue
			default:
				continue
			}
		}
		if strings.Contains(r.seen, r.mk.Close) || (len(r.closeIDs) > 0 && slices.Equal(r.tail, r.closeIDs)) {
			r.counted = true
		}
		r.seen = r.seen[len(r.seen)-suffixPrefix(r.seen, r.mk.Close):]
	}
}

func (r *ReasonStream) send(reasoning, content string, ids []int32) error {
	var err error
	if reasoning != "" {
		r.text.WriteString(reasoning)
		if r.re != nil {
			err = r.re.Reasoning(reasoning)
		}
	}
	if content != "" || len(ids) > 0 {
		if e := r.next.Text(content, ids); err == nil {
			err = e
		}
	}
	return err
}

// sendHarmony sends a harmony split's events in order; the ids go with
// the first content, or alone after them all, so none is lost.
func (r *ReasonStream) sendHarmony(evs []HarmonyEvent, ids []int32) error {
	var err error
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	for _, e := range evs {
		switch e.Kind {
		case HarmonyReasoning:
			r.text.WriteString(e.Text)
			if r.re != nil {
				keep(r.re.Reasoning(e.Text))
			}
		case HarmonyContent:
			keep(r.next.Text(e.Text, ids))
			ids = nil
		case HarmonyCall:
			keep(r.calls.parsedCall(*e.Call)) // only with calls on (Use)
		}
	}
	if len(ids) > 0 {
		keep(r.next.Text("", ids))
	}
	return err
}

// split advances the state over fresh text; at the end (final) nothing is
// held back.
func (r *ReasonStream) split(fresh string, final bool) (reasoning, content string) {
	buf := r.held + fresh
	r.held = ""
	for buf != "" {
		switch r.state {
		case splitBefore:
			t := strings.TrimLeft(buf, " \t\r\n")
			switch {
			case strings.HasPrefix(t, r.mk.Open):
				r.state = splitInside
				buf = t[len(r.mk.Open):]
			case strings.HasPrefix(r.mk.Open, t) && !final:
				r.held = buf
				return
			default:
				r.state = splitAfter
			}
		case splitInside:
			if i := strings.Index(buf, r.mk.Close); i >= 0 {
				reasoning += buf[:i]
				r.state = splitLead
				buf = buf[i+len(r.mk.Close):]
				continue
			}
			keep := len(buf)
			if !final {
				keep -= suffixPrefix(buf, r.mk.Close)
			}
			reasoning += buf[:keep]
			r.held = buf[keep:]
			return
		case splitLead:
			buf = strings.TrimLeft(buf, "\r\n")
			if buf != "" {
				r.state = splitAfter
			}
		case splitAfter:
			content += buf
			return
		}
	}
	return
}

// suffixPrefix is the length of the longest suffix of s that is a proper
// prefix of marker.
func suffixPrefix(s, marker string) int {
	for n := min(len(marker)-1, len(s)); n > 0; n-- {
		if s[len(s)-n:] == marker[:n] {
			return n
		}
	}
	return 0
}

// Logprobs implements LogprobEmitter when the next emitter does: the ids
// of every Text go on to it, reasoning's included.
func (r *ReasonStream) Logprobs(lps []engine.Logprob) {
	if le, ok := r.next.(LogprobEmitter); ok {
		le.Logprobs(lps)
	}
}

func (r *ReasonStream) KeepAlive() error { return r.next.KeepAlive() }
func (r *ReasonStream) Flush() error     { return r.next.Flush() }

// End sends what was held back once the generation finished (a reply cut
// inside its reasoning keeps what it reasoned) and reports the reasoning's
// tokens. It does nothing to a stream cut short (it may resume). On a nil
// ReasonStream it returns out unchanged.
func (r *ReasonStream) End(out Outcome) Outcome {
	if r == nil {
		return out
	}
	out.ReasoningTokens = r.tokens
	if !r.inside { // no opening marker (yet): no reasoning
		out.ReasoningTokens = 0
	}
	if out.CutShort {
		return out
	}
	if r.harmony != nil {
		if err := r.sendHarmony(r.harmony.Finish(out.Finish != "stop"), nil); err != nil && !out.ClientGone {
			out.ClientGone = true
		}
		return out
	}
	reasoning, content := r.split("", true)
	if err := r.send(reasoning, content, nil); err != nil && !out.ClientGone {
		out.ClientGone = true
	}
	return out
}
