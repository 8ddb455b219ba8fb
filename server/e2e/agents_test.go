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
	"time"

	"github.com/sluicehq/sluice/server"
)

// defaultServer serves the rig's model again with the default keep-alive
// (15 s) instead of the rig's 200 ms. The OpenAI Python SDK (3.57.0, its
// SSEDecoder) turns a keep-alive comment that follows an event with an id
// into an empty event and fails to parse it as JSON, and a forced tool call
// after the Hermes prompt takes seconds to start on this machine: with the
// rig's keep-alive the SDK, not Sluice, would fail.
func defaultServer(t *testing.T, r *rig) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.ModelID = r.model.ID
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

// pyCmd is the command that runs script (a path under tests/) with env.
// tests/common, the module the SDK tool scripts share, goes on PYTHONPATH
// because Python puts only the script's own folder on its path.
func pyCmd(t *testing.T, python, script string, env ...string) *exec.Cmd {
	t.Helper()
	common, err := filepath.Abs(filepath.Join("..", "..", "tests", "common"))
	if err != nil {
		t.Fatal(err)
	}
	if prev := os.Getenv("PYTHONPATH"); prev != "" {
		common += string(os.PathListSeparator) + prev
	}
	cmd := exec.CommandContext(t.Context(), python, filepath.Join("..", "..", "tests", script))
	cmd.Env = append(append(os.Environ(), "PYTHONPATH="+common), env...)
	return cmd
}

// runPython runs a script of tests/openai-python against the rig's model
// and fails unless it prints {"ok": true, …}.
func runPython(t *testing.T, r *rig, python, script string, env ...string) {
	t.Helper()
	runPyScript(t, r, python, filepath.Join("openai-python", script),
		append([]string{"SLUICE_URL=" + defaultServer(t, r), "SLUICE_MODEL=" + r.model.ID}, env...)...)
}

// runPyScript runs script (a path under tests/) with env, fails unless it
// prints {"ok": true, …}, and then waits for the rig to be idle: a request
// the script left behind holds KV blocks.
func runPyScript(t *testing.T, r *rig, python, script string, env ...string) {
	t.Helper()
	out, err := pyCmd(t, python, script, env...).Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s", script, err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}

// agentPins are the clients an agent stack brings: the OpenAI SDK, a JSON
// Schema validator, LangChain's OpenAI chat model.
var agentPins = []string{"openai==3.57.0", "jsonschema==4.26.0", "langchain-openai==1.7.4"}

// TestOpenAIPythonTools runs tests/openai-python/tools.py: the official SDK
// accumulates streamed tool calls (required and named) into calls that
// validate against their parameters, and json_schema output validates
// (jsonschema) for 50 generated schemas, streamed and not.
func TestOpenAIPythonTools(t *testing.T) {
	r := getRig(t)
	runPython(t, r, pyVenv(t, "agents", agentPins...), "tools.py")
}

// TestLangChainToolRoundTrip runs tests/openai-python/langchain_tools.py:
// ChatOpenAI(...).bind_tools calls a Python tool and answers from its result.
func TestLangChainToolRoundTrip(t *testing.T) {
	r := getRig(t)
	runPython(t, r, pyVenv(t, "agents", agentPins...), "langchain_tools.py")
}

// TestOpenAINodeTools runs tests/openai-node/tools.mjs: the official Node
// SDK's streaming helper accumulates the streamed tool calls (required and
// named) into a final completion whose calls parse and match their schemas.
func TestOpenAINodeTools(t *testing.T) {
	r := getRig(t)
	runNode(t, r, "tools.mjs", defaultServer(t, r))
}
