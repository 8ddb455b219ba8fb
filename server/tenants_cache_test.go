package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server/auth"
)

// TestTenantsPrefixCache: with two keys, cached_tokens is no oracle. A's
// second identical prompt hits A's cached blocks; B's same prompt, right
// after, finds none of them (before the partition it found all of A's,
// telling B that A had sent it), alone or as n choices (the engine's group
// path), and B's own repeat hits B's blocks.
func TestTenantsPrefixCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modeltest.WriteGGUF(path, tinySpec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 64, MaxSeqs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close(context.Background()) })
	cfg := DefaultConfig()
	cfg.ModelID = testModel
	if cfg.Keys, err = auth.New([]string{keyA, keyB}, ""); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(model.Backend()); err != nil {
		t.Fatal(err)
	}
	h := srv.HTTPServer().Handler
	// Four full blocks of 16 and more: a prompt the cache keeps.
	cached := func(key, text string, n int) int {
		t.Helper()
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":1,"temperature":0,"n":%d}`, strings.Repeat(text, 6), n)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "http://localhost/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		h.ServeHTTP(rec, req)
		var resp struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); rec.Code != http.StatusOK || err != nil || resp.Usage.PromptTokens < 64 {
			t.Fatalf("as %s: %d %s", key, rec.Code, rec.Body)
		}
		return resp.Usage.PromptTokensDetails.CachedTokens
	}
	for _, n := range []int{1, 2} {
		text := fmt.Sprintf("plan %d: the secret is ", n)
		if got := cached(keyA, text, n); got != 0 {
			t.Fatalf("n %d: A's first prompt: %d cached tokens on a fresh prompt", n, got)
		}
		if got := cached(keyA, text, n); got < 48 {
			t.Fatalf("n %d: A's repeat: %d cached tokens, want its own blocks (the cache works)", n, got)
		}
		if got := cached(keyB, text, n); got != 0 {
			t.Errorf("n %d: B's same prompt after A's: %d cached tokens, want 0 (A's blocks are A's)", n, got)
		}
		if got := cached(keyB, text, n); got < 48 {
			t.Errorf("n %d: B's repeat: %d cached tokens, want B's own blocks", n, got)
		}
	}
}
