package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The stream checker: every stream the soak completed is parsed event by
// event and must be well formed for its wire shape. What each shape must
// show:
//
//	openai (chat, completions)  id: 1, 2, 3, ... strictly increasing; every
//	                            data a JSON object; one finish chunk, then
//	                            the usage chunk; or one in-band error; then
//	                            data: [DONE], last
//	responses                   sequence_number 0, 1, 2, ...; one terminal
//	                            event (completed, incomplete, failed), last;
//	                            output_text.done equal to the deltas joined
//	messages (Anthropic)        message_start first; message_stop (or an
//	                            error event) last, once
//
// and for all: valid UTF-8 throughout, no stop string in the text, usage
// consistent with the text (output tokens at most max_tokens, exactly
// max_tokens on a length finish, at least one when there is text, no more
// content events than output tokens and the held-back tail's one, total =
// prompt + output).

// Proto names a wire shape.
type Proto string

const (
	ProtoOpenAI    Proto = "openai"
	ProtoResponses Proto = "responses"
	ProtoMessages  Proto = "messages"
	ProtoGRPC      Proto = "grpc" // checked as it is read (grpc.go)
)

// Expect is what a stream's request asked for.
type Expect struct {
	MaxTokens int
	Stops     []string
}

// Checked is a well-formed stream's content.
type Checked struct {
	Text       string
	Finish     string // stop, length, ... ("" when an error ended it)
	ErrCode    string // the in-band error's code, if one ended it
	Events     int
	LastID     int64 // openai: the last event id
	OutTokens  int   // from usage; -1 when the stream carried none
	TextEvents int
}

// event is one SSE event.
type event struct {
	id      int64
	hasID   bool
	name    string
	data    string
	comment bool
}

// parseSSE splits raw into events; keep-alive comments are dropped. A
// stream must end with a complete event: a torn tail is malformed.
func parseSSE(raw []byte) ([]event, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("invalid UTF-8 in the stream")
	}
	var out []event
	var cur event
	open := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if open {
				out = append(out, cur)
			}
			cur, open = event{}, false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad id line %q", line)
			}
			cur.id, cur.hasID, open = id, true, true
		case strings.HasPrefix(line, "event: "):
			cur.name, open = line[7:], true
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				return nil, errors.New("an event with two data lines")
			}
			cur.data, open = line[6:], true
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	if open {
		return nil, errors.New("the stream ends inside an event")
	}
	return out, sc.Err()
}

// Check parses raw as a stream of proto and reports what is wrong with it.
func Check(proto Proto, raw []byte, want Expect) (Checked, error) {
	evs, err := parseSSE(raw)
	if err != nil {
		return Checked{}, err
	}
	if len(evs) == 0 {
		return Checked{}, errors.New("no events")
	}
	if proto != ProtoOpenAI && evs[0].hasID { // a resumable Messages or Responses stream
		for i, ev := range evs {
			if !ev.hasID || (i > 0 && ev.id <= evs[i-1].id) {
				return Checked{}, fmt.Errorf("event %d: id %d after %d", i, ev.id, evs[max(i-1, 0)].id)
			}
		}
	}
	var c Checked
	switch proto {
	case ProtoOpenAI:
		err = checkOpenAI(evs, &c)
	case ProtoResponses:
		err = checkResponses(evs, &c)
	case ProtoMessages:
		err = checkMessages(evs, &c)
	default:
		err = fmt.Errorf("unknown proto %q", proto)
	}
	if err != nil {
		return c, err
	}
	c.Events = len(evs)
	return c, checkContent(c, want)
}

func checkContent(c Checked, want Expect) error {
	for _, s := range want.Stops {
		if strings.Contains(c.Text, s) {
			return fmt.Errorf("stop string %q leaked into the text", s)
		}
	}
	if c.OutTokens < 0 {
		return nil
	}
	switch {
	case want.MaxTokens > 0 && c.OutTokens > want.MaxTokens:
		return fmt.Errorf("usage: %d output tokens, max_tokens %d", c.OutTokens, want.MaxTokens)
	case (c.Finish == "length" || c.Finish == "max_tokens") && want.MaxTokens > 0 && c.OutTokens != want.MaxTokens:
		return fmt.Errorf("usage: a length finish after %d tokens, max_tokens %d", c.OutTokens, want.MaxTokens)
	case c.Text != "" && c.OutTokens == 0:
		return errors.New("usage: text but no output tokens")
	case c.TextEvents > c.OutTokens+1:
		// One more than the tokens: text held back as a possible start of a
		// stop string (or an unfinished UTF-8 sequence) that never completed
		// goes out in an event of its own at the end.
		return fmt.Errorf("usage: %d text events from %d tokens", c.TextEvents, c.OutTokens)
	}
	return nil
}

