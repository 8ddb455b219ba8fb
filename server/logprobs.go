package server

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// logprobFormat renders chat logprobs as OpenAI does, one entry per token:
//
//	{"content":[{"token":" Paris","logprob":-0.031,"bytes":[32,80,97,114,105,115],
//	             "top_logprobs":[{"token":" Paris","logprob":-0.031,"bytes":[…]},…]}],"refusal":null}
//
// token is the token's own text (a piece of a character shows as U+FFFD,
// as vLLM shows it); bytes are its exact bytes, so a client can join split
// characters. The values are the model's distribution before sampling
// transforms (engine.Logprob).
//
// Completions have their own, older shape (appendCompletion).
type logprobFormat struct {
	bytes  func(int32) []byte
	top    int  // alternatives per token, 0 to 20
	chat   bool // the chat shape, else the completions one
	offset int  // completions: characters of text before the next token
}

// newLogprobFormat is nil when the request did not ask for logprobs.
func newLogprobFormat(tok stream.Tokenizer, g *stream.GenRequest) *logprobFormat {
	if !g.Logprobs {
		return nil
	}
	return newTokenFormat(tok, g)
}

// newTokenFormat renders tokens for g whether or not it asked for their
// logprobs (prompt_logprobs alone).
func newTokenFormat(tok stream.Tokenizer, g *stream.GenRequest) *logprobFormat {
	f := &logprobFormat{top: g.TopLogprobs, chat: g.Chat, bytes: func(int32) []byte { return nil }}
	if tb, ok := tok.(stream.TokenByter); ok {
		f.bytes = tb.TokenBytes
	}
	return f
}

// appendContent appends {"content":[…],"refusal":null} for ids and their logprobs.
func (f *logprobFormat) appendContent(dst []byte, ids []int32, lps []engine.Logprob) []byte {
	dst = append(dst, `{"content":[`...)
	for i, lp := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = f.appendEntry(dst, ids[i], lp.Logprob)
		dst = append(dst[:len(dst)-1], `,"top_logprobs":[`...)
		for j, alt := range lp.Top {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = f.appendEntry(dst, alt.ID, alt.Logprob)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, `],"refusal":null}`...)
}

// appendCompletion appends the completions shape for ids:
//
//	{"tokens":[" Paris"],"token_logprobs":[-0.03],"top_logprobs":[{" Paris":-0.03," Lyon":-3.2}],"text_offset":[0]}
//
// Each top_logprobs map holds the sampled token and the alternatives asked
// for (vLLM's reading of logprobs N); text_offset counts characters from
// the start of the completion, continuing across a stream's chunks.
func (f *logprobFormat) appendCompletion(dst []byte, ids []int32, lps []engine.Logprob) []byte {
	return f.appendCompletionOf(dst, ids, func(i int) *engine.Logprob { return &lps[i] })
}

// appendEchoed appends the completions shape for an echoed prompt's tokens
// and then ids: a prompt entry without a Logprob (the first token's) is
// null in token_logprobs and top_logprobs, as OpenAI's legacy API and vLLM
// give it.
func (f *logprobFormat) appendEchoed(dst []byte, prompt []int32, plps []*engine.Logprob, ids []int32, lps []engine.Logprob) []byte {
	all := append(slices.Clip(prompt), ids...)
	return f.appendCompletionOf(dst, all, func(i int) *engine.Logprob {
		if i < len(prompt) {
			if i < len(plps) {
				return plps[i]
			}
			return nil
		}
		return &lps[i-len(prompt)]
	})
}

