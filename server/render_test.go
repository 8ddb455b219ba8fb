package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server/auth"
)

// renderServer is SmolLM2 behind a server with the render routes added as
// serve adds them (Handle), with keys when given.
func renderServer(t *testing.T, keys ...string) http.Handler {
	t.Helper()
	return renderServerWith(t, nil, keys...)
}

// renderServerWith is renderServer with mutate applied to its config.
func renderServerWith(t *testing.T, mutate func(*Config), keys ...string) http.Handler {
	t.Helper()
	path := filepath.Join("..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("default model not fetched (%v); run scripts/fetch-model.sh", err)
	}
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 64, MaxSeqs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close(context.Background()) })
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	if len(keys) > 0 {
		if cfg.Keys, err = auth.New(keys, ""); err != nil {
			t.Fatal(err)
		}
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle(ChatRenderRoute, srv.RenderHandler(true))
	srv.Handle(CompletionRenderRoute, srv.RenderHandler(false))
	if err := srv.SetBackend(model.Backend()); err != nil {
		t.Fatal(err)
	}
	return srv.HTTPServer().Handler
}

type rendered struct {
	RequestID      string          `json:"request_id"`
	TokenIDs       []int32         `json:"token_ids"`
	Features       json.RawMessage `json:"features"`
	Model          string          `json:"model"`
	SamplingParams struct {
		Temperature float32 `json:"temperature"`
		MaxTokens   *int    `json:"max_tokens"`
		Seed        *uint64 `json:"seed"`
		Stop        []string
	} `json:"sampling_params"`
	CacheSalt *string `json:"cache_salt"`
}

func promptTokens(t *testing.T, h http.Handler, path, body string) int {
	t.Helper()
	status, got := post(h, path, body)
	var r struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if status != 200 || json.Unmarshal([]byte(got), &r) != nil {
		t.Fatalf("%s %s: %d %s", path, body, status, got)
	}
	return r.Usage.PromptTokens
}

