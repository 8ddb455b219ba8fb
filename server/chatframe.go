package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// chatAPI is OpenAI's chat (or completions) as the HTTP driver serves it
// (httpedge.Env.Serve): ParseRequest is its parser, chatFramer its framer,
// and several choices are choicesSource and choicesFramer (choices.go).
// Chat and completions are one API to a resume, whose id names either.
func (s *Server) chatAPI(chat bool) *httpedge.API {
	api := &httpedge.API{Name: "openai", Prefix: "cmpl-", Refuse: writeError, EventIDs: true, Choices: s.newChoices}
	if chat {
		api.Prefix = "chatcmpl-"
	}
	api.Parse = func(_ *http.Request, body []byte) (*httpedge.Parsed, error) {
		g, err := ParseRequest(body, chat)
		if err != nil {
			return nil, err
		}
		return &httpedge.Parsed{Gen: g, Frame: func(h httpedge.Head) httpedge.Framer { return newChatFramer(g, h) }}, nil
	}
	return api
}

// chatFramer is the httpedge.Framer of one chat or completions choice: its
// chunks on a stream (an sseWriter per connection, over the chunk format
// that lasts the stream), or the completion object of a whole response
// (a collector). Relay mode frames an upstream's choice with it too
// (relayedChat, relay.go).
type chatFramer struct {
	g      *stream.GenRequest
	h      httpedge.Head
	echo   string // completions' echo: the prompt's text, before the completion
	format chunkFormat
	sw     *sseWriter // the connection's writer; nil: a whole response
	col    collector
	calls  wholeCalls // a whole response's tool calls
	// relayed: the choice is an upstream's, which has no prompt of ours
	// (no Backend, no prompt tokens or logprobs: the relay refuses the
	// fields that would need them) and reports its own usage.
	relayed bool
	cached  int // prompt tokens the first submission found in the prefix cache
	// reasoning is a whole response's reasoning text (a stream sends it).
	reasoning []byte
	body      []byte
	// echoDue: a stream's echo with logprobs waits for the prompt's
	// logprobs, which are there once a token came or the sequence ended.
	echoDue bool
	// generated counts the tokens framed so far, for continuous usage.
	generated int
}

func newChatFramer(g *stream.GenRequest, h httpedge.Head) *chatFramer {
	f := &chatFramer{g: g, h: h, format: newChunkFormat(g.Chat, h.ID, h.Model, time.Now().Unix())}
	f.format.lp = newLogprobFormat(h.Backend.Tokenizer, g)
	switch {
	case g.Echo && g.Chat:
		f.echo = chatEcho(g) // echo.go
	case g.Echo:
		f.echo = echoText(h.Backend, h.Req)
	}
	if g.ContinuousUsage {
		f.format.soFar = func() Usage {
			p := f.h.PromptTokens()
			return Usage{PromptTokens: p, CompletionTokens: f.generated, TotalTokens: p + f.generated}
		}
	}
	return f
}

// promptLogprobs are the prompt's logprobs the engine computed, nil when
// not asked for or not complete (a sequence that failed in its prefill).
func (f *chatFramer) promptLogprobs() []*engine.Logprob {
	pl := f.h.Req.PromptLogprobs
	if pl == nil || len(pl.Logprobs) != len(f.h.Req.Prompt) {
		return nil
	}
	for _, lp := range pl.Logprobs[1:] {
		if lp == nil {
			return nil
		}
	}
	return pl.Logprobs
}

// writeEcho sends a stream's echo chunk: the prompt's text and, when the
// request asked for logprobs, its tokens' logprobs (echoLogprobs).
func (f *chatFramer) writeEcho() {
	f.echoDue = false
	plps := f.promptLogprobs()
	if plps == nil {
		_ = f.sw.Text(f.echo, nil)
		return
	}
	dst := append(f.sw.payload[:0], f.format.head...)
	dst = append(dst, f.format.openText...)
	dst = appendJSONString(dst, f.echo)
	dst = append(dst, `,"logprobs":`...)
	dst = f.format.lp.appendEchoed(dst, f.h.Req.Prompt, plps, nil, nil)
	f.sw.payload = append(dst, `,"finish_reason":null}]}`...)
	f.sw.event(f.sw.payload)
}

// Attach implements httpedge.Framer.
func (f *chatFramer) Attach(sse *httpedge.SSE) {
	f.sw = nil
	if sse != nil {
		f.sw = &sseWriter{SSE: sse, ctx: sse.Context(), format: &f.format}
	}
}

// Start implements httpedge.Framer: a stream's role chunk (chat) or its
// echoed prompt (completions).
func (f *chatFramer) Start() {
	switch {
	case f.sw == nil:
	case f.g.Chat:
		f.sw.role()
		if f.echo != "" {
			_ = f.sw.Text(f.echo, nil)
		}
	case f.g.Echo && f.g.Logprobs:
		f.echoDue = true // with the prompt's logprobs, once they are computed
	case f.g.Echo:
		_ = f.sw.Text(f.echo, nil)
	}
}

// Pumped implements httpedge.Pumper: the cached prompt tokens are the first
// submission's (a resumed one finds its own earlier output cached too).
func (f *chatFramer) Pumped(end stream.Ending) {
	if f.cached == 0 {
		f.cached = end.CachedTokens
	}
}

// End implements httpedge.Framer: a stream's finish and usage chunks, or
// its in-band error, then [DONE]; a whole response's completion object.
// A local stream reports the first submission's cached tokens (Pumped), an
// upstream's what it reported last; a producer that counted nothing has
// no usage chunk.
func (f *chatFramer) End(end stream.Ending) {
	u := usageOf(end)
	if f.sw != nil && !f.relayed {
		u.CachedTokens = f.cached
	}
	f.end(end.Finish, end.Err, u, f.g.IncludeUsage && end.Usage, end.IDs)
}