// appendCompletionOf is appendCompletion over lp(i), the Logprob of ids[i]
// or nil (null). A prompt Logprob may hold more alternatives than this
// request's logprobs N (prompt_logprobs asked for more): N are shown.
func (f *logprobFormat) appendCompletionOf(dst []byte, ids []int32, lp func(int) *engine.Logprob) []byte {
	tokens := make([]string, len(ids))
	for i, id := range ids {
		tokens[i] = f.text(id)
	}
	dst = append(dst, `{"tokens":[`...)
	for i, s := range tokens {
		dst = appendSep(dst, i)
		dst = appendJSONString(dst, s)
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := range ids {
		dst = appendSep(dst, i)
		if l := lp(i); l != nil {
			dst = appendLogprob(dst, l.Logprob)
		} else {
			dst = append(dst, "null"...)
		}
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := range ids {
		dst = appendSep(dst, i)
		l := lp(i)
		if l == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '{')
		dst = appendJSONString(dst, tokens[i])
		dst = append(dst, ':')
		dst = appendLogprob(dst, l.Logprob)
		for _, alt := range l.Top[:min(len(l.Top), f.top)] {
			if alt.ID == ids[i] {
				continue
			}
			dst = append(dst, ',')
			dst = appendJSONString(dst, f.text(alt.ID))
			dst = append(dst, ':')
			dst = appendLogprob(dst, alt.Logprob)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"text_offset":[`...)
	for i, s := range tokens {
		dst = appendSep(dst, i)
		dst = strconv.AppendInt(dst, int64(f.offset), 10)
		f.offset += utf8.RuneCountInString(s)
	}
	return append(dst, "]}"...)
}

// appendPromptLogprobs appends vLLM's prompt_logprobs: one entry per prompt
// token, null for the first, else a map from token id to its logprob, rank
// and text, the prompt's own token first and then the k best others:
//
//	[null,{"1782":{"logprob":-3.1,"rank":4,"decoded_token":" cat"},"253":{"logprob":-1.2,"rank":1,"decoded_token":" dog"}},…]
func (f *logprobFormat) appendPromptLogprobs(dst []byte, prompt []int32, plps []*engine.Logprob, k int) []byte {
	dst = append(dst, '[')
	for i, id := range prompt {
		dst = appendSep(dst, i)
		var lp *engine.Logprob
		if i < len(plps) {
			lp = plps[i]
		}
		if lp == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '{')
		dst = f.appendPromptEntry(dst, id, lp.Logprob, lp.Rank)
		for r, alt := range lp.Top[:min(len(lp.Top), k)] {
			if alt.ID != id {
				dst = append(dst, ',')
				dst = f.appendPromptEntry(dst, alt.ID, alt.Logprob, r+1)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func (f *logprobFormat) appendPromptEntry(dst []byte, id int32, logprob float32, rank int) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `":{"logprob":`...)
	dst = appendLogprob(dst, logprob)
	dst = append(dst, `,"rank":`...)
	dst = strconv.AppendInt(dst, int64(rank), 10)
	dst = append(dst, `,"decoded_token":`...)
	dst = appendJSONString(dst, f.text(id))
	return append(dst, '}')
}

// appendLogprobs appends the shape of the request's endpoint.
func (f *logprobFormat) appendLogprobs(dst []byte, ids []int32, lps []engine.Logprob) []byte {
	if f.chat {
		return f.appendContent(dst, ids, lps)
	}
	return f.appendCompletion(dst, ids, lps)
}

func (f *logprobFormat) text(id int32) string {
	return stream.TokenText(f.bytes(id))
}

func appendSep(dst []byte, i int) []byte {
	if i > 0 {
		return append(dst, ',')
	}
	return dst
}

// appendLogprob appends a logprob. A token a constraint forbids has -Inf,
// which JSON cannot carry: OpenAI's stand-in for "impossible" is -9999.
func appendLogprob(dst []byte, logprob float32) []byte {
	v := float64(logprob)
	if math.IsInf(v, -1) || v < -9999 {
		v = -9999
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 32)
}

// appendEntry appends {"token":…,"logprob":…,"bytes":[…]}.
func (f *logprobFormat) appendEntry(dst []byte, id int32, logprob float32) []byte {
	b := f.bytes(id)
	dst = append(dst, `{"token":`...)
	dst = appendJSONString(dst, f.text(id))
	dst = append(dst, `,"logprob":`...)
	dst = appendLogprob(dst, logprob)
	dst = append(dst, `,"bytes":[`...)
	for i, c := range b {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(c), 10)
	}
	return append(dst, "]}"...)
}

// logprobParams reads chat's logprobs (a boolean) and top_logprobs. The
// completions shape (logprobs as a count, with text offsets) is not served
// yet and is refused, as are logprobs beside tools, whose calls are not
// text a token's logprob could be attached to.
func (wr *wireRequest) logprobParams(chat bool, p *stream.Params) error {
	if !httpedge.Present(wr.Logprobs) {
		if wr.TopLogprobs != nil && *wr.TopLogprobs > 0 {
			return stream.InvalidParam("top_logprobs", "top_logprobs needs logprobs: true")
		}
		return nil
	}
	if !chat {
		return wr.completionLogprobs(p)
	}
	var on bool
	top := wr.TopLogprobs
	if err := json.Unmarshal(wr.Logprobs, &on); err != nil {
		// Clients written for completions send chat the count there, as
		// llama-server accepts it: logprobs N is logprobs true with N
		// alternatives.
		var n int
		if json.Unmarshal(wr.Logprobs, &n) != nil {
			return stream.InvalidParam("logprobs", "logprobs: expected a boolean or a number of alternatives (0-%d)", engine.MaxTopLogprobs)
		}
		if n < 0 || n > engine.MaxTopLogprobs {
			return stream.InvalidParam("logprobs", "logprobs %d: the number of alternatives must be 0-%d", n, engine.MaxTopLogprobs)
		}
		if top != nil && *top != n {
			return stream.InvalidParam("top_logprobs", "top_logprobs %d contradicts logprobs %d", *top, n)
		}
		on, top = true, &n
	}
	if on && httpedge.Present(wr.Tools) {
		return httpedge.Unsupported("logprobs", "logprobs together with tools are not supported")
	}
	p.Logprobs, p.TopLogprobs = &on, top
	return nil
}

// Logprobs implements stream.LogprobEmitter: they go out with the next Text.
func (s *sseWriter) Logprobs(lps []engine.Logprob) { s.lps = append(s.lps[:0], lps...) }

// textLogprobs sends one content chunk carrying text (possibly empty: a
// token whose text is held back still has its logprob) and the logprobs of
// ids.
func (s *sseWriter) textLogprobs(text string, ids []int32) error {
	f := s.format
	if f.lp == nil || len(ids) != len(s.lps) { // not asked for; Pump never misaligns them
		s.lps = s.lps[:0]
		return s.Text(text, ids)
	}
	dst := append(s.payload[:0], f.head...)
	dst = append(dst, f.openText...)
	dst = appendJSONString(dst, text)
	if f.chat {
		dst = append(dst, '}') // closes the delta
	}
	dst = append(dst, `,"logprobs":`...)
	dst = f.lp.appendLogprobs(dst, ids, s.lps)
	s.payload = append(dst, `,"finish_reason":null}]}`...)
	s.lps = s.lps[:0]
	s.event(s.payload)
	return s.Err()
}

// Logprobs implements stream.LogprobEmitter for a whole response.
func (c *collector) Logprobs(lps []engine.Logprob) { c.lps = append(c.lps, lps...) }

// logprobsJSON is the choice's logprobs object, nil when not asked for;
// ids are every token the TextStream consumed, which Pump gave c the
// logprobs of, in order.
func (c *collector) logprobsJSON(f *logprobFormat, ids []int32) any {
	if f == nil {
		return nil
	}
	n := min(len(ids), len(c.lps))
	return json.RawMessage(f.appendLogprobs(nil, ids[:n], c.lps[:n]))
}

// completionLogprobs reads completions' logprobs: how many alternatives
// (0 to 5, OpenAI's bound) beside the sampled token. top_logprobs belongs
// to chat.
func (wr *wireRequest) completionLogprobs(p *stream.Params) error {
	var n int
	if err := json.Unmarshal(wr.Logprobs, &n); err != nil || n < 0 || n > 5 {
		return stream.InvalidParam("logprobs", "logprobs must be an integer between 0 and 5")
	}
	if wr.TopLogprobs != nil {
		return stream.InvalidParam("top_logprobs", "top_logprobs is a chat field; completions take logprobs N")
	}
	on := true
	p.Logprobs, p.TopLogprobs = &on, &n
	return nil
}
