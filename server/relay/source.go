package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/server/stream"
)

// maxLine bounds one SSE line from an upstream; a longer one is malformed
// (a chunk of one token is a few hundred bytes).
const maxLine = 1 << 20

// Usage is the upstream's token accounting, passed through to the client.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	Details          *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionDetails *completionDetails `json:"completion_tokens_details"`
}

// Stream is one upstream response being read; it implements
// stream.TextSource. The reader goroutine owns the body and is the only
// writer of the fields below mu until events is closed.
type Stream struct {
	clientCtx context.Context // the client's request: done when it left
	m         *Metrics
	up        *upstream
	body      io.ReadCloser
	cancel    context.CancelFunc // ends the upstream request: its TCP connection closes
	release   func()             // the admission slot
	detach    bool
	start     time.Time
	api       api
	id        string // the upstream's own stream id (X-Sluice-Stream-Id), "" when it has none
	resumed   bool   // the continuation of an upstream stream (Relay.Resume)

	events   chan stream.TextEvent
	stop     chan struct{}
	stopOnce sync.Once

	// Written by the reader before it closes events.
	err     error
	usage   *Usage
	stopSeq string // the stop sequence an Anthropic upstream reported matching
	done    bool   // the stream's end ([DONE], message_stop...) arrived
}

func newStream(clientCtx context.Context, m *Metrics, up *upstream, resp *http.Response, cancel context.CancelFunc, release func(), detach bool, start time.Time, a api) *Stream {
	s := &Stream{
		clientCtx: clientCtx, m: m, up: up, body: resp.Body, cancel: cancel, release: release, detach: detach, start: start, api: a,
		events: make(chan stream.TextEvent, 64), stop: make(chan struct{}),
		resumed: resp.Request != nil && resp.Request.Method == http.MethodGet,
	}
	// Only a chat or completions stream can be continued upstream: Relay.Resume
	// reads the continuation as chunks.
	if id := resp.Header.Get("X-Sluice-Stream-Id"); id != "" && a == apiOpenAI {
		s.id = up.label + "|" + id
	}
	m.inFlight.WithLabelValues(up.label).Inc()
	go s.read()
	return s
}

// Events implements stream.TextSource.
func (s *Stream) Events() <-chan stream.TextEvent { return s.events }

// Err implements stream.TextSource: valid once Events is closed.
func (s *Stream) Err() error { return s.err }

// Usage is the upstream's usage chunk, nil when it sent none; valid once
// Events is closed.
func (s *Stream) Usage() *Usage { return s.usage }

// Done reports whether the upstream ended its stream properly ([DONE],
// message_stop, response.completed or .incomplete); valid once Events is
// closed.
func (s *Stream) Done() bool { return s.done }

// StopSequence is the stop sequence an upstream of the Messages API said
// ended its text ("" for none); valid once Events is closed.
func (s *Stream) StopSequence() string { return s.stopSeq }

// UpstreamID names the upstream's stream for Relay.Resume ("" when the
// upstream keeps no resumable streams).
func (s *Stream) UpstreamID() string { return s.id }

// StallTimeout is the upstream's silence bound, for the stream core's clock.
func (s *Stream) StallTimeout() time.Duration { return s.up.cfg.Stall }

// Close implements stream.TextSource: the upstream request is cancelled,
// so the upstream sees its connection close now (with Detach, the body is
// read to its end first, as a relay that never watches its client does).
func (s *Stream) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		if !s.detach {
			s.cancel()
		}
	})
}

// Stalled counts a stall the stream core detected (it owns that clock).
func (s *Stream) Stalled() { s.m.errors.WithLabelValues(s.up.label, KindStall).Inc() }

