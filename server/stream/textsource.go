package stream

import (
	"context"
	"fmt"
)

// The text half of the stream core, for producers that yield text instead of
// token ids (relay mode: an OpenAI-compatible upstream). It shares
// TextStream's stop-string hold-back, the timer rules of Pump (keep-alive,
// coalescing, stall clock) and the Emitter; a TextJoiner stands where the
// detokenizer stands for tokens.
//
//	TextSource.Events ─▶ TextJoiner (UTF-8 split across chunks) ─▶ TextStream.PushText (stop hold-back)
//	                  ─▶ PumpText (keep-alive, stall, coalescing, client gone → Close) ─▶ Emitter
//
// An event's reasoning and tool-call deltas pass beside the stop hold-back,
// to the emitter's ReasoningEmitter (SealEmitter, RedactedEmitter) and
// ToolEmitter sides.

// TextEvent is one upstream chunk. Text is complete UTF-8 (the source joins
// characters split across chunks, see TextJoiner) and may be empty: a chunk
// without text, or a comment line, still proves the upstream alive.
type TextEvent struct {
	Text   string
	Finish string // the chunk's finish_reason, when it has one
	// Seq is the upstream's SSE event id (0 when it sends none): where a
	// resume of the upstream's own stream would continue.
	Seq int64
	// Reasoning is the chunk's reasoning, before its Text (a chunk that
	// carries both thought first). Like Tools it bypasses the stop strings:
	// a stop string ends the answer, not the thinking.
	Reasoning []ReasoningDelta
	// Tools are the chunk's tool-call deltas, after its Text. They bypass
	// the stop strings (those apply to text, never to arguments) and go to
	// a ToolEmitter.
	Tools []ToolCallDelta
}

// ReasoningKind is what a ReasoningDelta carries.
type ReasoningKind uint8

const (
	// ReasoningText: reasoning text, to the ReasoningEmitter. An empty one
	// opens the reasoning without text (a thinking block whose display is
	// omitted upstream).
	ReasoningText ReasoningKind = iota
	// ReasoningSeal: the producer's own seal of the reasoning so far (a
	// Messages signature, a Responses encrypted_content), to a SealEmitter,
	// which passes it on unchanged so that it round-trips to that producer.
	ReasoningSeal
	// ReasoningRedacted: a Messages redacted_thinking block's data, to a
	// RedactedEmitter, which the client must send back as it came.
	ReasoningRedacted
)

// ReasoningDelta is one piece of a producer's reasoning.
type ReasoningDelta struct {
	Kind ReasoningKind
	Text string
}

// SealEmitter is a ReasoningEmitter that carries a producer's seal of its
// reasoning (ReasoningSeal).
type SealEmitter interface {
	Signed(seal string) error
}

// RedactedEmitter is a ReasoningEmitter that carries a producer's redacted
// reasoning (ReasoningRedacted).
type RedactedEmitter interface {
	Redacted(data string) error
}

// TextSource is a producer of text. Events is closed exactly once by the
// source; Err is valid after that: nil when the upstream ended its stream
// properly ([DONE]), or when Close ended it. Close asks the source to stop
// reading now and drop its upstream connection (the upstream sees the TCP
// close); it may be called at any time, more than once, and Events is still
// closed after it.
type TextSource interface {
	Events() <-chan TextEvent
	Err() error
	Close()
}

// TextOutcome is how a pumped text stream ended.
type TextOutcome struct {
	// Finish is the finish_reason to report ("stop", "length", ...) when the
	// stream ended normally, "" otherwise.
	Finish string
	// Err is the error to report (stall, shutdown, an upstream failure).
	Err error
	// ClientGone: the client left (ctx done or a failed write); the source
	// was closed at once.
	ClientGone bool
	// LastSeq is the Seq of the last event consumed: the upstream cursor a
	// resume continues from.
	LastSeq int64
	// Events counts the chunks consumed (role and usage chunks included).
	Events int
}

