package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

// metricsServe serves the default model as serve does, with serve's ops
// flags (--metrics-compat ...) in args, on a free loopback port: its URL and
// engine. It stops when the test ends.
func metricsServe(t *testing.T, args ...string) (string, *engine.Engine) {
	t.Helper()
	needModel(t)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := addOpsFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg := server.DefaultConfig()
	cfg.ModelID = loader.ModelID(defaultModel)
	srv, err := server.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	lo := loader.Options{Threads: 2, ContextLen: 1024, KVBlocks: 128, MaxSeqs: 4}
	o, err := f.start(ctx, cfg, srv, &lo, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m, err := loader.Load(defaultModel, lo)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.SetBackend(m.Backend()); err != nil {
		t.Fatal(err)
	}
	if err := o.ready(m, defaultModel); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
		if err := o.wait(); err != nil {
			t.Errorf("ops: %v", err)
		}
		m.Close(context.Background())
	})
	return "http://" + ln.Addr().String(), m.Engine
}

// metricsPrompt is long enough (over two 16-token KV blocks) for a repeat to
// read part of it from the prefix cache.
const metricsPrompt = "The river rose through the night, and by morning the old mill stood in water up to its windows. " +
	"The miller's daughter rowed out to fetch the ledgers, and she found"

// complete posts a greedy /v1/completions of maxTokens to url and returns
// its usage once the engine has published the step that ended it.
func complete(t *testing.T, url string, eng *engine.Engine, maxTokens int) (prompt, completion int) {
	t.Helper()
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, metricsPrompt, maxTokens)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/completions: %d, %v", resp.StatusCode, err)
	}
	// The reply can leave before the loop publishes the step that ended the
	// sequence; a snapshot with nothing running is that step's or later.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st := eng.Stats(); st.Running == 0 && st.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine never went idle after the request")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return out.Usage.Prompt, out.Usage.Completion
}

func scrapeURL(t *testing.T, url string) metricstest.Families {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	return metricstest.Read(t, resp.Body)
}

