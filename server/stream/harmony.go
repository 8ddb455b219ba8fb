package stream

import "strings"

// gpt-oss writes its reply in OpenAI's harmony format: a sequence of
// messages, each a header and a body,
//
//	<|channel|>analysis<|message|>…<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
//	<|start|>assistant<|channel|>final<|message|>…<|return|>
//
// (the prompt already wrote the first <|start|>assistant; the recipient may
// also stand in the role part, "assistant to=functions.NAME<|channel|>…").
// The tokenizer shows <|start|>, <|channel|>, <|message|>, <|constrain|> and
// <|end|> as text, as llama.cpp does for this vocabulary; <|return|> and
// <|call|> end the generation and are not shown.
//
// HarmonyParser splits that text, incrementally, into the stream's three
// outputs: the analysis channel is reasoning, final (and commentary
// without a recipient: a preamble to the user) is content, and a message to
// functions.NAME on any channel is a call of NAME with the body as its
// arguments. Another recipient (gpt-oss's built-in python or browser) is
// the model's own work: reasoning. A channel harmony does not name is
// content, so nothing the model wrote for the reader is lost. Headers are
// held until <|message|>, and a body keeps back only a suffix that may be
// the start of a marker, so the split depends on the text alone, never on
// how it was cut.

// Harmony markers as the tokenizer shows them.
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hConstrain = "<|constrain|>"
	hEnd       = "<|end|>"
	hReturn    = "<|return|>"
	hCall      = "<|call|>"
)

// harmonyEnders end a message's body and are consumed; harmonyOpeners end
// it too (a model that left out <|end|>) and begin the next header.
var (
	harmonyEnders  = []string{hEnd, hReturn, hCall}
	harmonyOpeners = []string{hStart, hChannel}
)

// maxHarmonyHeader bounds a header: past it without <|message|> the text
// is not harmony markup but the model's prose, and is content.
const maxHarmonyHeader = 512

// HarmonyKind is what a HarmonyEvent carries.
type HarmonyKind uint8

const (
	HarmonyContent HarmonyKind = iota
	HarmonyReasoning
	HarmonyCall // Call holds the delta
)

// HarmonyEvent is reasoning or content text, or a call delta, in order.
type HarmonyEvent struct {
	Kind HarmonyKind
	Text string
	Call *ToolCallDelta
}

type harmonyState uint8

const (
	hsHeader harmonyState = iota // reading a header, up to <|message|>
	hsBody                       // reading a body
)

// HarmonyParser is the incremental split; it is used by one goroutine.
type HarmonyParser struct {
	st    harmonyState
	held  string      // header text so far, or a body's suffix that may open a marker
	route HarmonyKind // where the current body goes
	// calls: a message to functions.NAME is a call (the request offers
	// tools); else its body is content.
	calls  bool
	newID  func() string
	index  int  // of the next call
	inCall bool // the current body is a call's arguments
	args   bool // the current call has sent argument text
	cut    bool // Finish: the reply was cut, not ended by the model
}

// NewHarmonyParser starts at the reply's first header. calls: messages to
// functions are tool calls (ids from newID); else their bodies are content.
func NewHarmonyParser(calls bool, newID func() string) *HarmonyParser {
	return &HarmonyParser{calls: calls, newID: newID}
}

// Calls is the number of calls begun so far.
func (p *HarmonyParser) Calls() int { return p.index }

// Feed consumes a piece of the reply's text.
func (p *HarmonyParser) Feed(text string) []HarmonyEvent { return p.run(text, false) }

// Finish ends the reply; cut: the token limit (or an error) ended it, not
// the model. A body keeps what it held (a marker cut short is the body's
// text). A header still undecided (no <|message|> yet) is markup cut
// short, dropped, when the reply was cut; when the model ended there it is
// content, since nothing followed to make it a header. A call stands with
// the arguments it sent (none: "{}").
func (p *HarmonyParser) Finish(cut bool) []HarmonyEvent {
	p.cut = cut
	ev := p.run("", true)
	p.endBody(&ev)
	return ev
}

func (p *HarmonyParser) run(text string, final bool) []HarmonyEvent {
	var ev []HarmonyEvent
	buf := p.held + text
	p.held = ""
	for buf != "" {
		if p.st == hsHeader {
			buf = p.header(buf, &ev, final)
		} else {
			buf = p.body(buf, &ev, final)
		}
	}
	return ev
}

// header reads buf as header text and returns what follows the header (a
// body's text), or "" when all of it is held. Whether the text is a header
// is decided on its first maxHarmonyHeader bytes alone, by which of
// <|message|> or a marker ending a body comes first in them, so a streamed
// reply decides as the whole one does.
func (p *HarmonyParser) header(buf string, ev *[]HarmonyEvent, final bool) string {
	h := strings.TrimLeft(buf, " \t\r\n") // between messages
	if h == "" {
		return ""
	}
	start := headerStart(h)
	if start == "" {
		if !final && isPrefixOfAny(h, headerStarts) {
			p.held = h
			return ""
		}
		return p.prose(h)
	}
	w := h[:min(len(h), maxHarmonyHeader)]
	end, stop := strings.Index(w, hMessage), indexAny(w, harmonyEnders)
	switch {
	case end >= 0 && (stop < 0 || end < stop):
		p.open(h[:end], ev)
		return h[end+len(hMessage):]
	case stop >= 0 || len(w) == maxHarmonyHeader:
		// Not a header after all: its first marker is text, and what
		// follows is read as a body of content, where the markers it
		// holds end it or open the next header.
		p.emitAs(HarmonyContent, start, ev)
		return p.prose(h[len(start):])
	case !final:
		p.held = h
	case !p.cut:
		p.emitAs(HarmonyContent, h, ev)
	}
	return ""
}