// PumpText drains src through ts into em until src closes its events. The
// stall clock runs from the call (the upstream already answered) and is
// reset by every event; it bounds the upstream's silence, so a provider that
// accepted the request and went quiet cannot hang the client. Whatever ends
// the stream early — the client leaving (ctx), a failed write, a stop string,
// a stall, shutdown — closes src at once, so no upstream bytes are paid for
// after that. PumpText returns only after src's events are closed.
func PumpText(ctx context.Context, src TextSource, ts *TextStream, em Emitter, cfg PumpConfig, shutdown <-chan struct{}) TextOutcome {
	p := textPump{writer: writer{em: em, cfg: cfg}, src: src, ts: ts}
	return p.run(ctx, shutdown)
}

type textPump struct {
	writer
	src    TextSource
	ts     *TextStream
	finish string // the upstream's finish_reason
	out    TextOutcome
	closed bool
}

func (p *textPump) run(ctx context.Context, shutdown <-chan struct{}) TextOutcome {
	p.flushText = p.emit
	p.leave = p.close
	drain(&p.writer, p.src.Events(), p.take, loopEvents{
		done: ctx.Done(), shutdown: shutdown,
		stall: func() {
			p.abort(fmt.Errorf("%w: the upstream sent nothing for %v", ErrStall, p.cfg.StallTimeout))
		},
		shutdownNow: func() { p.abort(ErrShutdown) },
		clientDone: func() {
			p.gone = true
			p.close()
		},
	})
	return p.end()
}

// take feeds one event: its reasoning, its text, then its calls. Events
// after a stop string are dropped: they were in flight when the source was
// closed.
func (p *textPump) take(ev TextEvent) {
	if p.ts.Stopped() {
		return
	}
	p.out.Events++
	if ev.Seq != 0 {
		p.out.LastSeq = ev.Seq
	}
	if ev.Finish != "" {
		p.finish = ev.Finish
	}
	if len(ev.Reasoning) > 0 {
		p.reasoning(ev.Reasoning)
		if p.out.Err != nil {
			return
		}
	}
	text, stopped := p.ts.PushText(ev.Text)
	p.pending = append(p.pending, text...)
	if stopped {
		p.out.Finish = "stop"
		p.close()
		return
	}
	if len(ev.Tools) > 0 {
		p.tools(ev.Tools)
	}
}

// tools writes tool-call deltas after the text before them. An emitter
// without tool calls cannot carry them: the stream fails rather than drop
// them.
func (p *textPump) tools(ds []ToolCallDelta) {
	te, ok := p.em.(ToolEmitter)
	if !ok {
		p.abort(fmt.Errorf("%w: the upstream sent tool calls this API cannot carry", ErrUpstreamMalformed))
		return
	}
	p.beside(func() {
		for _, d := range ds {
			if p.gone {
				return
			}
			p.fail(te.ToolCall(d))
		}
	})
}

// reasoning writes reasoning deltas after the text before them, each to
// the emitter's side for its kind. An emitter that cannot carry one fails
// the stream rather than drop it.
func (p *textPump) reasoning(ds []ReasoningDelta) {
	re, _ := p.em.(ReasoningEmitter)
	se, _ := p.em.(SealEmitter)
	rd, _ := p.em.(RedactedEmitter)
	for _, d := range ds {
		if re == nil || d.Kind == ReasoningSeal && se == nil || d.Kind == ReasoningRedacted && rd == nil {
			p.abort(fmt.Errorf("%w: the upstream sent reasoning this API cannot carry", ErrUpstreamMalformed))
			return
		}
	}
	p.beside(func() {
		for _, d := range ds {
			if p.gone {
				return
			}
			switch d.Kind {
			case ReasoningSeal:
				p.fail(se.Signed(d.Text))
			case ReasoningRedacted:
				p.fail(rd.Redacted(d.Text))
			default:
				p.fail(re.Reasoning(d.Text))
			}
		}
	})
}