func (s *Stream) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// read parses the upstream's SSE until [DONE], the end of the body, an
// error or Close, then closes events.
func (s *Stream) read() {
	closed := false
	closeEvents := func() {
		if !closed {
			closed = true
			close(s.events)
		}
	}
	defer func() {
		if !s.done && s.err == nil && s.clientCtx.Err() != nil {
			s.m.cancelled.WithLabelValues(s.up.label).Inc()
		}
		closeEvents()
		_ = s.body.Close()
		s.cancel()
		s.release()
		s.m.inFlight.WithLabelValues(s.up.label).Dec()
	}()
	p := parser{s: s, messageItems: map[int]bool{}, reasoningKind: map[int]string{}}
	// A resumed upstream stream (GET /v1/streams/{id}) may continue a call
	// whose first delta the client already has.
	p.calls.resumed = s.resumed
	br := bufio.NewReaderSize(s.body, 16<<10)
	for {
		line, err := readLine(br)
		if err != nil {
			s.err = s.endError(err)
			return
		}
		ev, send, done, err := p.line(line)
		if err != nil {
			s.err = err
			s.cancel()
			return
		}
		if send && !s.deliver(ev, &closed, closeEvents) {
			return
		}
		if done {
			s.done = true
			return
		}
	}
}

// deliver hands ev to the pump; false when Close asked the reader to stop.
// A detached stream's reader reads on for nobody after Close.
func (s *Stream) deliver(ev stream.TextEvent, closed *bool, closeEvents func()) bool {
	if (ev.Text != "" || len(ev.Tools) > 0 || len(ev.Reasoning) > 0) && s.clientCtx.Err() != nil {
		s.m.afterGone.WithLabelValues(s.up.label).Inc()
	}
	if *closed {
		return true
	}
	select {
	case s.events <- ev:
	case <-s.stop:
		if !s.detach {
			return false
		}
		closeEvents()
	}
	return true
}

// endError classifies the end of the body before [DONE].
func (s *Stream) endError(err error) error {
	if s.stopped() || s.clientCtx.Err() != nil {
		return nil // we closed it: the stream core knows why
	}
	s.m.truncated.WithLabelValues(s.up.label).Inc()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s closed its stream without %s", stream.ErrUpstreamTruncated, s.up.label, s.api.end())
	}
	if errors.Is(err, errLineTooLong) {
		s.m.errors.WithLabelValues(s.up.label, KindMalformed).Inc()
		return fmt.Errorf("%w: %s: %v", stream.ErrUpstreamMalformed, s.up.label, err)
	}
	return fmt.Errorf("%w: %s: connection lost: %v", stream.ErrUpstreamTruncated, s.up.label, err)
}

var errLineTooLong = fmt.Errorf("an SSE line over %d bytes", maxLine)

// readLine returns one line without its "\n" or "\r\n". A last line without
// a newline is an io.ErrUnexpectedEOF: the stream was cut mid-line.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLine {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		if len(long) > maxLine {
			return nil, errLineTooLong
		}
		line = long
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	return line, nil
}

// parser turns SSE lines into TextEvents. It is owned by the reader.
type parser struct {
	s       *Stream
	data    []byte
	hasData bool
	seq     int64 // id: of the event being read
	joiner  stream.TextJoiner
	rjoiner stream.TextJoiner // the reasoning's
	// reasoningKind is the kind of delta a Responses reasoning item's text
	// is read from, by output index: reasoning_text, or the summary when
	// the upstream sends only that (OpenAI's own reasoning models).
	reasoningKind map[int]string
	calls         toolCalls
	// messageItems are the Responses output indexes announced as messages.
	messageItems map[int]bool
	firstAt      time.Time
	lastAt       time.Time
}

// line handles one SSE line. send: ev is ready (a comment, an event with
// data); done: [DONE] arrived.
func (p *parser) line(line []byte) (ev stream.TextEvent, send, done bool, err error) {
	switch {
	case len(line) == 0:
		if !p.hasData {
			return ev, false, false, nil
		}
		data := p.data
		p.data, p.hasData = p.data[:0], false
		return p.event(data)
	case line[0] == ':':
		return ev, true, false, nil // a comment: the upstream is alive
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
		if p.hasData {
			p.data = append(p.data, '\n')
		}
		p.data, p.hasData = append(p.data, value...), true
	case "id":
		if n, err := strconv.ParseInt(string(value), 10, 64); err == nil {
			p.seq = n
		}
	}
	return ev, false, false, nil
}

