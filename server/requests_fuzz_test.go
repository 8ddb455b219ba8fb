package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/internal/streamtest"
	"github.com/sluicehq/sluice/server/stream"
)

// fuzzRoutes are the POST endpoints a client can send a body to. A route
// this build does not serve answers 404, which the checks below hold to the
// same standard, so the list may name endpoints before they exist.
var fuzzRoutes = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
	"/v1/messages/count_tokens", "/tokenize", "/detokenize",
}

// FuzzRequestBodies sends arbitrary bodies to every endpoint of a server
// over a scripted engine. Whatever arrives, the server answers: never a
// panic or a 5xx, every error a JSON object carrying an error message in
// the endpoint's shape (OpenAI's, or Anthropic's on /v1/messages), every
// 200 either JSON or an event stream.
func FuzzRequestBodies(f *testing.F) {
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true,"stop":["lo"]}`,
		`{"prompt":"hi","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[1,2,3],"temperature":2.5}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":4}`,
		`{"model":"nope","prompt":"x"}`,
		`{"input":"hi","stream":true}`,
		`{"max_tokens":8,"system":"be brief","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"prompt":"x","n":2}`, `{"messages":null}`, `[]`, `null`, `{`, `{"prompt":"\ud800"}`,
	} {
		for i := range fuzzRoutes {
			f.Add(uint8(i), body)
		}
	}
	v := streamtest.NewPieceVocab()
	eng := &streamtest.ScriptEngine{Script: v.IDs("Hel", "lo", " there")}
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.SetBackend(&stream.Backend{Engine: eng, Tokenizer: v, ContextLen: 64}); err != nil {
		f.Fatal(err)
	}
	handler := srv.HTTPServer().Handler
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequestWithContext(t.Context(), "POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		served := make(chan struct{})
		go func() {
			defer close(served)
			handler.ServeHTTP(rec, req)
		}()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			// The script is three tokens with no delay: nothing may wait.
			t.Fatalf("POST %s %q: no answer after 10 s", path, body)
		}
		status, got := rec.Code, rec.Body.Bytes()
		if status >= 500 {
			t.Fatalf("POST %s %q: status %d: %s", path, body, status, got)
		}
		if status != http.StatusOK {
			checkErrorBody(t, path, body, status, got)
			return
		}
		if ct := rec.Header().Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
			if !bytes.HasPrefix(got, []byte("id:")) && !bytes.HasPrefix(got, []byte("event:")) && !bytes.HasPrefix(got, []byte(":")) {
				t.Fatalf("POST %s %q: event stream starts %q", path, body, got[:min(len(got), 40)])
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("POST %s %q: 200 with a body that is not JSON: %q", path, body, got)
		}
	})
}

func checkErrorBody(t *testing.T, path, body string, status int, got []byte) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("POST %s %q: status %d with no error JSON (message and type): %q", path, body, status, got)
	}
	if strings.HasPrefix(path, "/v1/messages") && status != http.StatusNotFound && e.Type != "error" {
		t.Fatalf("POST %s %q: status %d: not Anthropic's error shape ({\"type\":\"error\",...}): %q", path, body, status, got)
	}
}