// TestLlamaCppMetricsMove serves the default model with
// --metrics-compat=both, sends a request, then the same again (its prompt
// partly from the prefix cache), and checks that llama-server's figures move
// with the request and with the vLLM names read from the same counters.
func TestLlamaCppMetricsMove(t *testing.T) {
	url, eng := metricsServe(t, "--metrics-compat=both")
	lc := func(f metricstest.Families, name string) float64 { return f.Value(t, "llamacpp:"+name) }
	vllm := func(f metricstest.Families, name string) float64 { return f.Value(t, "vllm:"+name) }
	before := scrapeURL(t, url)
	for _, name := range []string{"prompt_tokens_total", "tokens_predicted_total", "n_decode_total", "prompt_seconds_total"} {
		if got := lc(before, name); got != 0 {
			t.Errorf("llamacpp:%s = %v before any request", name, got)
		}
	}

	const maxTokens = 12
	prompt, completion := complete(t, url, eng, maxTokens)
	first := scrapeURL(t, url)
	for name, f := range first {
		if strings.HasPrefix(name, "llamacpp:") && len(metricstest.LabelNames(f)) != 0 {
			t.Errorf("%s has labels %q; llama-server's have none", name, metricstest.LabelNames(f))
		}
	}
	computed, cached := lc(first, "prompt_tokens_total"), lc(first, "prompt_tokens_cached_total")
	if computed+cached != float64(prompt) || computed+cached != vllm(first, "prompt_tokens_total") || computed == 0 {
		t.Errorf("prompt: %v computed + %v cached, want the request's %d = vllm:prompt_tokens_total %v",
			computed, cached, prompt, vllm(first, "prompt_tokens_total"))
	}
	gen := lc(first, "tokens_predicted_total")
	if gen != vllm(first, "generation_tokens_total") || gen < float64(completion) || completion == 0 {
		t.Errorf("llamacpp:tokens_predicted_total %v, vllm:generation_tokens_total %v, completion_tokens %d",
			gen, vllm(first, "generation_tokens_total"), completion)
	}
	t.Logf("one request (%d prompt, %d completion tokens): llamacpp: prompt %v+%v cached in %.4f s, predicted %v in %.4f s, %v decodes, %.1f and %.1f tokens/s",
		prompt, completion, computed, cached, lc(first, "prompt_seconds_total"), gen, lc(first, "tokens_predicted_seconds_total"),
		lc(first, "n_decode_total"), lc(first, "prompt_tokens_seconds"), lc(first, "predicted_tokens_seconds"))
	// One sequence: every step carried it alone, one step per sampled token.
	if got := lc(first, "n_busy_slots_per_decode"); got != 1 {
		t.Errorf("n_busy_slots_per_decode %v with one request, want 1", got)
	}
	if got := lc(first, "n_decode_total"); got < gen {
		t.Errorf("n_decode_total %v for %v sampled tokens", got, gen)
	}
	if got := lc(first, "n_tokens_max"); got < float64(prompt) || got > float64(prompt)+gen {
		t.Errorf("n_tokens_max %v, want the prompt %d plus up to %v generated", got, prompt, gen)
	}
	promptTime, genTime := lc(first, "prompt_seconds_total"), lc(first, "tokens_predicted_seconds_total")
	if promptTime <= 0 || genTime <= 0 {
		t.Errorf("prompt time %v s, generation time %v s: want both > 0", promptTime, genTime)
	}
	// The gauges are the same counts over the same times (the first scrape
	// saw no traffic): prompt tokens per prompt second; decode steps (tokens
	// after the first) per generation second.
	if got, want := lc(first, "prompt_tokens_seconds"), computed/promptTime; !near(got, want) {
		t.Errorf("prompt_tokens_seconds %v, want %v tokens / %v s", got, computed, promptTime)
	}
	if steps := lc(first, "predicted_tokens_seconds") * genTime; !near(steps, float64(completion-1)) && !near(steps, gen-1) {
		t.Errorf("predicted_tokens_seconds × generation time = %v steps, want %d (or %v with the stop token)", steps, completion-1, gen-1)
	}
	if lc(first, "requests_processing") != 0 || lc(first, "requests_deferred") != 0 {
		t.Errorf("idle: %v processing, %v deferred", lc(first, "requests_processing"), lc(first, "requests_deferred"))
	}

	// The same prompt again: its full blocks come from the prefix cache.
	prompt2, _ := complete(t, url, eng, maxTokens)
	second := scrapeURL(t, url)
	dComputed := lc(second, "prompt_tokens_total") - computed
	dCached := lc(second, "prompt_tokens_cached_total") - cached
	if dCached <= 0 || dComputed+dCached != float64(prompt2) {
		t.Errorf("repeat: %v computed + %v cached, want > 0 cached and %d in all", dComputed, dCached, prompt2)
	}
	if lc(second, "prompt_seconds_total") <= promptTime || lc(second, "n_decode_total") <= lc(first, "n_decode_total") {
		t.Error("the repeat's prefill and decodes were not counted")
	}
	// A scrape with no traffic since the last reads empty gauges, as
	// llama-server's, and the same counters.
	idle := scrapeURL(t, url)
	if lc(idle, "prompt_tokens_seconds") != 0 || lc(idle, "predicted_tokens_seconds") != 0 {
		t.Errorf("no traffic since the last scrape, yet %v and %v tokens/s", lc(idle, "prompt_tokens_seconds"), lc(idle, "predicted_tokens_seconds"))
	}
	if lc(idle, "tokens_predicted_total") != lc(second, "tokens_predicted_total") {
		t.Error("a scrape moved a counter")
	}
}

func near(a, b float64) bool { return a == b || (a-b)*(a-b) <= 1e-12*b*b }

