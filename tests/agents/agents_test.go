package agents

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Each client gets one turn of its own: a short prompt, which the server
// answers with a call of the client's shell tool (sluice serve
// --force-tool-call pins the call to a harmless printf: a test must not run
// what a 270M model makes up). The client runs it and sends the output back;
// that request is answered freely and the client ends its turn, exit 0.
// The printf's output (sluice-NONCE) differs from its command text, so the
// output found in the second request shows the client ran it.

// clientLimit bounds one client's whole turn: two ~12k-token prompts, the
// second mostly a prefix-cache hit, on two CPU threads. About 35 s on an
// idle machine; on a shared 2-core machine at load 15 Codex's first
// request alone took 6m10s, past the 6 minutes this was.
const clientLimit = 12 * time.Minute

func nonce(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// serveForcing starts sluice with --force-tool-call TOOL=ARGS when the
// binary has the option; forced reports whether it does.
func serveForcing(t *testing.T, tool string, args map[string]any) (base string, forced bool) {
	t.Helper()
	bin := os.Getenv("SLUICE_BIN")
	if bin == "" {
		bin = filepath.Join(root(t), "bin", "sluice")
	}
	help, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	if !bytes.Contains(help, []byte("force-tool-call")) {
		t.Errorf("%s serve has no --force-tool-call: the tool round trip cannot be forced, only the turn is checked", bin)
		return serve(t), false
	}
	a, _ := json.Marshal(args)
	return serve(t, "--force-tool-call", tool+"="+string(a)), true
}

func TestClaudeCode(t *testing.T) {
	needAgents(t)
	bin := installAgents(t)
	n := nonce(t)
	cmd := fmt.Sprintf("printf 'sluice-%%s\\n' %s", n) // prints sluice-NONCE
	base, forced := serveForcing(t, "Bash", map[string]any{"command": cmd})
	rec := record(t, base)
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "ANTHROPIC_BASE_URL=" + rec.url, "ANTHROPIC_API_KEY=sk-local",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
		"API_TIMEOUT_MS=600000", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=96",
		"ANTHROPIC_SMALL_FAST_MODEL=" + modelName, "ANTHROPIC_DEFAULT_HAIKU_MODEL=" + modelName}
	out, stderr, err := runClient(t, clientLimit, work, env, filepath.Join(bin, "claude"),
		"-p", "Print the marker.", "--model", modelName, "--output-format", "json",
		"--max-turns", "3", "--allowedTools", "Bash(printf:*)")
	var res struct {
		IsError bool   `json:"is_error"`
		Subtype string `json:"subtype"`
		Result  string `json:"result"`
		Turns   int    `json:"num_turns"`
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil || jerr != nil || res.IsError {
		t.Fatalf("claude -p: %v; result %+v\nstdout: %s\nstderr: %s\nSluice's errors:%s", err, res, clip([]byte(out), 3000), clip([]byte(stderr), 3000), rec.failures())
	}
	t.Logf("claude: %d turns, result %q", res.Turns, clip([]byte(res.Result), 200))
	noRefusals(t, rec)
	if forced {
		roundTrip(t, rec, "/v1/messages", "sluice-"+n, func(x *exchange) bool {
			return bytes.Contains(x.Response, []byte(`"type":"tool_use"`)) && bytes.Contains(x.Response, []byte(`"name":"Bash"`))
		}, claudeToolResult)
	}
}

// claudeToolResult is the text of the tool_result blocks in a Messages
// request body.
func claudeToolResult(body []byte) string {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var b strings.Builder
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, bl := range blocks {
			if bl.Type == "tool_result" {
				b.Write(bl.Content)
			}
		}
	}
	return b.String()
}

func TestCodex(t *testing.T) {
	needAgents(t)
	bin := installAgents(t)
	n := nonce(t)
	cmd := fmt.Sprintf("printf 'sluice-%%s\\n' %s", n)
	base, forced := serveForcing(t, "exec_command", map[string]any{"cmd": cmd})
	rec := record(t, base)
	home, work := t.TempDir(), t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "OPENAI_API_KEY=sk-local"}
	provider := fmt.Sprintf(`model_providers.sluice={name="sluice",base_url="%s/v1",wire_api="responses",env_key="OPENAI_API_KEY",stream_idle_timeout_ms=600000,request_max_retries=0,stream_max_retries=0}`, rec.url)
	out, stderr, err := runClient(t, clientLimit, work, env, filepath.Join(bin, "codex"),
		"exec", "--skip-git-repo-check", "--json", "-c", "model_provider=sluice", "-c", provider,
		"-m", modelName, "Print the marker.")
	if err != nil {
		t.Fatalf("codex exec: %v\nstdout: %s\nstderr: %s\nSluice's errors:%s", err, clip([]byte(out), 3000), clip([]byte(stderr), 3000), rec.failures())
	}
	if !strings.Contains(out, `"type":"turn.completed"`) {
		t.Fatalf("codex exec: no turn.completed event\nstdout: %s\nstderr: %s", clip([]byte(out), 3000), clip([]byte(stderr), 3000))
	}
	noRefusals(t, rec)
	if forced {
		roundTrip(t, rec, "/v1/responses", "sluice-"+n, func(x *exchange) bool {
			return bytes.Contains(x.Response, []byte(`"type":"function_call"`)) && bytes.Contains(x.Response, []byte(`exec_command`))
		}, codexToolResult)
	}
}

// codexToolResult is the output of the function_call_output items in a
// Responses request body.
func codexToolResult(body []byte) string {
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	var b strings.Builder
	for _, it := range req.Input {
		if it.Type == "function_call_output" {
			b.Write(it.Output)
		}
	}
	return b.String()
}

// noRefusals fails t if Sluice refused a request or ended one with an
// error: a client that retries without what was refused (Claude Code drops
// deferred tools after a 400) may still finish, yet a server that follows
// the published API answers its first request.
func noRefusals(t *testing.T, rec *recorder) {
	t.Helper()
	if f := rec.failures(); f != "" {
		t.Errorf("Sluice refused requests the client sent:%s", f)
	}
}

// roundTrip asserts the server-side view of a tool round trip on path:
// a response whose reply is the call (isCall), then a later request whose
// tool results (results) hold want, the command's output, answered 200
// without an error event.
func roundTrip(t *testing.T, rec *recorder, path, want string, isCall func(*exchange) bool, results func([]byte) string) {
	t.Helper()
	xs := rec.exchanges()
	call := -1
	for i, x := range xs {
		if strings.HasPrefix(x.Path, path) && x.Status == 200 && isCall(x) {
			call = i
			break
		}
	}
	if call < 0 {
		t.Fatalf("no response on %s was the forced tool call (%d requests)%s", path, len(xs), rec.failures())
	}
	for _, x := range xs[call+1:] {
		if !strings.HasPrefix(x.Path, path) || !strings.Contains(results(x.Body), want) {
			continue
		}
		if x.Status != 200 || bytes.Contains(x.Response, []byte("event: error")) {
			t.Fatalf("the request carrying the tool's output was answered %d: %s", x.Status, clip(x.Response, 2000))
		}
		t.Logf("round trip: request %d was the call; a later one carried %q (answered in %s)", call+1, want, x.Took.Round(time.Millisecond))
		return
	}
	t.Fatalf("no request after the call (request %d) carried the tool's output %q%s", call+1, want, rec.failures())
}
