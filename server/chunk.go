package server

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// chunkFormat builds the JSON payloads of one streaming response without
// encoding/json: the fields that never change (id, object, created, model)
// are rendered once into head, so a content chunk costs one string escape.
//
//	head                                   body                          tail
//	{"id":"chatcmpl-…",…,"choices":[{"index":0,"delta":{"content":"Hi"}},"logprobs":null,"finish_reason":null}]}
type chunkFormat struct {
	chat     bool
	head     []byte // up to and including `"choices":[{"index":0,`
	usageHd  []byte // up to and including `"choices":[],`
	openText []byte // `"delta":{"content":` or `"text":`
	tail     []byte // closes the choice after the text

	lp *logprobFormat // nil unless the request asked for logprobs (logprobs.go)
	// soFar, when set, is the usage so far, which every choice chunk then
	// carries (vLLM's continuous_usage_stats).
	soFar   func() Usage
	scratch []byte
}

// withUsage is payload with the usage so far when the stream asked for it
// on every chunk and payload is a choice chunk (not the usage chunk, an
// error or [DONE]); the result is valid until the next call.
func (f *chunkFormat) withUsage(payload []byte) []byte {
	if f.soFar == nil || !bytes.HasPrefix(payload, f.head) || payload[len(payload)-1] != '}' {
		return payload
	}
	dst := append(f.scratch[:0], payload[:len(payload)-1]...)
	dst = append(dst, `,"usage":`...)
	f.scratch = append(f.soFar().appendJSON(dst), '}')
	return f.scratch
}

func newChunkFormat(chat bool, id, model string, created int64) chunkFormat {
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	var h []byte
	h = append(h, `{"id":`...)
	h = appendJSONString(h, id)
	h = append(h, `,"object":"`...)
	h = append(h, object...)
	h = append(h, `","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, model)
	f := chunkFormat{chat: chat}
	f.usageHd = append(append([]byte(nil), h...), `,"choices":[],`...)
	f.head = append(h, `,"choices":[{"index":0,`...)
	if chat {
		f.openText = []byte(`"delta":{"content":`)
		f.tail = []byte(`},"logprobs":null,"finish_reason":null}]}`)
	} else {
		f.openText = []byte(`"text":`)
		f.tail = []byte(`,"logprobs":null,"finish_reason":null}]}`)
	}
	return f
}

// content appends a chunk carrying text.
func (f *chunkFormat) content(dst []byte, text string) []byte {
	dst = append(dst, f.head...)
	dst = append(dst, f.openText...)
	dst = appendJSONString(dst, text)
	return append(dst, f.tail...)
}

// reasoning appends a chat chunk carrying reasoning text, under both
// names clients read: reasoning_content (DeepSeek's, vLLM's) and
// reasoning (OpenRouter's, vLLM's newer).
func (f *chunkFormat) reasoning(dst []byte, text string) []byte {
	dst = append(dst, f.head...)
	dst = append(dst, `"delta":{"reasoning_content":`...)
	dst = appendJSONString(dst, text)
	dst = append(dst, `,"reasoning":`...)
	dst = appendJSONString(dst, text)
	return append(dst, f.tail...)
}

// role appends the chat stream's first chunk, which names the speaker.
func (f *chunkFormat) role(dst []byte) []byte {
	dst = append(dst, f.head...)
	return append(dst, `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`...)
}

// finish appends the chunk carrying finish_reason.
func (f *chunkFormat) finish(dst []byte, reason string) []byte {
	dst = append(dst, f.head...)
	if f.chat {
		dst = append(dst, `"delta":{}`...)
	} else {
		dst = append(dst, `"text":""`...)
	}
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	dst = appendJSONString(dst, reason)
	return append(dst, `}]}`...)
}

// usage appends the stream_options.include_usage chunk (empty choices).
func (f *chunkFormat) usage(dst []byte, u Usage) []byte {
	dst = append(dst, f.usageHd...)
	dst = append(dst, `"usage":`...)
	return append(u.appendJSON(dst), '}')
}

// Usage is OpenAI's token accounting.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CachedTokens     int `json:"-"`
	ReasoningTokens  int `json:"-"` // of the completion's tokens
}

func (u Usage) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.TotalTokens), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CachedTokens), 10)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.ReasoningTokens), 10)
	return append(dst, `}}`...)
}

// MarshalJSON keeps non-streaming responses identical to the streamed usage chunk.
func (u Usage) MarshalJSON() ([]byte, error) { return u.appendJSON(nil), nil }

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD
// (the detokenizer never produces it); U+2028 and U+2029 are escaped so the
// payload is also valid JavaScript.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			switch r {
			case utf8.RuneError:
				dst = append(dst, `\ufffd`...)
			case '\u2028':
				dst = append(dst, `\u2028`...)
			default:
				dst = append(dst, `\u2029`...)
			}
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
