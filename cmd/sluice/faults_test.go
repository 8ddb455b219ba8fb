package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/faultinject"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
)

var defaultModel = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

func needModel(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(defaultModel); err != nil {
		t.Skipf("default model absent (%v): run `make model`", err)
	}
}

// chatStream posts a streaming chat request and returns the raw event
// stream once the server ends it.
func chatStream(t *testing.T, url string, maxTokens int) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Count from one to fifty."}],"max_tokens":%d,"stream":true}`, maxTokens)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// A lost device (an error wrapping kernels.ErrDeviceLost) makes the server
// not ready and ends its streams with an in-band error before it shuts
// down. The stop the watcher calls is held here so /ready can be read in
// between; the process-level exit is TestFaultBinary's.
func TestBrokenBackendMarksNotReadyAndDrains(t *testing.T) {
	needModel(t)
	m, srv, ctx, url := faultyServer(t, faultinject.At(faultinject.Fault{Kind: faultinject.DeviceLost}, 4))

	stopped := make(chan struct{})
	broke := watchBroken(ctx, m.Engine, srv, func() { close(stopped) }, slog.New(slog.DiscardHandler))
	status, events := chatStream(t, url, 40)
	if status != http.StatusOK || !strings.Contains(events, `"server_error"`) || !strings.HasSuffix(strings.TrimSpace(events), "data: [DONE]") {
		t.Fatalf("stream across the lost device: status %d\n%s", status, events)
	}
	<-stopped
	resp, err := http.Get(url + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/ready after the device was lost: %d, want 503", resp.StatusCode)
	}
	if st, _ := chatStream(t, url, 4); st != http.StatusServiceUnavailable {
		t.Fatalf("a request after the device was lost: %d, want 503", st)
	}
	if err := <-broke; !errors.Is(err, engine.ErrBroken) || !errors.Is(err, kernels.ErrDeviceLost) {
		t.Fatalf("watchBroken: %v", err)
	}
}

// faultyServer serves the default model, its steps faulted by plan, on a
// free port: the model, the server, the context it serves under and its
// URL. Serving ends, and the model closes, when the test does.
func faultyServer(t *testing.T, plan faultinject.Plan) (*loader.Model, *server.Server, context.Context, string) {
	t.Helper()
	m, err := loader.Load(defaultModel, loader.Options{Threads: 2, ContextLen: 1024, KVBlocks: 128, MaxSeqs: 4,
		WrapModel: func(m engine.Model) engine.Model { return faultinject.Wrap(m, plan) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
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
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	return m, srv, ctx, "http://" + ln.Addr().String()
}

// buildFaultBinary builds the CLI with the faultinject tag into dir.
func buildFaultBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice-faultinject")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", "faultinject", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags faultinject: %v\n%s", err, out)
	}
	return bin
}

// startServe runs `serve` on a free port and returns its URL once /ready
// answers 200, the process, and its stderr so far.
func startServe(t *testing.T, bin string, extra ...string) (string, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--model", defaultModel, "--addr", addr, "--threads", "2", "--ctx", "1024", "--kv-blocks", "128"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr // copied by exec until the process exits: Wait waits for it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get(url + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, cmd, stderr
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("server not ready after 60 s")
		}
		time.Sleep(50 * time.Millisecond) // polling a child process: no event to wait on
	}
}

// The real binary with injected faults: a panicking step ends only the
// stream it ran (in-band server_error), the server carries on and counts
// it; a lost device ends the process with a non-zero status.
func TestFaultBinary(t *testing.T) {
	needModel(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the faultinject binary")
	}
	bin := buildFaultBinary(t)

	t.Run("panic", func(t *testing.T) {
		url, _, _ := startServe(t, bin, "--inject-fault", "panic@5")
		status, events := chatStream(t, url, 30)
		if status != http.StatusOK || !strings.Contains(events, `"server_error"`) {
			t.Fatalf("stream through the panicking step: %d\n%s", status, events)
		}
		status, events = chatStream(t, url, 8)
		if status != http.StatusOK || strings.Contains(events, `"error"`) || !strings.Contains(events, `"finish_reason":"length"`) {
			t.Fatalf("the next stream: %d\n%s", status, events)
		}
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(metrics), `sluice_engine_step_failures_total{kind="panic",model=`) ||
			!strings.Contains(string(metrics), `kind="panic",model="SmolLM2-135M-Instruct.Q4_1"} 1`) {
			t.Fatalf("/metrics has no panic counted:\n%s", grepLines(string(metrics), "step_failures"))
		}
		if resp, err := http.Get(url + "/ready"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/ready after a panicking step: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	})

	t.Run("device_lost", func(t *testing.T) {
		url, cmd, stderr := startServe(t, bin, "--inject-fault", "device_lost@5")
		status, events := chatStream(t, url, 30)
		if status != http.StatusOK || !strings.Contains(events, `"server_error"`) {
			t.Fatalf("stream through the lost device: %d\n%s", status, events)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("exit: %v, want a non-zero status", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the server still runs 60 s after its device was lost")
		}
		if !strings.Contains(stderr.String(), "backend cannot recover") {
			t.Fatalf("stderr does not say why it exited:\n%s", stderr.String())
		}
	})
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
