package web

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBrowser runs tests/web/browser.mjs: the page in headless Chromium
// (Debian's package, unpacked by tests/web/fetch-chromium.sh) driven by
// playwright-core, against `sluice serve` on the default model behind an
// API key. It checks that tokens reach the DOM one by one over the whole
// generation, that Stop aborts the request on the server (the abort
// metric), that a dropped connection resumes to the same text, that model
// output with <script> stays text, that the Markdown renderer is linear in
// its input (lines of 100k backticks and the like, rendered whole and
// streamed, within a budget) and renders a streamed reply as it renders the
// whole, that the API key never reaches localStorage (memory, or this tab's
// sessionStorage when the user ticks the box; a key older pages stored is
// deleted), that closing a chat tab mid-reply makes the engine view's used
// blocks fall within one step, and the phone-width layout and themes. SLUICE_WEB_SCREENSHOTS=DIR also writes the README's
// screenshots there (make web-screenshots).
func TestBrowser(t *testing.T) {
	if raceEnabled {
		t.Skip("the browser test drives a separate server process: nothing for the race detector here")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	model := filepath.Join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("default model absent (%v): run `make model`", err)
	}
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node or npm not installed")
	}
	dir := filepath.Join(root, "tests", "web")
	out, err := exec.CommandContext(t.Context(), filepath.Join(dir, "fetch-chromium.sh")).Output()
	if err != nil {
		t.Skipf("Chromium cannot be obtained (tests/web/fetch-chromium.sh: %v); the browser test needs Debian's chromium package:\n%s", err, errOutput(err))
	}
	chromium := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci failed (no registry?): %v\n%s", err, out)
		}
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	// The fault-injecting build, for --inject-fault slow below.
	build := exec.CommandContext(t.Context(), "go", "build", "-tags", "faultinject", "-o", bin, "./cmd/sluice")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	key := randomKey()
	// Every step 4 ms longer: the page's checks need a reply that is still
	// streaming when they act (80 DOM updates of one reply at the page's
	// frame rate, Stop clicked and a connection dropped mid-reply), and
	// with the AVX-512 VNNI kernels SmolLM2 decodes 290 tokens/s on 2
	// threads, so a greedy reply could end (EOS) before Stop or the drop,
	// and 240 tokens came in under 80 frames. Paced, decode is ~130 tokens/s
	// on that CPU and the same behaviour is checked on any CPU.
	url := startServer(t, bin, "serve", "--model", model, "--addr", "127.0.0.1:0", "--threads", "2", "--api-key", key,
		"--inject-fault", "slow/1:4ms")

	cmd := exec.CommandContext(t.Context(), node, "browser.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_URL="+url, "SLUICE_KEY="+key, "CHROMIUM="+chromium)
	if shots := os.Getenv("SLUICE_WEB_SCREENSHOTS"); shots != "" {
		abs, _ := filepath.Abs(shots)
		cmd.Env = append(cmd.Env, "SCREENSHOTS="+abs)
	}
	cmd.Stderr = os.Stderr
	out, err = cmd.Output()
	var res struct {
		OK       bool            `json:"ok"`
		Failures []string        `json:"failures"`
		Figures  json.RawMessage `json:"figures"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil {
		t.Fatalf("node browser.mjs: %v\n%s", err, out)
	}
	t.Logf("figures: %s", res.Figures)
	for _, f := range res.Failures {
		t.Error(f)
	}
}

func errOutput(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "sk-test-" + hex.EncodeToString(b)
}

var (
	listeningRe = regexp.MustCompile(`msg=listening addr=(\S+)`)
	readyRe     = regexp.MustCompile(`msg=ready `)
)

// startServer runs the binary until the test ends and returns its URL once
// its log says the model is loaded (the address comes from the log too, so
// the port is the kernel's choice).
func startServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	lines := bufio.NewReader(stderr)
	var addr string
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("sluice serve exited before it was ready: %v (last line %q)", err, line)
		}
		if m := listeningRe.FindStringSubmatch(line); m != nil {
			addr = m[1]
		}
		if readyRe.MatchString(line) && addr != "" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }() // keep the pipe drained
	return "http://" + addr
}
