package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
)

// kwargsTemplate is ChatML with a system turn written from three
// chat_template_kwargs (a string, a list, a boolean) when the request gives
// them.
const kwargsTemplate = "{% if persona is defined %}<|im_start|>system\n{{ persona }}\nPalette: {{ palette | join(', ') }}\n" +
	"{% if shout %}LOUD{% endif %}<|im_end|>\n{% endif %}" +
	"{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
	"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

// TestOpenAIPythonTemplateKwargs runs tests/openai-python/template_kwargs.py
// (the official SDK, pinned) against SmolLM2 served under kwargsTemplate:
// chat_template_kwargs sent through extra_body reach the template, whole
// and streamed, and the server's own variables are refused by name.
func TestOpenAIPythonTemplateKwargs(t *testing.T) {
	if _, err := os.Stat(modelPath()); err != nil {
		t.Skipf("default model absent (%v): run `make model`", err)
	}
	python := pyVenv(t, "openai", "openai==3.57.0")
	m, err := loader.Load(modelPath(), loader.Options{Threads: 2, ContextLen: 1024, KVBlocks: 64, MaxSeqs: 1, ChatTemplate: kwargsTemplate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
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

	out, err := pyCmd(t, python, filepath.Join("openai-python", "template_kwargs.py"), "SLUICE_URL=http://"+ln.Addr().String()).Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("template_kwargs.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
}