// TestSmolRender: on SmolLM2, /v1/chat/completions/render answers vLLM's
// GenerateRequest whose token_ids are the ids /tokenize gives the same
// messages and as many as the generation's usage counts, with the
// request's sampling parameters under vLLM's names; /v1/completions/render
// answers a list, one per prompt, each the ids of that prompt (BOS
// included, as generation has it). Bodies a generation refuses are refused
// alike, before any rendering.
func TestSmolRender(t *testing.T) {
	h := renderServer(t)
	msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a prefix cache?"}]`
	status, body := post(h, "/v1/chat/completions/render", `{"model":"`+testModel+`","messages":`+msgs+`,"temperature":0.5,"max_tokens":7,"seed":3,"stop":["END"],"cache_salt":"s1"}`)
	var chat rendered
	if status != 200 || json.Unmarshal([]byte(body), &chat) != nil {
		t.Fatalf("chat render: %d %s", status, body)
	}
	want := tokenIDs(t, h, `{"messages":`+msgs+`}`)
	if !slices.Equal(chat.TokenIDs, want) || len(want) < 10 {
		t.Errorf("chat render ids %v, /tokenize %v", chat.TokenIDs, want)
	}
	if n := promptTokens(t, h, "/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":1}`); n != len(chat.TokenIDs) {
		t.Errorf("chat render: %d ids, generation's prompt %d tokens", len(chat.TokenIDs), n)
	}
	sp := chat.SamplingParams
	if sp.Temperature != 0.5 || sp.MaxTokens == nil || *sp.MaxTokens != 7 || sp.Seed == nil || *sp.Seed != 3 ||
		!slices.Equal(sp.Stop, []string{"END"}) || chat.CacheSalt == nil || *chat.CacheSalt != "s1" ||
		chat.Model != testModel || !strings.HasPrefix(chat.RequestID, "chatcmpl-") || string(chat.Features) != "null" {
		t.Errorf("chat render fields: %s", body)
	}

	status, body = post(h, "/v1/completions/render", `{"prompt":["The cache holds","Blocks of sixteen tokens"]}`)
	var comps []rendered
	if status != 200 || json.Unmarshal([]byte(body), &comps) != nil || len(comps) != 2 {
		t.Fatalf("completions render: %d %s", status, body)
	}
	for i, p := range []string{"The cache holds", "Blocks of sixteen tokens"} {
		want := tokenIDs(t, h, `{"prompt":"`+p+`"}`)
		if !slices.Equal(comps[i].TokenIDs, want) {
			t.Errorf("prompt %d: render %v, /tokenize %v", i, comps[i].TokenIDs, want)
		}
		if n := promptTokens(t, h, "/v1/completions", `{"prompt":"`+p+`","max_tokens":1}`); n != len(want) {
			t.Errorf("prompt %d: %d ids, generation's prompt %d tokens", i, len(want), n)
		}
	}
	status, body = post(h, "/v1/completions/render", `{"prompt":[1,2,3]}`)
	if status != 200 || json.Unmarshal([]byte(body), &comps) != nil || len(comps) != 1 || !slices.Equal(comps[0].TokenIDs, []int32{1, 2, 3}) {
		t.Errorf("token prompt: %d %s", status, body)
	}

	for _, c := range []struct{ path, body, has string }{
		{"/v1/chat/completions/render", `{"prompt":"x"}`, "messages"},
		{"/v1/chat/completions/render", `{"messages":[]}`, "messages"},
		{"/v1/chat/completions/render", `{"model":"other","messages":` + msgs + `}`, "other"},
		{"/v1/completions/render", `{"prompt":"x","temperature":-1}`, "temperature"},
		{"/v1/completions/render", `{"prompt":"x","tools":[]}`, "tools"},
		{"/v1/completions/render", `not json`, ""},
	} {
		status, body := post(h, c.path, c.body)
		if status/100 != 4 || !strings.Contains(body, c.has) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: %d %s; want a 4xx naming %q", c.path, c.body, status, body, c.has)
		}
	}
}

// TestRenderNeedsKey: with API keys set, the render routes refuse a request
// without one (401) or with a wrong one, and answer with the right one:
// their ids are a tokenizer oracle, as /tokenize is.
func TestRenderNeedsKey(t *testing.T) {
	h := renderServer(t, "sk-render-1")
	for _, path := range []string{"/v1/chat/completions/render", "/v1/completions/render"} {
		body := `{"prompt":"hello"}`
		if strings.Contains(path, "chat") {
			body = `{"messages":[{"role":"user","content":"hello"}]}`
		}
		for _, key := range []string{"", "sk-wrong", "sk-render-1"} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "http://localhost"+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			h.ServeHTTP(rec, req)
			want := http.StatusUnauthorized
			if key == "sk-render-1" {
				want = http.StatusOK
			}
			if rec.Code != want || want == http.StatusOK && !strings.Contains(rec.Body.String(), "token_ids") {
				t.Errorf("%s key %q: %d %s, want %d", path, key, rec.Code, rec.Body.String(), want)
			}
		}
	}
}

// TestRenderPublic: with keys set and RenderPublic (serve --render-public),
// the two render routes answer without a key, as llm-d's picker calls
// them, and give the same ids as with one; every other route still
// refuses a request without a key.
func TestRenderPublic(t *testing.T) {
	h := renderServerWith(t, func(c *Config) { c.RenderPublic = true }, "sk-render-1")
	do := func(method, path, body, key string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	chat := `{"messages":[{"role":"user","content":"hello"}]}`
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions/render", chat},
		{"/v1/completions/render", `{"prompt":"hello"}`},
	} {
		var ids [2]string
		for i, key := range []string{"", "sk-render-1"} {
			code, body := do("POST", c.path, c.body, key)
			if code != http.StatusOK || !strings.Contains(body, "token_ids") {
				t.Fatalf("%s key %q: %d %s, want 200 with token_ids", c.path, key, code, body)
			}
			var r struct {
				TokenIDs json.RawMessage `json:"token_ids"`
			}
			if c.path == "/v1/completions/render" {
				var rs []json.RawMessage
				if json.Unmarshal([]byte(body), &rs) != nil || len(rs) != 1 {
					t.Fatalf("%s: %s, want a list of one", c.path, body)
				}
				body = string(rs[0])
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatal(err)
			}
			ids[i] = string(r.TokenIDs)
		}
		if ids[0] != ids[1] || len(ids[0]) < 3 {
			t.Errorf("%s: ids without a key %s, with it %s", c.path, ids[0], ids[1])
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", `{"model":"` + testModel + `","messages":[{"role":"user","content":"hello"}],"max_tokens":1}`},
		{"POST", "/v1/completions", `{"model":"` + testModel + `","prompt":"hello","max_tokens":1}`},
		{"GET", "/v1/models", ""},
	} {
		if code, body := do(c.method, c.path, c.body, ""); code != http.StatusUnauthorized {
			t.Errorf("%s %s without a key, render public: %d %s, want 401", c.method, c.path, code, body)
		}
	}
}