// beside writes what travels beside the text (calls, reasoning) after the
// text before it, which is complete: the upstream moved on, so text held
// back for a stop string goes out first (a stop cannot span a call or a
// thought).
func (p *textPump) beside(write func()) {
	p.pending = append(p.pending, p.ts.FinishText()...)
	if len(p.pending) > 0 {
		p.emit()
	}
	write()
	// Flushed now: the writer's coalescing clock runs on pending text only.
	if !p.gone {
		p.fail(p.em.Flush())
		p.keep.reset(p.cfg.KeepAlive)
	}
}

func (p *textPump) emit() {
	p.fail(p.em.Text(string(p.pending), nil))
	p.pending = p.pending[:0]
}

func (p *textPump) abort(err error) {
	if p.out.Err == nil && p.out.Finish == "" && !p.gone {
		p.out.Err = err
	}
	p.close()
}

func (p *textPump) close() {
	if !p.closed {
		p.closed = true
		p.src.Close()
	}
}

// end runs after the events closed: the source's verdict decides the outcome
// unless the pump decided it first.
func (p *textPump) end() TextOutcome {
	p.out.ClientGone = p.gone
	switch {
	case p.out.Finish != "" || p.out.Err != nil || p.out.ClientGone:
	case p.src.Err() != nil:
		p.out.Err = p.src.Err()
	case p.finish != "":
		p.out.Finish = p.finish
	default:
		// [DONE] with no finish_reason: some servers omit it; the stream did end.
		p.out.Finish = "stop"
	}
	if p.out.Finish != "" {
		p.pending = append(p.pending, p.ts.FinishText()...)
	}
	if len(p.pending) > 0 {
		p.emit()
	}
	p.out.ClientGone = p.gone // the last write may have failed
	return p.out
}

// PushText consumes a chunk of text instead of a token (relay mode) and
// returns what may be sent now; see Push. The TextStream must have been made
// by NewTextOnlyStream.
func (t *TextStream) PushText(fresh string) (text string, stopped bool) {
	if t.stopped {
		return "", true
	}
	return t.release(fresh)
}

// FinishText ends a text-only stream: held-back text that did not become a
// stop string is returned. A character cut in the middle by the end of the
// upstream's stream stays in the TextJoiner and is never sent.
func (t *TextStream) FinishText() string {
	if t.stopped {
		return ""
	}
	text := t.held
	t.sent += len(text)
	t.held = ""
	return text
}

// NewTextOnlyStream is a TextStream fed through PushText: it holds back stop
// strings but decodes no tokens.
func NewTextOnlyStream(stops []string) *TextStream {
	return NewTextStream(nil, stops)
}

// Ending is how a generation ended, local or an upstream's (relay mode),
// as the framers settle a response from it: the finish or the error, the
// token counts and the stop sequence. A local generation's counts are the
// stream's own (Usage always set); an upstream's are what it reported.
type Ending struct {
	// Finish is the finish_reason to report ("stop", "length", ...) when the
	// generation ended normally, "" otherwise.
	Finish string
	// Err is the error to report (stall, shutdown, an engine or upstream
	// failure).
	Err error
	// ClientGone: the client left. CutShort: it left before the generation
	// ended, which may continue on a reconnect.
	ClientGone, CutShort bool
	// Usage: the producer reported its token counts (the fields below).
	Usage                                        bool
	PromptTokens, CompletionTokens, CachedTokens int
	// ReasoningTokens are the completion tokens spent reasoning, as the
	// producer counted them (0 when it does not: an Anthropic upstream
	// counts thinking in its output tokens only).
	ReasoningTokens int
	// StopSequence is the stop string that ended the text ("" for none),
	// matched here (TextStream.Matched) or by the upstream.
	StopSequence string
	// IDs are the tokens a local generation produced (whose logprobs a
	// whole response shows); an upstream's text has none.
	IDs []int32
}
