package stream

import (
	"encoding/json"
	"strings"
)

// ToolFormat is how a model family writes tool calls in its output.
type ToolFormat int

const (
	// ToolsHermes: <tool_call>{"name": …, "arguments": {…}}</tool_call>, one
	// block per call (Hermes, Qwen2.5/3, SmolLM3, and Sluice's fallback
	// system prompt for templates that ignore tools).
	ToolsHermes ToolFormat = iota
	// ToolsLlama3: Llama 3.1+ JSON, {"name": …, "parameters": {…}} as the
	// reply (after <|python_tag|> or at its very start), calls separated by ";".
	ToolsLlama3
	// ToolsMistral: [TOOL_CALLS][{"name": …, "arguments": {…}}, …].
	ToolsMistral
)

// ToolCallDelta is one piece of a streamed tool call, in OpenAI's shape: the
// first delta of a call carries Index, ID and Name (as soon as the name is
// known); later ones carry argument fragments whose concatenation is the
// exact JSON text of the call's arguments.
type ToolCallDelta struct {
	Index     int
	ID        string // first delta of a call only
	Name      string // first delta of a call only
	Arguments string
}

// ToolEvent is content text or a tool-call delta, in output order.
type ToolEvent struct {
	Content string
	Call    *ToolCallDelta
}

// opener is text that starts a call block. keep: the opener is the start of
// the call's JSON itself (Llama 3's bare {"name"), scanned as the body;
// startOnly: it opens a call only at the start of the reply.
type opener struct {
	text            string
	keep, startOnly bool
}

func openersOf(f ToolFormat) []opener {
	switch f {
	case ToolsLlama3:
		return []opener{{text: "<|python_tag|>"}, {text: `{"name"`, keep: true, startOnly: true}}
	case ToolsMistral:
		return []opener{{text: "[TOOL_CALLS]"}}
	}
	return []opener{{text: "<tool_call>"}}
}

const hermesCloser = "</tool_call>"

// ToolParser splits a model's output into content and tool calls,
// incrementally: Feed takes text as it is decoded, cut anywhere, and returns
// what is decided. The events do not depend on where the text was cut.
//
//   - Text that could still become an opener is held back, like a stop
//     string, and released the moment it cannot: no byte of an opener
//     reaches content.
//   - Whitespace around call blocks is not content (a reply that is only
//     calls has no content), but whitespace a text reply is made of is.
//   - A block that does not parse before any of it was sent (no name, text
//     where JSON should be) is content after all, opener included. Once a
//     call's name is sent the call stands: if its block breaks later, the
//     call ends with the arguments sent so far and the rest of the block is
//     dropped.
//
// A ToolParser is used by one goroutine.
type ToolParser struct {
	format  ToolFormat
	openers []opener
	newID   func() string

	held     string // text mode: whitespace-only content, or a suffix that may open a call
	heldOpen int    // bytes at the end of held that may open a call
	started  bool   // non-whitespace content or a call was seen: start-only openers are off
	afterBl  bool   // text mode: a block ended and no content followed yet

	inCall bool
	lead   string          // whitespace dropped before the current block's opener
	opened string          // the opener text of the current block
	raw    strings.Builder // the current block's text after its opener, while none of it was sent
	sc     scanner
	index  int // of the next call
	calls  int
}

// NewToolParser parses f's call syntax; newID makes call ids.
func NewToolParser(f ToolFormat, newID func() string) *ToolParser {
	return &ToolParser{format: f, openers: openersOf(f), newID: newID}
}

// Calls is the number of tool calls sent so far.
func (p *ToolParser) Calls() int { return p.calls }

// Feed consumes a piece of output text.
func (p *ToolParser) Feed(text string) []ToolEvent {
	var ev []ToolEvent
	for text != "" {
		if p.inCall {
			text = p.feedCall(text, &ev)
		} else {
			text = p.feedText(text, &ev)
		}
	}
	return ev
}

// Finish ends output the model ended itself and returns its last events:
// held text that did not become an opener is content, and an unfinished
// block is abandoned as if its next byte broke it.
func (p *ToolParser) Finish() []ToolEvent { return p.finish(false) }

// FinishCut ends output cut before the model ended it (the token limit, an
// error) and returns its last events. What was cut was on its way to being
// a call, so none of it becomes content: a held opener fragment (with the
// whitespace held before it) and a block whose name was not yet read are
// dropped, and a call whose name was sent stands with the arguments sent so
// far, as OpenAI and vLLM leave a call cut by max_tokens (the finish_reason
// stays "length", so a client knows its arguments may be incomplete).
func (p *ToolParser) FinishCut() []ToolEvent { return p.finish(true) }

func (p *ToolParser) finish(cut bool) []ToolEvent {
	var ev []ToolEvent
	if p.inCall {
		switch {
		case p.sc.complete():
			p.endBlock()
		case cut && p.sc.nothingSent():
			p.inCall = false
			p.raw.Reset()
		default:
			p.abandon(&ev)
		}
	}
	if cut && p.heldOpen > 0 {
		p.held = ""
	}
	if p.held != "" {
		if strings.TrimSpace(p.held) != "" || p.calls == 0 {
			ev = appendContent(ev, p.held)
		}
		p.held = ""
	}
	p.heldOpen = 0
	return ev
}