// llamaServer is llama.cpp v0.5.0's server as scripts/llamacpp/build-newest.sh
// builds it; make test does not, so the checked-in capture
// (server/metrics/testdata) stands in for it where it is absent.
var llamaServer = filepath.Join("..", "..", ".build", "llamacpp-newest", "build", "bin", "llama-server")

// startLlamaServer runs llama-server --metrics on the default model on a
// free loopback port and returns its URL once /health answers 200.
func startLlamaServer(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(llamaServer); err != nil {
		t.Skipf("llama-server v0.5.0 absent (%v): scripts/llamacpp/build-newest.sh builds it; "+
			"server/metrics TestLlamaCppMatchesGolden compares with its checked-in exposition instead", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cmd := exec.Command(llamaServer, "-m", defaultModel, "--metrics", "--host", "127.0.0.1", "--port", port, "-c", "1024", "-np", "1", "-t", "2")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("llama-server output:\n%s", out.String())
		}
	})
	url := "http://127.0.0.1:" + port
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("llama-server not healthy after 60 s")
		}
		time.Sleep(50 * time.Millisecond) // polling a child process: no event to wait on
	}
}

// TestLlamaCppMatchesLlamaServer sends the same greedy request to the real
// llama-server and to Sluice (--metrics-compat=llamacpp) and compares their
// /metrics: the same llamacpp: names, types, HELP text and label sets, the
// checked-in capture still llama-server's, and the token and decode counts
// of one request the same.
func TestLlamaCppMatchesLlamaServer(t *testing.T) {
	llama := startLlamaServer(t)
	url, eng := metricsServe(t, "--metrics-compat=llamacpp")

	const maxTokens = 4
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, metricsPrompt, maxTokens)
	resp, err := http.Post(llama+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var usage struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&usage)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("llama-server /v1/completions: %d, %v", resp.StatusCode, err)
	}
	theirs := scrapeURL(t, llama)
	prompt, completion := complete(t, url, eng, maxTokens)
	ours := scrapeURL(t, url)

	if diff := metricstest.CompareFamilies(theirs, ours, "llamacpp:"); diff != "" {
		t.Errorf("Sluice's llamacpp: families differ from llama-server's:\n%s", diff)
	}
	f, err := os.Open(filepath.Join("..", "..", "server", "metrics", "testdata", "llamacpp-v0.5.0.metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if diff := metricstest.CompareFamilies(theirs, metricstest.Read(t, f), "llamacpp:"); diff != "" {
		t.Errorf("the checked-in capture is stale (scripts/llamacpp/metrics-golden.sh):\n%s", diff)
	}
	if prompt != usage.Usage.Prompt || completion != usage.Usage.Completion {
		t.Fatalf("the servers disagree on the request: Sluice %d+%d tokens, llama-server %d+%d", prompt, completion, usage.Usage.Prompt, usage.Usage.Completion)
	}
	for _, name := range []string{"prompt_tokens_total", "prompt_tokens_cached_total", "tokens_predicted_total", "n_decode_total", "n_tokens_max",
		"requests_processing", "requests_deferred", "n_busy_slots_per_decode"} {
		name = "llamacpp:" + name
		if got, want := ours.Value(t, name), theirs.Value(t, name); got != want {
			t.Errorf("%s: Sluice %v, llama-server %v", name, got, want)
		}
	}
	for _, name := range []string{"prompt_seconds_total", "tokens_predicted_seconds_total", "prompt_tokens_seconds", "predicted_tokens_seconds"} {
		name = "llamacpp:" + name
		t.Logf("%s: Sluice %.4g, llama-server %.4g", name, ours.Value(t, name), theirs.Value(t, name))
		if ours.Value(t, name) <= 0 || theirs.Value(t, name) <= 0 {
			t.Errorf("%s: Sluice %v, llama-server %v; want both > 0", name, ours.Value(t, name), theirs.Value(t, name))
		}
	}
}