// wireChunk is what the relay reads of an OpenAI stream chunk. Text stays
// raw: decodeString keeps what encoding/json would turn into U+FFFD (a
// character split across chunks), for the TextJoiner.
type wireChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Content json.RawMessage `json:"content"`
			// The reasoning, under either name (DeepSeek's and vLLM's
			// reasoning_content, the newer reasoning; Sluice sends both,
			// the same text).
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ToolCalls        []wireToolDelta `json:"tool_calls"`
		} `json:"delta"`
		Text         json.RawMessage `json:"text"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (p *parser) event(data []byte) (ev stream.TextEvent, send, done bool, err error) {
	switch p.s.api {
	case apiMessages:
		return p.messages(data)
	case apiResponses:
		return p.responses(data)
	}
	s := p.s
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return ev, false, true, nil
	}
	ev.Seq = p.seq
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return p.malformed("%v in %.120q", err, data)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(c.Error, &e) != nil || e.Message == "" {
			e.Message = string(c.Error)
		}
		return p.inBand(e.Message)
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	var reasoning string
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // the relay asks for one choice; an extra one is not the client's
		}
		raw := ch.Text
		if ch.Delta != nil {
			raw = ch.Delta.Content
			r := ch.Delta.ReasoningContent
			if isNull(r) {
				r = ch.Delta.Reasoning
			}
			b, ok := decodeString(r)
			if !ok {
				return p.malformed("choices[0] reasoning is not a string: %.120q", r)
			}
			reasoning += p.rjoiner.Add(b)
		}
		b, ok := decodeString(raw)
		if !ok {
			return p.malformed("choices[0] text is not a string: %.120q", raw)
		}
		ev.Text += p.joiner.Add(b)
		if ch.FinishReason != nil {
			ev.Finish = *ch.FinishReason
		}
		if ch.Delta != nil {
			for _, t := range ch.Delta.ToolCalls {
				d, err := p.chatTool(t)
				if err != nil {
					return p.malformed("%v in %.120q", err, data)
				}
				ev.Tools = append(ev.Tools, d)
			}
		}
	}
	if reasoning != "" {
		// A chunk's reasoning precedes its content upstream; PumpText
		// writes an event's Reasoning before its Text.
		ev.Reasoning = []stream.ReasoningDelta{{Kind: stream.ReasoningText, Text: reasoning}}
	}
	p.timing(ev.Text != "" || len(ev.Tools) > 0 || len(ev.Reasoning) > 0)
	return ev, true, false, nil
}

// isNull: a field absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// timing observes TTFT and ITL as the relay sees them, at output (text or a
// tool call) that arrived.
func (p *parser) timing(arrived bool) {
	if !arrived {
		return
	}
	s, now := p.s, time.Now()
	if p.firstAt.IsZero() {
		p.firstAt = now
		s.m.ttft.WithLabelValues(s.up.label).Observe(now.Sub(s.start).Seconds())
	} else {
		s.m.itl.WithLabelValues(s.up.label).Observe(now.Sub(p.lastAt).Seconds())
	}
	p.lastAt = now
}

func (p *parser) malformed(format string, args ...any) (stream.TextEvent, bool, bool, error) {
	p.s.m.errors.WithLabelValues(p.s.up.label, KindMalformed).Inc()
	return stream.TextEvent{}, false, false, fmt.Errorf("%w: %s: "+format, append([]any{stream.ErrUpstreamMalformed, p.s.up.label}, args...)...)
}

// decodeString decodes a JSON string (or null, as "") into WTF-8: raw bytes
// are kept as they are, even where they are not UTF-8, and an unpaired
// surrogate escape becomes its three-byte form, so a TextJoiner can join a
// character an upstream split across two chunks.
func decodeString(raw json.RawMessage) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return in, true
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(in) {
			return nil, false
		}
		i++
		switch in[i] {
		case '"', '\\', '/':
			out = append(out, in[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(in[i+1:])
			if !ok {
				return nil, false
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(in)+0 && in[i+1] == '\\' && in[i+2] == 'u' {
				if lo, ok := hex4(in[i+3:]); ok && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			out = appendWTF8(out, r)
		default:
			return nil, false
		}
	}
	return out, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// appendWTF8 is utf8.AppendRune that also encodes surrogates (three bytes).
func appendWTF8(b []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(b, byte(r))
	case r < 0x800:
		return append(b, 0xC0|byte(r>>6), 0x80|byte(r)&0x3F)
	case r < 0x10000:
		return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return append(b, 0xF0|byte(r>>18), 0x80|byte(r>>12)&0x3F, 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}
