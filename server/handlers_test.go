package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/ssetest"
	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

const testModel = "test-model"

type testRig struct {
	url string
	eng *streamtest.ScriptEngine
	srv *Server
}

// newRig serves a scriptEngine that answers every request with script, one
// token per interval, over a real loopback HTTP server.
func newRig(t *testing.T, script []string, interval time.Duration, mutate func(*Config)) *testRig {
	t.Helper()
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{Script: v.IDs(script...), Interval: interval}
	cfg := DefaultConfig()
	cfg.ModelID, cfg.Aliases = testModel, []string{"alias"}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(&stream.Backend{Engine: eng, Tokenizer: v, ContextLen: 64}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.HTTPServer().Handler)
	t.Cleanup(hs.Close)
	return &testRig{url: hs.URL, eng: eng, srv: srv}
}

func (r *testRig) post(t *testing.T, path, body string, header ...string) *http.Response {
	t.Helper()
	return ssetest.Post(t, r.url+path, body, header...)
}

const chatBody = `{"model":"%s","messages":[{"role":"user","content":"hi"}],"stream":%v%s}`

func TestStreamFraming(t *testing.T) {
	rig := newRig(t, []string{"Hel", "lo", " wor", "ld"}, time.Millisecond, nil)
	resp := rig.post(t, "/v1/chat/completions", fmt.Sprintf(chatBody, "alias", true, `,"stream_options":{"include_usage":true}`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive",
		"X-Accel-Buffering": "no", "Content-Encoding": "",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	events := ssetest.Read(t, bufio.NewReader(resp.Body), 0)
	for i, ev := range events {
		if ev.ID != int64(i+1) {
			t.Errorf("event %d has id %d", i, ev.ID)
		}
	}
	// role, 1-4 content chunks (tokens already waiting share one), finish, usage, [DONE]
	if n := len(events); n < 5 || n > 8 || events[n-1].Data != "[DONE]" {
		t.Fatalf("%d events: %v", len(events), events)
	}
	var first streamChunk
	_ = json.Unmarshal([]byte(events[0].Data), &first)
	if first.Choices[0].Delta.Role != "assistant" || first.ID != resp.Header.Get(streamIDHeader) {
		t.Errorf("first chunk %s", events[0].Data)
	}
	text, finish, _, usage := contentOf(t, events)
	if text != "Hello world" || finish != "stop" {
		t.Errorf("text %q finish %q", text, finish)
	}
	prompt := len("<user>hi\n<assistant>")
	if usage == nil || usage.PromptTokens != prompt || usage.CompletionTokens != 4 || usage.TotalTokens != prompt+4 {
		t.Errorf("usage %+v", usage)
	}
	if usageChunk := events[len(events)-2].Data; !strings.Contains(usageChunk, `"choices":[]`) {
		t.Errorf("usage chunk %s", usageChunk)
	}
}

func TestNonStreaming(t *testing.T) {
	rig := newRig(t, []string{"a ", "b ", "STOP", "c"}, time.Millisecond, nil)
	tests := []struct {
		path, body, want string
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stop":"STOP"}`,
			`"object":"chat.completion",.*"message":{"role":"assistant","content":"a b "},"logprobs":null,"finish_reason":"stop"}.*"completion_tokens":3`},
		{"/v1/completions", `{"prompt":"x","model":"` + testModel + `"}`,
			`"object":"text_completion",.*"text":"a b STOPc".*"finish_reason":"stop".*"prompt_tokens":1,"completion_tokens":4`},
	}
	for _, tt := range tests {
		resp := rig.post(t, tt.path, tt.body)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !matches(tt.want, string(body)) {
			t.Errorf("%s: %d %s\nwant match %s", tt.path, resp.StatusCode, body, tt.want)
		}
	}
}

func TestRequestErrors(t *testing.T) {
	rig := newRig(t, []string{"x"}, time.Millisecond, func(c *Config) { c.APIKey = "k"; c.MaxBodyBytes = 512 })
	auth := []string{"Authorization", "Bearer k"}
	tests := []struct {
		name, path, body string
		header           []string
		status           int
		code             string
	}{
		{"no key", "/v1/completions", `{"prompt":"x"}`, nil, 401, "invalid_api_key"},
		{"unknown model", "/v1/completions", `{"prompt":"x","model":"gpt-9"}`, auth, 404, "model_not_found"},
		{"body too large", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 600) + `"}`, auth, 413, "request_too_large"},
		{"prompt longer than context", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 70) + `"}`, auth, 400, "context_length_exceeded"},
		{"prompt plus max_tokens over context", "/v1/completions", `{"prompt":"xx","max_tokens":63}`, auth, 400, "context_length_exceeded"},
		{"bad field", "/v1/chat/completions", `{"messages":[],"stream":true}`, auth, 400, "invalid_value"},
		{"resume of an unknown stream", "/v1/chat/completions", `{}`, append([]string{streamIDHeader, "nope", lastEventIDHeader, "3"}, auth...), 404, "stream_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := rig.post(t, tt.path, tt.body, tt.header...)
			var e struct{ Error APIError }
			body, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tt.status || e.Error.Code == nil || *e.Error.Code != tt.code {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, tt.status, tt.code)
			}
			if tt.name == "prompt longer than context" && !(strings.Contains(e.Error.Message, "70") && strings.Contains(e.Error.Message, "64")) {
				t.Errorf("message %q does not name both lengths", e.Error.Message)
			}
		})
	}
}