type openAIChunk struct {
	Choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func checkOpenAI(evs []event, c *Checked) error {
	c.OutTokens = -1
	var text strings.Builder
	ended := false // a finish or an error was seen
	for i, ev := range evs {
		if !ev.hasID || (i > 0 && ev.id <= evs[i-1].id) {
			return fmt.Errorf("event %d: id %d after %d", i, ev.id, evs[max(i-1, 0)].id)
		}
		c.LastID = ev.id
		if ev.data == "[DONE]" {
			if i != len(evs)-1 {
				return fmt.Errorf("event %d: [DONE] is not last", i)
			}
			if !ended {
				return errors.New("[DONE] without a finish or an error")
			}
			return nil
		}
		var ch openAIChunk
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
			return fmt.Errorf("event %d: %v", i, err)
		}
		switch {
		case ch.Error != nil:
			if ended {
				return fmt.Errorf("event %d: an error after the end", i)
			}
			c.ErrCode, ended = ch.Error.Code, true
		case ch.Usage != nil:
			if c.Finish == "" || c.OutTokens >= 0 {
				return fmt.Errorf("event %d: usage before the finish, or twice", i)
			}
			if ch.Usage.Total != ch.Usage.Prompt+ch.Usage.Completion {
				return fmt.Errorf("event %d: usage total %d ≠ %d + %d", i, ch.Usage.Total, ch.Usage.Prompt, ch.Usage.Completion)
			}
			c.OutTokens = ch.Usage.Completion
		case len(ch.Choices) == 1:
			if ended {
				return fmt.Errorf("event %d: content after the end", i)
			}
			ch := ch.Choices[0]
			piece := ""
			if ch.Text != nil {
				piece = *ch.Text
			} else if ch.Delta != nil && ch.Delta.Content != nil {
				piece = *ch.Delta.Content
			}
			if piece != "" {
				c.TextEvents++
				text.WriteString(piece)
			}
			if ch.FinishReason != nil {
				c.Finish, ended = *ch.FinishReason, true
			}
		default:
			return fmt.Errorf("event %d: neither content, usage nor error: %s", i, ev.data)
		}
		c.Text = text.String()
	}
	return errors.New("no [DONE]")
}