// usageOf is the OpenAI usage of a generation's ending.
func usageOf(end stream.Ending) Usage {
	return Usage{PromptTokens: end.PromptTokens, CompletionTokens: end.CompletionTokens,
		TotalTokens: end.PromptTokens + end.CompletionTokens, CachedTokens: end.CachedTokens, ReasoningTokens: end.ReasoningTokens}
}

// end writes (or, for a whole response, builds) the ending from the
// finish or error and the usage, local or an upstream's; withUsage: a
// stream's usage chunk goes out; ids are the tokens whose logprobs a whole
// response shows.
func (f *chatFramer) end(finish string, err error, u Usage, withUsage bool, ids []int32) {
	if f.sw == nil {
		body := completionBody(f.g.Chat, f.h.ID, f.h.Model, f.echo+string(f.col.text), finish, u)
		if m := body.Choices[0].Message; m != nil {
			if len(f.calls.calls) > 0 {
				m.ToolCalls = f.calls.calls
			}
			m.ReasoningContent, m.Reasoning = string(f.reasoning), string(f.reasoning)
		}
		if f.relayed {
			f.body, _ = json.Marshal(body) // always marshals
			return
		}
		body.Choices[0].Logprobs = f.logprobsJSON(ids)
		f.body, _ = json.Marshal(f.withPromptLogprobs(body)) // always marshals
		return
	}
	if f.echoDue && err == nil {
		f.writeEcho()
	}
	if err != nil {
		f.sw.error(err)
	} else {
		f.sw.finish(finish)
		if withUsage {
			f.sw.usage(u)
		}
	}
	f.sw.done()
}

// Body implements httpedge.Framer.
func (f *chatFramer) Body() []byte { return f.body }

func (f *chatFramer) Text(text string, ids []int32) error {
	if f.sw == nil {
		return f.col.Text(text, ids)
	}
	if f.echoDue {
		f.writeEcho()
	}
	f.generated += len(ids)
	return f.sw.Text(text, ids)
}

// logprobsJSON is a whole response's choice logprobs: the prompt's first
// when echoed (completions' echo with logprobs).
func (f *chatFramer) logprobsJSON(ids []int32) any {
	lf := newLogprobFormat(f.h.Backend.Tokenizer, f.g)
	plps := f.promptLogprobs()
	if lf == nil || !f.g.Echo || f.g.Chat || plps == nil { // chat echoes no prompt logprobs (vLLM)
		return f.col.logprobsJSON(lf, ids)
	}
	n := min(len(ids), len(f.col.lps))
	return json.RawMessage(lf.appendEchoed(nil, f.h.Req.Prompt, plps, ids[:n], f.col.lps[:n]))
}

// withPromptLogprobs adds vLLM's prompt_logprobs to a whole response when
// asked: beside the choices on chat, in the choice on completions.
func (f *chatFramer) withPromptLogprobs(body *completionResponse) any {
	if !f.g.PromptLogprobs {
		return body
	}
	var raw json.RawMessage = []byte("null") // the prefill did not finish: nothing to show
	if plps := f.promptLogprobs(); plps != nil {
		raw = newTokenFormat(f.h.Backend.Tokenizer, f.g).appendPromptLogprobs(nil, f.h.Req.Prompt, plps, f.g.PromptTopLogprobs)
	}
	if f.g.Chat {
		return struct {
			*completionResponse
			PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
		}{body, raw}
	}
	type choiceWith struct {
		choice
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	}
	return struct {
		*completionResponse
		Choices []choiceWith `json:"choices"` // shadows the embedded choices
	}{body, []choiceWith{{body.Choices[0], raw}}}
}

// Reasoning implements stream.ReasoningEmitter.
func (f *chatFramer) Reasoning(text string) error {
	if f.sw == nil {
		f.reasoning = append(f.reasoning, text...)
		return nil
	}
	return f.sw.Reasoning(text)
}

func (f *chatFramer) Logprobs(lps []engine.Logprob) {
	if f.sw == nil {
		f.col.Logprobs(lps)
		return
	}
	f.sw.Logprobs(lps)
}

func (f *chatFramer) ToolCall(d stream.ToolCallDelta) error {
	if f.sw == nil {
		f.calls.add(d)
		return nil
	}
	return f.sw.ToolCall(d)
}

// wholeCalls gathers a whole response's tool calls by their deltas' index:
// an upstream may interleave the deltas of parallel calls, where the local
// parse sends each call's whole.
type wholeCalls struct {
	calls []stream.WireToolCall
	at    map[int]int // delta index -> calls[i]
}

func (c *wholeCalls) add(d stream.ToolCallDelta) {
	i, ok := c.at[d.Index]
	if !ok {
		if c.at == nil {
			c.at = map[int]int{}
		}
		var tc stream.WireToolCall
		tc.ID, tc.Type, tc.Function.Name = d.ID, "function", d.Name
		i = len(c.calls)
		c.at[d.Index] = i
		c.calls = append(c.calls, tc)
	}
	c.calls[i].Function.Arguments += d.Arguments
}

func (f *chatFramer) KeepAlive() error {
	if f.sw == nil {
		return nil
	}
	return f.sw.KeepAlive()
}

func (f *chatFramer) Flush() error {
	if f.sw == nil {
		return nil
	}
	return f.sw.Flush()
}