// TestSubmitErrors: the engine's refusals become HTTP statuses before the
// first byte, streaming or not.
func TestSubmitErrors(t *testing.T) {
	tests := []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{engine.ErrQueueFull, 429, "queue_full", "1"},
		{engine.ErrClosed, 503, "engine_closed", "1"},
		{engine.ErrInvalidRequest, 400, "invalid_value", ""},
		{engine.ErrPromptTooLong, 400, "context_length_exceeded", ""},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/stream=%v", tt.err, stream), func(t *testing.T) {
				rig := newRig(t, []string{"x"}, time.Millisecond, nil)
				rig.eng.Fail = tt.err
				resp := rig.post(t, "/v1/chat/completions", fmt.Sprintf(chatBody, "", stream, ""))
				var e struct{ Error APIError }
				body, _ := io.ReadAll(resp.Body)
				if json.Unmarshal(body, &e) != nil || resp.StatusCode != tt.status || *e.Error.Code != tt.code ||
					resp.Header.Get("Retry-After") != tt.retryAfter {
					t.Errorf("got %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
				}
			})
		}
	}
}

func TestModelsHealthReady(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, _ := New(cfg, slog.New(slog.DiscardHandler))
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/health"); code != 200 {
		t.Errorf("/health %d", code)
	}
	if code, _ := get("/ready"); code != 503 {
		t.Errorf("/ready before load: %d", code)
	}
	v := streamtest.NewPieceVocab()
	_ = srv.SetBackend(&stream.Backend{Engine: &streamtest.ScriptEngine{}, Tokenizer: v, ContextLen: 8})
	if code, _ := get("/ready"); code != 200 {
		t.Errorf("/ready after load: %d", code)
	}
	if code, body := get("/v1/models"); code != 200 || !matches(`"data":\[{"id":"test-model","object":"model"`, body) {
		t.Errorf("/v1/models %d %s", code, body)
	}
	srv.Drain()
	if code, _ := get("/ready"); code != 503 {
		t.Errorf("/ready while draining: %d", code)
	}
}

func matches(pattern, s string) bool {
	return regexpMust(pattern).MatchString(s)
}

// TestShutdownEndsStreamsInBand checks that a stream still open at the
// shutdown deadline gets an error event and [DONE], and its sequence ends.
func TestShutdownEndsStreamsInBand(t *testing.T) {
	rig := newRig(t, strings.Split(strings.Repeat("x", 50), ""), 20*time.Millisecond, nil)
	resp := rig.post(t, "/v1/chat/completions", fmt.Sprintf(chatBody, "", true, ""))
	br := bufio.NewReader(resp.Body)
	first := ssetest.Read(t, br, 3)
	rig.srv.Drain()
	rest := ssetest.Read(t, br, 0)
	_, _, code, _ := contentOf(t, append(first, rest...))
	if code != "server_shutdown" || rest[len(rest)-1].Data != "[DONE]" {
		t.Errorf("error code %q, last event %v", code, rest[len(rest)-1])
	}
	if !slices.Equal(rig.eng.Aborts(), []engine.AbortCause{engine.CauseShutdown}) {
		t.Errorf("aborts %v", rig.eng.Aborts())
	}
}

// The mux's own 404 and 405 answer in OpenAI's error shape, as every other
// error does; a 405 keeps its Allow header.
func TestUnknownRouteAndMethod(t *testing.T) {
	rig := newRig(t, []string{"x"}, time.Millisecond, nil)
	for _, tt := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nope", 404, "not_found", ""},
		{"GET", "/v1/chat/completions", 405, "method_not_allowed", "POST"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, rig.url+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error APIError }
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tt.status || e.Error.Code == nil || *e.Error.Code != tt.code ||
			!strings.Contains(resp.Header.Get("Allow"), tt.allow) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s (Allow %q), want %d %s", tt.method, tt.path, resp.StatusCode, body, resp.Header.Get("Allow"), tt.status, tt.code)
		}
	}
}
