// Package agents runs the coding agents people point at a local server,
// unmodified and pinned (package.json here; scripts/agents/install.sh puts
// them under .build/agents/npm), against a real `sluice serve`, through a
// recording proxy that shows what each one sent and what Sluice answered.
// make agents-check runs it (SLUICE_AGENTS=1); plain `go test` skips it,
// because it needs npm, the Gemma model and minutes of CPU.
package agents

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The model whose 32k context holds the agents' prompts (their system
// prompts and tools exceed 8k tokens): Gemma 3 270M, `make gemma-model`.
const (
	modelFile = "models/gemma-3-270m-q4_k_m.gguf"
	modelName = "gemma-3-270m-q4_k_m" // loader.ModelID of modelFile
)

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func needAgents(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_AGENTS") == "" {
		t.Skip("the agent clients run under make agents-check (SLUICE_AGENTS=1)")
	}
}

// installAgents runs scripts/agents/install.sh (a no-op when the pinned
// versions are in place) and returns the npm bin folder.
func installAgents(t *testing.T) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root(t), "scripts", "agents", "install.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("installing the agents: %v", err)
	}
	t.Logf("agents installed in %s", time.Since(start).Round(time.Millisecond))
	return filepath.Join(root(t), strings.TrimSpace(string(out)), "node_modules", ".bin")
}

// serve starts bin/sluice (SLUICE_BIN overrides it) on the Gemma model with
// extra flags and waits for /ready; it returns the base URL.
func serve(t *testing.T, extra ...string) string {
	t.Helper()
	bin := os.Getenv("SLUICE_BIN")
	if bin == "" {
		bin = filepath.Join(root(t), "bin", "sluice")
	}
	model := filepath.Join(root(t), modelFile)
	if _, err := os.Stat(model); err != nil {
		t.Fatalf("%v (make gemma-model fetches it)", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--model", model, "--chat-template", "gemma", "--threads", "2", "--addr", addr}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	logf, err := os.Create(filepath.Join(logDir(t), "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cancel(); <-exited; logf.Close() })
	base := "http://" + addr
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("sluice serve %s exited: %v\n%s", strings.Join(args, " "), err, log)
		default:
		}
		if resp, err := http.Get(base + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sluice serve not ready within 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logDir is where a run leaves its server log and request records, kept
// after the test for a look (.build/agents/logs/TEST).
func logDir(t *testing.T) string {
	d := filepath.Join(root(t), ".build", "agents", "logs", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// exchange is one request through the recorder and Sluice's answer.
type exchange struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Status       int
	Response     []byte // the whole answer, streamed or not
	Took         time.Duration
	// Cut: the answer's body did not reach its end at the client, most
	// often because the client hung up first. Codex closes its connection
	// as soon as it has read response.completed, and exits after the last
	// one, while Sluice's body may still be ending.
	Cut bool
}

// recorder is a reverse proxy in front of Sluice that keeps every
// exchange: the server-side view a test asserts on.
type recorder struct {
	mu       sync.Mutex
	xs       []*exchange
	url      string
	inflight sync.WaitGroup
}

func record(t *testing.T, upstream string) *recorder {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // pass each SSE event on at once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.inflight.Add(1)
		defer rec.inflight.Done()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		x := &exchange{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
		// Kept from its arrival, so a request is on record even if its
		// answer never ends.
		rec.mu.Lock()
		rec.xs = append(rec.xs, x)
		n := len(rec.xs)
		rec.mu.Unlock()
		dir := logDir(t)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("req%02d.json", n)), body, 0o644)
		start := time.Now()
		tw := &teeWriter{ResponseWriter: w}
		ended := false
		// ReverseProxy ends the handler with panic(http.ErrAbortHandler)
		// when copying the body fails (the client hung up before Sluice's
		// body ended), so the answer is recorded in a defer, which runs as
		// the panic passes on to the server, which then drops the
		// connection without ending the body.
		defer func() {
			rec.mu.Lock()
			x.Status, x.Response, x.Took, x.Cut = tw.status, tw.buf.Bytes(), time.Since(start), !ended
			if x.Status == 0 && ended {
				x.Status = 200
			}
			rec.mu.Unlock()
			how := ""
			if x.Cut {
				how = " (cut: the body did not end at the client)"
			}
			t.Logf("request %d: %s %s (%d bytes) -> %d in %s%s", n, r.Method, x.Path, len(body), x.Status, x.Took.Round(time.Millisecond), how)
			if x.Status >= 400 {
				t.Logf("request %d: Sluice answered %d: %s", n, x.Status, x.Response)
			}
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("resp%02d.txt", n)), x.Response, 0o644)
		}()
		proxy.ServeHTTP(tw, r)
		ended = true
	})
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	rec.url = "http://" + ln.Addr().String()
	return rec
}

// exchanges are copies of the exchanges so far, once those in flight have
// ended: a client may exit as soon as it has read a response's last event,
// before the proxy has seen the upstream body end.
func (rec *recorder) exchanges() []*exchange {
	done := make(chan struct{})
	go func() { rec.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	xs := make([]*exchange, len(rec.xs))
	for i, x := range rec.xs {
		c := *x
		xs[i] = &c
	}
	return xs
}

// failures describes every exchange Sluice refused or ended with an error
// event, for a failing test's message.
func (rec *recorder) failures() string {
	var b strings.Builder
	for i, x := range rec.exchanges() {
		inBand := bytes.Contains(x.Response, []byte("event: error")) || bytes.Contains(x.Response, []byte(`"type":"error"`))
		if x.Status >= 400 || inBand {
			fmt.Fprintf(&b, "\n  request %d %s %s -> %d: %s", i+1, x.Method, x.Path, x.Status, clip(x.Response, 2000))
		}
	}
	return b.String()
}

type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *teeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}
func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// runClient runs an agent with a scratch HOME (and whatever else env
// names) in a scratch working folder, stdin empty, within limit; it returns
// stdout, stderr and the exit error.
func runClient(t *testing.T, limit time.Duration, dir string, env []string, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// Codex's npm bin is a node wrapper around its native binary: a timeout
	// that killed the wrapper alone left the binary running, holding stdout
	// (Run waited on it) and outliving the test. Kill the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}, env...)
	cmd.Stdin = strings.NewReader("")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	t.Logf("%s finished in %s: %v", filepath.Base(bin), time.Since(start).Round(time.Millisecond), err)
	_ = os.WriteFile(filepath.Join(logDir(t), "client.stdout"), out.Bytes(), 0o644)
	_ = os.WriteFile(filepath.Join(logDir(t), "client.stderr"), errb.Bytes(), 0o644)
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %s: %w", limit, err)
	}
	return out.String(), errb.String(), err
}
