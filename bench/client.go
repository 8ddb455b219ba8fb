package bench

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
	"strings"
	"sync/atomic"
	"time"
)

// Client sends streaming completions to one OpenAI-compatible server and
// times them. The zero value is not usable: set URL (and HTTP if the default
// transport's limits matter; NewHTTPClient gives one sized for load tests).
type Client struct {
	URL         string // server base, e.g. http://127.0.0.1:8080 (no /v1)
	HTTP        *http.Client
	Model       string  // sent as "model" when not empty
	APIKey      string  // sent as a bearer token when not empty
	Chat        bool    // /v1/chat/completions with one user message instead of /v1/completions
	Temperature float64 // 0 = greedy, so peers given the same prompt produce the same lengths
	IgnoreEOS   bool    // sends "ignore_eos": true (llama-server and vLLM honour it; Sluice ignores it)

	// Now reads the clock: once when a request is sent and once per SSE data
	// event received, nowhere else. Nil means time.Now.
	Now func() time.Time
}

// Request is one completion to send.
type Request struct {
	Prompt    string
	MaxTokens int
	// AbandonAfter > 0: hang up (close the connection) after this many
	// content events, as a user who closes the tab.
	AbandonAfter int
}

// Result is what one request measured. Times are offsets from Start.
type Result struct {
	Start time.Time
	// TTFT: sending the request to the first event carrying content
	// (a role-only chunk or a keep-alive comment is not content).
	TTFT time.Duration
	// ITL: every gap between consecutive content events, in order. A server
	// that coalesces several tokens into one event shows fewer, longer gaps.
	ITL []time.Duration
	// E2E: sending to the end of the stream ([DONE], an error, or hanging up).
	E2E time.Duration
	// PromptTokens and OutputTokens come from the usage chunk when the server
	// sends one (UsageReported); otherwise OutputTokens counts content events.
	PromptTokens, OutputTokens int
	UsageReported              bool
	ContentEvents              int
	Text                       string // the generated text, concatenated
	FinishReason               string
	Abandoned                  bool   // hung up on purpose after AbandonAfter events
	Cut                        bool   // cancelled by the run's deadline before its end (not a failure)
	Status                     int    // HTTP status (0 when no response)
	Err                        string // non-empty: the request failed (status, in-band error, broken stream)
}

// OK reports whether the request ran to its end without an error.
func (r *Result) OK() bool { return r.Err == "" && !r.Abandoned && !r.Cut }

// TPOT is the mean time per output token after the first:
// (last content event − first content event) / (output tokens − 1).
// Zero when fewer than two tokens came.
func (r *Result) TPOT() time.Duration {
	if r.OutputTokens < 2 || len(r.ITL) == 0 {
		return 0
	}
	var sum time.Duration
	for _, g := range r.ITL {
		sum += g
	}
	return sum / time.Duration(r.OutputTokens-1)
}

// NewHTTPClient returns a client whose transport keeps up to conns
// connections to one host alive and never asks for compression (a compressed
// event stream is buffered by design).
func NewHTTPClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns
	t.MaxIdleConnsPerHost = conns
	t.DisableCompression = true
	return &http.Client{Transport: t}
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) endpoint() string {
	base := strings.TrimRight(c.URL, "/")
	if c.Chat {
		return base + "/v1/chat/completions"
	}
	return base + "/v1/completions"
}

func (c *Client) body(r Request) ([]byte, error) {
	m := map[string]any{
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"max_tokens":     r.MaxTokens,
		"temperature":    c.Temperature,
	}
	if c.Chat {
		m["messages"] = []map[string]string{{"role": "user", "content": r.Prompt}}
	} else {
		m["prompt"] = r.Prompt
	}
	if c.Model != "" {
		m["model"] = c.Model
	}
	if c.IgnoreEOS {
		m["ignore_eos"] = true
	}
	return json.Marshal(m)
}

