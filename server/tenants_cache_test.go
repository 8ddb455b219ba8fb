package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTenantsPrefixCache: with two keys, cached_tokens is no oracle. A's
// second identical prompt hits A's cached blocks; B's same prompt, right
// after, finds none of them (before the partition it found all of A's,
// telling B that A had sent it), alone or as n choices (the engine's group
// path), and B's own repeat hits B's blocks.
func TestTenantsPrefixCache(t *testing.T) {
	h := tinyServer(t, keyA, keyB)
	// Four full blocks of 16 and more: a prompt the cache keeps.
	cached := func(key, text string, n int) int {
		t.Helper()
		return cachedTokens(t, h, key, fmt.Sprintf(`{"prompt":%q,"max_tokens":1,"temperature":0,"n":%d}`, strings.Repeat(text, 6), n))
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

// TestCacheSaltField: vLLM's cache_salt partitions the prefix cache of a
// server without keys too (before, it was refused as unsupported), and a
// salt outside 1..256 bytes is a 400 naming it.
func TestCacheSaltField(t *testing.T) {
	h := tinyServer(t)
	prompt := strings.Repeat("salted plans for the tea party ", 4)
	body := func(salt string) string {
		return fmt.Sprintf(`{"prompt":%q,"max_tokens":1,"temperature":0,"cache_salt":%q}`, prompt, salt)
	}
	if got := cachedTokens(t, h, "", body("s1")); got != 0 {
		t.Fatalf("a fresh prompt: %d cached tokens", got)
	}
	if got := cachedTokens(t, h, "", body("s1")); got < 48 {
		t.Fatalf("the same salt again: %d cached tokens, want its blocks", got)
	}
	if got := cachedTokens(t, h, "", body("s2")); got != 0 {
		t.Errorf("another salt: %d cached tokens, want 0", got)
	}
	for _, bad := range []string{`""`, fmt.Sprintf("%q", strings.Repeat("x", 257))} {
		code, resp := post(h, "/v1/completions", fmt.Sprintf(`{"prompt":"hi","max_tokens":1,"cache_salt":%s}`, bad))
		if code != http.StatusBadRequest || !strings.Contains(resp, `"param":"cache_salt"`) {
			t.Errorf("cache_salt %.20s: %d %s", bad, code, resp)
		}
	}
}

// cachedTokens posts a completion as key ("" = none) and returns its
// usage's cached_tokens.
func cachedTokens(t *testing.T, h http.Handler, key, body string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://localhost/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
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
		t.Fatalf("as %q: %d %s", key, rec.Code, rec.Body)
	}
	return resp.Usage.PromptTokensDetails.CachedTokens
}