// prose makes text that is not a header a body of content (a model
// writing without markup), scanned for the next header as any body is.
func (p *HarmonyParser) prose(text string) string {
	p.st, p.route, p.inCall, p.args = hsBody, HarmonyContent, false, false
	return text
}

// headerStarts are how a header may begin: a new message, its channel, or
// the recipient right after the prompt's "<|start|>assistant".
var headerStarts = []string{hStart, hChannel, "to="}

func headerStart(h string) string {
	for _, s := range headerStarts {
		if strings.HasPrefix(h, s) {
			return s
		}
	}
	return ""
}

// open routes the body that follows header h.
func (p *HarmonyParser) open(h string, ev *[]HarmonyEvent) {
	channel, recipient := parseHarmonyHeader(h)
	p.st, p.inCall, p.args = hsBody, false, false
	switch {
	case strings.HasPrefix(recipient, "functions.") && len(recipient) > len("functions.") && p.calls:
		p.inCall = true
		*ev = append(*ev, HarmonyEvent{Kind: HarmonyCall, Call: &ToolCallDelta{Index: p.index, ID: p.newID(), Name: recipient[len("functions."):]}})
		p.index++
	case strings.HasPrefix(recipient, "functions."):
		p.route = HarmonyContent // no tools offered: what it wrote is all there is
	case recipient != "" && recipient != "user" && recipient != "all":
		p.route = HarmonyReasoning // a built-in tool's input, part of its work
	case channel == "analysis":
		p.route = HarmonyReasoning
	default: // final, commentary (a preamble), or a channel harmony does not name
		p.route = HarmonyContent
	}
}

// parseHarmonyHeader reads a header's channel and recipient ("to=…",
// wherever it stands); the role and content type are not needed.
func parseHarmonyHeader(h string) (channel, recipient string) {
	if i := strings.Index(h, hChannel); i >= 0 {
		rest := h[i+len(hChannel):]
		if j := strings.IndexAny(rest, " \t\r\n<"); j >= 0 {
			rest = rest[:j]
		}
		channel = rest
	}
	flat := strings.NewReplacer(hStart, " ", hChannel, " ", hConstrain, " ").Replace(h)
	for _, f := range strings.Fields(flat) {
		if strings.HasPrefix(f, "to=") && recipient == "" {
			recipient = f[len("to="):]
		}
	}
	return channel, recipient
}

// body sends a body's text on its route up to the marker that ends it and
// returns what follows (the next header), or "" with a possible marker's
// start held.
func (p *HarmonyParser) body(buf string, ev *[]HarmonyEvent, final bool) string {
	at, n, next := -1, 0, false
	for _, m := range harmonyEnders {
		if i := strings.Index(buf, m); i >= 0 && (at < 0 || i < at) {
			at, n, next = i, len(m), false
		}
	}
	for _, m := range harmonyOpeners {
		if i := strings.Index(buf, m); i >= 0 && (at < 0 || i < at) {
			at, n, next = i, 0, true
		}
	}
	if at >= 0 {
		p.emit(buf[:at], ev)
		p.endBody(ev)
		p.st = hsHeader
		if next {
			return buf[at:] // the marker opens the next header
		}
		return buf[at+n:]
	}
	keep := len(buf)
	if !final {
		keep -= heldMarker(buf)
	}
	p.emit(buf[:keep], ev)
	p.held = buf[keep:]
	return ""
}

// heldMarker is the length of the longest suffix of s that may still grow
// into a marker ending a body.
func heldMarker(s string) int {
	n := 0
	for _, m := range harmonyEnders {
		n = max(n, suffixPrefix(s, m))
	}
	for _, m := range harmonyOpeners {
		n = max(n, suffixPrefix(s, m))
	}
	return n
}

func (p *HarmonyParser) emit(s string, ev *[]HarmonyEvent) {
	if s == "" {
		return
	}
	if p.inCall {
		p.args = true
		*ev = append(*ev, HarmonyEvent{Kind: HarmonyCall, Call: &ToolCallDelta{Index: p.index - 1, Arguments: s}})
		return
	}
	p.emitAs(p.route, s, ev)
}

func (p *HarmonyParser) emitAs(k HarmonyKind, s string, ev *[]HarmonyEvent) {
	if n := len(*ev); n > 0 && (*ev)[n-1].Kind == k && (*ev)[n-1].Call == nil {
		(*ev)[n-1].Text += s
		return
	}
	*ev = append(*ev, HarmonyEvent{Kind: k, Text: s})
}

// endBody closes a call that wrote no arguments with an empty object, the
// arguments of a function that takes none.
func (p *HarmonyParser) endBody(ev *[]HarmonyEvent) {
	if p.inCall && !p.args {
		*ev = append(*ev, HarmonyEvent{Kind: HarmonyCall, Call: &ToolCallDelta{Index: p.index - 1, Arguments: "{}"}})
	}
	p.inCall, p.args = false, false
}

func indexAny(s string, markers []string) int {
	at := -1
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

func isPrefixOfAny(s string, full []string) bool {
	for _, f := range full {
		if strings.HasPrefix(f, s) {
			return true
		}
	}
	return false
}