// Do sends r and reads its stream to the end. Failures are recorded in the
// Result, never returned: a load test counts them.
func (c *Client) Do(parent context.Context, r Request) (res Result) {
	body, err := c.body(r)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	ctx, cancel := context.WithCancel(parent)
	// On abandon, closing the unread body (deferred below) and cancelling
	// close the connection: the server sees the client leave.
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(), bytes.NewReader(body))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	// A keep-alive connection the server closes just as it is reused fails a
	// POST that never reached the server (llama-server's HTTP library closes
	// idle ones). With an idempotency key net/http may resend it on a new
	// connection; the resend's time stays inside TTFT.
	hreq.Header.Set("Idempotency-Key", strconv.FormatUint(requestSeq.Add(1), 10))
	if c.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res.Start = c.now()
	defer func() {
		// The caller's deadline, not the server, ended this request.
		if res.Err != "" && !res.Abandoned && ctx.Err() != nil && parent.Err() != nil {
			res.Cut, res.Err = true, ""
		}
	}()
	resp, err := hc.Do(hreq)
	if err != nil {
		res.E2E = c.now().Sub(res.Start)
		res.Err = err.Error()
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		res.E2E = c.now().Sub(res.Start)
		res.Err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return res
	}
	s := stream{res: &res, abandonAfter: r.AbandonAfter, now: c.now}
	s.read(resp.Body)
	return res
}

// stream folds one SSE response into a Result.
type stream struct {
	res          *Result
	abandonAfter int
	now          func() time.Time
	last         time.Time // previous content event
	text         strings.Builder
}

// requestSeq numbers requests for their idempotency keys.
var requestSeq atomic.Uint64

// errStop ends reading early without being a failure (abandon, [DONE]).
var errStop = errors.New("stop")

func (s *stream) read(body io.Reader) {
	err := ReadEvents(body, s.event)
	switch {
	case errors.Is(err, errStop):
	case err != nil && s.res.Err == "":
		s.res.Err = fmt.Sprintf("reading stream: %v", err)
	case err == nil && s.res.Err == "":
		s.res.Err = "stream ended without [DONE]"
	}
	if s.res.E2E == 0 {
		s.res.E2E = s.now().Sub(s.res.Start)
	}
	s.res.Text = s.text.String()
	if !s.res.UsageReported {
		s.res.OutputTokens = s.res.ContentEvents
	}
}

// wireChunk is the union of the chat and completions chunk shapes, the usage
// chunk and the in-band error event.
type wireChunk struct {
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// event handles one SSE data payload.
func (s *stream) event(data []byte) error {
	at := s.now()
	if string(data) == "[DONE]" {
		s.res.E2E = at.Sub(s.res.Start)
		return errStop
	}
	var ch wireChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		s.res.Err = fmt.Sprintf("bad event %q: %v", truncate(data, 80), err)
		return nil
	}
	if ch.Error != nil {
		s.res.Err = fmt.Sprintf("in-band error (%s): %s", ch.Error.Type, ch.Error.Message)
		return nil // the server follows it with [DONE]
	}
	if ch.Usage != nil {
		s.res.UsageReported = true
		s.res.PromptTokens = ch.Usage.PromptTokens
		s.res.OutputTokens = ch.Usage.CompletionTokens
	}
	for _, c := range ch.Choices {
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.res.FinishReason = *c.FinishReason
		}
		text := c.Text
		if text == nil {
			text = c.Delta.Content
		}
		if text == nil || *text == "" {
			continue
		}
		s.text.WriteString(*text)
		s.content(at)
	}
	if s.abandonAfter > 0 && s.res.ContentEvents >= s.abandonAfter {
		s.res.Abandoned = true
		s.res.E2E = at.Sub(s.res.Start)
		return errStop
	}
	return nil
}

func (s *stream) content(at time.Time) {
	if s.res.ContentEvents == 0 {
		s.res.TTFT = at.Sub(s.res.Start)
	} else {
		s.res.ITL = append(s.res.ITL, at.Sub(s.last))
	}
	s.last = at
	s.res.ContentEvents++
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ReadEvents parses a text/event-stream body and calls fn with the data of
// each event (multi-line data joined by "\n"). Comments (": keep-alive"),
// id:, event: and retry: lines are skipped. It returns fn's first error, the
// reader's error, or nil at EOF. The data slice is reused after fn returns.
func ReadEvents(body io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var data []byte
	have := false
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			switch {
			case len(line) == 0:
				if have {
					if ferr := fn(data); ferr != nil {
						return ferr
					}
				}
				data, have = data[:0], false
			case line[0] == ':':
			default:
				field, value, _ := bytes.Cut(line, []byte(":"))
				value = bytes.TrimPrefix(value, []byte(" "))
				if string(field) == "data" {
					if have {
						data = append(data, '\n')
					}
					data, have = append(data, value...), true
				}
			}
		}
		if err == io.EOF {
			if have { // a last event without its blank line still counts
				return fn(data)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}
