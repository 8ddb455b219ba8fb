package e2e

import (
	"context"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
)

// pyVenv makes (once) the test's pinned venv through scripts/py-venv.sh and
// returns its python; without python3 or a package index the test skips.
func pyVenv(t *testing.T, name string, pins ...string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	script := filepath.Join("..", "..", "scripts", "py-venv.sh")
	out, err := exec.CommandContext(t.Context(), script, append([]string{name}, pins...)...).Output()
	if err != nil {
		t.Skipf("py-venv %s: %v (no package index?)", name, err)
	}
	return strings.TrimSpace(string(out))
}

// keyedServer serves the rig's loaded model again behind an API key, so a
// client's key header is checked without loading the model twice.
func keyedServer(t *testing.T, r *rig, key string) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.ModelID, cfg.APIKey, cfg.KeepAlive = r.model.ID, key, keepAlive
	srv, err := server.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetBackend(r.model.Backend()); err != nil {
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
	return "http://" + ln.Addr().String()
}

// TestAnthropicPythonSDK runs tests/anthropic-python/messages.py (the
// official `anthropic` package, pinned) against a live server on the default
// model, behind an API key the SDK sends as x-api-key: the streaming helper
// and its final message, raw event order, the non-streaming message equal to
// the stream (greedy), max_tokens and stop_sequence stop reasons,
// count_tokens equal to the usage, errors as the SDK's typed exceptions.
func TestAnthropicPythonSDK(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "anthropic", "anthropic==2.14.0")
	url := keyedServer(t, r, "sk-e2e")
	runPyScript(t, r, python, filepath.Join("anthropic-python", "messages.py"), "SLUICE_URL="+url, "SLUICE_KEY=sk-e2e")
}