func checkResponses(evs []event, c *Checked) error {
	c.OutTokens = -1
	var text strings.Builder
	for i, ev := range evs {
		var e struct {
			Type     string `json:"type"`
			Seq      *int   `json:"sequence_number"`
			Delta    string `json:"delta"`
			Text     string `json:"text"`
			Code     string `json:"code"`
			Response *struct {
				Status string `json:"status"`
				Usage  *struct {
					Input  int `json:"input_tokens"`
					Output int `json:"output_tokens"`
					Total  int `json:"total_tokens"`
				} `json:"usage"`
				Incomplete *struct {
					Reason string `json:"reason"`
				} `json:"incomplete_details"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			return fmt.Errorf("event %d: %v", i, err)
		}
		if e.Type != ev.name || e.Seq == nil || *e.Seq != i {
			return fmt.Errorf("event %d: type %q under event %q, sequence_number %v", i, e.Type, ev.name, e.Seq)
		}
		last := i == len(evs)-1
		switch e.Type {
		case "response.output_text.delta":
			c.TextEvents++
			text.WriteString(e.Delta)
		case "response.output_text.done":
			if e.Text != text.String() {
				return fmt.Errorf("output_text.done %q ≠ the deltas %q", e.Text, text.String())
			}
		case "error":
			c.ErrCode = e.Code
		case "response.completed", "response.incomplete", "response.failed":
			if !last {
				return fmt.Errorf("event %d: %s is not last", i, e.Type)
			}
			c.Text = text.String()
			if e.Type == "response.failed" {
				if c.ErrCode == "" {
					return errors.New("response.failed without an error event")
				}
				return nil
			}
			c.Finish = "stop"
			if e.Type == "response.incomplete" {
				c.Finish = "length"
			}
			if e.Response == nil || e.Response.Usage == nil {
				return fmt.Errorf("%s without usage", e.Type)
			}
			u := e.Response.Usage
			if u.Total != u.Input+u.Output {
				return fmt.Errorf("usage total %d ≠ %d + %d", u.Total, u.Input, u.Output)
			}
			c.OutTokens = u.Output
			return nil
		}
	}
	return errors.New("no terminal event")
}

func checkMessages(evs []event, c *Checked) error {
	c.OutTokens = -1
	if evs[0].name != "message_start" {
		return fmt.Errorf("first event %q, want message_start", evs[0].name)
	}
	var text strings.Builder
	for i, ev := range evs {
		var e struct {
			Type  string `json:"type"`
			Delta *struct {
				Text       string  `json:"text"`
				StopReason *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *struct {
				Output int `json:"output_tokens"`
			} `json:"usage"`
			Error *struct {
				Type string `json:"type"`
				Code string `json:"code"` // Sluice's code beside Anthropic's type
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			return fmt.Errorf("event %d: %v", i, err)
		}
		if e.Type != ev.name {
			return fmt.Errorf("event %d: type %q under event %q", i, e.Type, ev.name)
		}
		last := i == len(evs)-1
		switch e.Type {
		case "content_block_delta":
			if e.Delta != nil && e.Delta.Text != "" {
				c.TextEvents++
				text.WriteString(e.Delta.Text)
			}
		case "message_delta":
			if e.Delta == nil || e.Delta.StopReason == nil || e.Usage == nil {
				return fmt.Errorf("event %d: message_delta without stop_reason or usage", i)
			}
			c.Finish, c.OutTokens = *e.Delta.StopReason, e.Usage.Output
		case "error", "message_stop":
			if !last {
				return fmt.Errorf("event %d: %s is not last", i, e.Type)
			}
			c.Text = text.String()
			if e.Type == "error" {
				c.ErrCode = "error"
				if e.Error != nil {
					c.ErrCode = cmp.Or(e.Error.Code, e.Error.Type)
				}
				return nil
			}
			if c.Finish == "" {
				return errors.New("message_stop without message_delta")
			}
			return nil
		}
	}
	return errors.New("no message_stop")
}

// CheckWhole checks a non-streaming response (a 200) of proto: valid UTF-8
// and JSON, one choice or text output, a finish, usage whose total adds up,
// and the same content rules as a stream's.
func CheckWhole(proto Proto, raw []byte, want Expect) (Checked, error) {
	if !utf8.Valid(raw) {
		return Checked{}, errors.New("invalid UTF-8 in the response")
	}
	var c Checked
	var err error
	switch proto {
	case ProtoOpenAI:
		var r struct {
			Choices []struct {
				Text    *string `json:"text"`
				Message *struct {
					Content *string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
				Total      int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err = json.Unmarshal(raw, &r); err != nil {
			return c, err
		}
		switch {
		case len(r.Choices) != 1:
			return c, fmt.Errorf("%d choices", len(r.Choices))
		case r.Usage == nil || r.Usage.Total != r.Usage.Prompt+r.Usage.Completion:
			return c, fmt.Errorf("usage %+v does not add up", r.Usage)
		case r.Choices[0].FinishReason == "":
			return c, errors.New("no finish_reason")
		}
		ch := r.Choices[0]
		if ch.Text != nil {
			c.Text = *ch.Text
		} else if ch.Message != nil && ch.Message.Content != nil {
			c.Text = *ch.Message.Content
		}
		c.Finish, c.OutTokens = ch.FinishReason, r.Usage.Completion
	case ProtoResponses:
		var r struct {
			Status string `json:"status"`
			Output []struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
			Usage *struct {
				Input  int `json:"input_tokens"`
				Output int `json:"output_tokens"`
				Total  int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err = json.Unmarshal(raw, &r); err != nil {
			return c, err
		}
		switch {
		case r.Status != "completed" && r.Status != "incomplete":
			return c, fmt.Errorf("status %q in a 200", r.Status)
		case r.Usage == nil || r.Usage.Total != r.Usage.Input+r.Usage.Output:
			return c, fmt.Errorf("usage %+v does not add up", r.Usage)
		}
		for _, o := range r.Output {
			for _, p := range o.Content {
				c.Text += p.Text
			}
		}
		c.Finish, c.OutTokens = "stop", r.Usage.Output
		if r.Status == "incomplete" {
			c.Finish = "length"
		}
	case ProtoMessages:
		var r struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
			Usage      *struct {
				Output int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err = json.Unmarshal(raw, &r); err != nil {
			return c, err
		}
		if r.Type != "message" || r.StopReason == "" || r.Usage == nil {
			return c, fmt.Errorf("type %q, stop_reason %q, usage %v", r.Type, r.StopReason, r.Usage)
		}
		for _, p := range r.Content {
			c.Text += p.Text
		}
		c.Finish, c.OutTokens = r.StopReason, r.Usage.Output
	default:
		return c, fmt.Errorf("no whole-response check for %q", proto)
	}
	return c, checkContent(c, want)
}
