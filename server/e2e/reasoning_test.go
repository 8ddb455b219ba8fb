package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
)

// thinkingTemplate is ChatML whose generation prompt opens the reasoning,
// as DeepSeek-R1's does: the model then always reasons.
const thinkingTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
	"{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"

// TestReasoningSDKs runs tests/reasoning-python/reasoning.py (the official
// openai and anthropic packages, pinned) against SmolLM2 loaded as a model
// that always reasons (thinkingTemplate, --reasoning-format think-tags):
// chat's reasoning_content/reasoning with reasoning_effort minimal held to
// its 256-token budget plus the closing marker and streamed alike,
// enable_thinking false answering without reasoning, a Messages thinking
// block with a signature (whole, streamed, sent back), a Responses
// reasoning item with summary and encrypted_content sent back with store
// false.
func TestReasoningSDKs(t *testing.T) {
	url, env := serveThinking(t)
	runReasoningPy(t, url, env)
}

// runReasoningPy runs tests/reasoning-python/reasoning.py against url.
func runReasoningPy(t *testing.T, url string, env []string) {
	t.Helper()
	python := pyVenv(t, "reasoning", "openai==3.57.0", "anthropic==2.14.0")
	out, err := pyCmd(t, python, filepath.Join("reasoning-python", "reasoning.py"), append(env, "SLUICE_URL="+url)...).Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("reasoning.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
}

// serveThinking serves SmolLM2 as a model that always reasons and returns
// its URL and what reasoning.py needs to know of it (CLOSE_TOKENS,
// EOG_IDS).
func serveThinking(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := os.Stat(modelPath()); err != nil {
		t.Skipf("default model absent (%v): run `make model`", err)
	}
	m, err := loader.Load(modelPath(), loader.Options{Threads: 2, ContextLen: 2048, KVBlocks: 128, MaxSeqs: 1,
		ChatTemplate: thinkingTemplate, ReasoningFormat: "think-tags"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	closeIDs := m.Tokenizer.Encode("</think>", false)
	var ids []string
	for _, id := range m.Tokenizer.EOGIDs() {
		ids = append(ids, fmt.Sprint(id))
	}
	eog := strings.Join(ids, ",")
	cfg := server.DefaultConfig()
	cfg.ModelID = m.ID
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(m.Backend()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String(), []string{fmt.Sprintf("CLOSE_TOKENS=%d", len(closeIDs)), "EOG_IDS=" + eog}
}