func appendContent(ev []ToolEvent, s string) []ToolEvent {
	if s == "" {
		return ev
	}
	if n := len(ev); n > 0 && ev[n-1].Call == nil {
		ev[n-1].Content += s
		return ev
	}
	return append(ev, ToolEvent{Content: s})
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// feedText scans held+text for an opener and returns the text left for call
// mode ("" when all of it was taken).
func (p *ToolParser) feedText(text string, ev *[]ToolEvent) string {
	s := p.held + text
	p.held, p.heldOpen = "", 0
	best, at := -1, len(s)
	for i, o := range p.openers {
		j := strings.Index(s, o.text)
		if j >= 0 && j < at && (!o.startOnly || !p.started && strings.TrimSpace(s[:j]) == "") {
			best, at = i, j
		}
	}
	if best >= 0 {
		o := p.openers[best]
		p.lead = ""
		if p.dropsSpace(s[:at]) {
			p.lead = s[:at] // dropped, unless the block turns out to be text
		}
		p.content(ev, s[:at])
		rest := s[at+len(o.text):]
		if o.keep {
			rest = s[at:]
		}
		p.startCall(o)
		return rest
	}
	hold := 0
	for _, o := range p.openers {
		for n := min(len(o.text)-1, len(s)); n > hold; n-- {
			if strings.HasSuffix(s, o.text[:n]) &&
				(!o.startOnly || !p.started && strings.TrimSpace(s[:len(s)-n]) == "") {
				hold = n
				break
			}
		}
	}
	p.heldOpen = hold
	if strings.TrimSpace(s[:len(s)-hold]) == "" && (!p.started || p.afterBl) {
		hold = len(s) // whitespace that may yet turn out to sit around a call
	}
	p.content(ev, s[:len(s)-hold])
	p.held = s[len(s)-hold:]
	return ""
}

// dropsSpace: s is whitespace around call blocks (at the start of the
// reply or after a block), not content.
func (p *ToolParser) dropsSpace(s string) bool {
	return strings.TrimSpace(s) == "" && (!p.started || p.afterBl)
}

// content emits text-mode output.
func (p *ToolParser) content(ev *[]ToolEvent, s string) {
	if p.dropsSpace(s) {
		return
	}
	*ev = appendContent(*ev, s)
	p.started, p.afterBl = true, false
}

func (p *ToolParser) startCall(o opener) {
	p.inCall, p.started, p.afterBl = true, true, false
	p.opened = o.text
	if o.keep {
		p.opened = ""
	}
	p.raw.Reset()
	p.sc = scanner{format: p.format}
}

// feedCall runs the block scanner over text and returns what follows the
// block, for text mode.
func (p *ToolParser) feedCall(text string, ev *[]ToolEvent) string {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if p.sc.nothingSent() {
			p.raw.WriteByte(c)
		}
		r := p.sc.step(c)
		p.emitScanned(ev)
		switch r {
		case stepBad:
			if p.sc.complete() { // the block ended without its closer: c is text again
				p.endBlock()
				return p.sc.tail + text[i:]
			}
			p.abandon(ev)
			return text[i+1:]
		case stepEnd:
			p.endBlock()
			return text[i+1:]
		}
	}
	return ""
}

// emitScanned sends what the scanner decided: a call's first delta once its
// name is known, then argument bytes as they arrive.
func (p *ToolParser) emitScanned(ev *[]ToolEvent) {
	sc := &p.sc
	if sc.name != nil && !sc.sentName {
		sc.sentName = true
		p.calls++
		*ev = append(*ev, ToolEvent{Call: &ToolCallDelta{Index: p.index, ID: p.newID(), Name: *sc.name}})
	}
	if sc.sentName && sc.args.Len() > 0 && sc.argsReady() {
		frag := sc.args.String()
		sc.args.Reset()
		if n := len(*ev); n > 0 && (*ev)[n-1].Call != nil && (*ev)[n-1].Call.Index == p.index {
			(*ev)[n-1].Call.Arguments += frag
		} else {
			*ev = append(*ev, ToolEvent{Call: &ToolCallDelta{Index: p.index, Arguments: frag}})
		}
	}
	if sc.objectDone {
		sc.objectDone = false
		p.index++
		sc.nextObject()
	}
}

func (p *ToolParser) endBlock() {
	p.inCall, p.afterBl = false, true
	p.raw.Reset()
}

// abandon leaves a block that broke: content again if none of it was sent,
// else the calls sent stand and the rest of the block is dropped.
func (p *ToolParser) abandon(ev *[]ToolEvent) {
	if p.sc.nothingSent() {
		s := p.opened + p.raw.String()
		p.inCall = false
		p.raw.Reset()
		// Whatever the block held is text now; it can hold no opener of its
		// own format at its start (that was this block's), so only what
		// follows its first byte is scanned again.
		*ev = appendContent(*ev, p.lead+s[:1])
		p.started, p.afterBl = true, false
		p.held, p.heldOpen = "", 0
		for _, e := range p.Feed(s[1:]) {
			*ev = append(*ev, e)
		}
		return
	}
	if p.sc.sentName && !p.sc.objectDone {
		p.index++ // the open call ends with what it sent
	}
	p.inCall, p.afterBl = false, true
	p.raw.Reset()
}

// toolName decodes a JSON string literal.
func decodeString(raw string) (string, bool) {
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return "", false
	}
	return s, true
}
