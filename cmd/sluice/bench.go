package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench"
)

// runBench: sluice bench --url URL [--scenario single|sweep|abandon|streams-1000] ...
// Load generator for any OpenAI-compatible server; table on stdout (or JSON
// with --json), live progress on stderr.
func runBench(args []string) error {
	var cfg bench.Config
	client := &bench.Client{}
	var (
		scenario, levels, promptsPath, metricsURL, out string
		asJSON, quiet                                  bool
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&client.URL, "url", "http://127.0.0.1:8080", "server base URL (without /v1)")
	fs.StringVar(&client.Model, "model", "", "model name to send (empty: none; Sluice and llama-server then use their own)")
	fs.StringVar(&client.APIKey, "api-key", "", "bearer token")
	fs.BoolVar(&client.Chat, "chat", false, "use /v1/chat/completions (one user message) instead of /v1/completions")
	fs.Float64Var(&client.Temperature, "temperature", 0, "sampling temperature (0: greedy, equal lengths across peers)")
	fs.BoolVar(&client.IgnoreEOS, "ignore-eos", false, `send "ignore_eos": true (not every server honours it)`)
	fs.StringVar(&scenario, "scenario", bench.ScenarioSingle, "single, sweep, abandon or streams-1000")
	fs.StringVar(&cfg.Label, "label", "", "name of the server under test, for the report")
	fs.IntVar(&cfg.Load.Concurrency, "concurrency", 1, "clients in a closed loop (with --rate: cap on requests in flight, 0 = none)")
	fs.Float64Var(&cfg.Load.Rate, "rate", 0, "Poisson arrivals, requests per second (0: closed loop)")
	fs.IntVar(&cfg.Load.Requests, "requests", 0, "requests per run (0: 4×concurrency, or as many as fit in --duration)")
	fs.DurationVar(&cfg.Load.Duration, "duration", 0, "cap per run: no request starts after it (sweep default 30s)")
	fs.DurationVar(&cfg.Load.Drain, "drain", -1, "after --duration, how long running requests may finish before they are cut (default: --duration)")
	fs.StringVar(&levels, "levels", joinInts(bench.DefaultLevels), "sweep: concurrency levels")
	fs.IntVar(&cfg.PromptWords, "prompt-words", 64, "synthetic prompt length in words (about one token each)")
	fs.StringVar(&promptsPath, "prompts", "", `JSONL file of {"prompt": ..., "max_tokens": N} (cycled)`)
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 64, "max_tokens of each request")
	fs.DurationVar(&cfg.SLO.TTFT, "slo-ttft", 0, "goodput: TTFT limit (0: none)")
	fs.DurationVar(&cfg.SLO.TPOT, "slo-tpot", 0, "goodput: time-per-output-token limit (0: none)")
	fs.Float64Var(&cfg.AbandonRatio, "abandon-ratio", 0.3, "abandon: fraction of clients that hang up")
	fs.IntVar(&cfg.AbandonAfter, "abandon-after", 8, "abandon: hang up after this many tokens")
	fs.IntVar(&cfg.Streams, "streams", 1000, "streams-1000: streams held open at once")
	fs.StringVar(&metricsURL, "metrics", "", "server /metrics URL to sample (default for abandon and streams-1000: URL/metrics; 'none' to skip)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "local server's pid: sample its RSS and open fds from /proc")
	fs.DurationVar(&cfg.ScrapeInterval, "scrape-interval", 0, "how often to sample /metrics (default 250ms)")
	fs.DurationVar(&cfg.Settle, "settle", 0, "keep sampling this long after the load ends (default 3s when sampling)")
	fs.Uint64Var(&cfg.Load.Seed, "seed", 1, "seed of prompts and arrival times")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON on stdout instead of a table")
	fs.StringVar(&out, "out", "", "also write the JSON report to this file")
	fs.BoolVar(&quiet, "quiet", false, "no progress line on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := benchDefaults(&cfg, scenario, levels, metricsURL, client.URL, set); err != nil {
		return err
	}
	if promptsPath != "" {
		ps, err := bench.LoadPrompts(promptsPath)
		if err != nil {
			return err
		}
		cfg.Prompts = ps
	}
	conns := max(cfg.Load.Concurrency, cfg.Streams, 64)
	client.HTTP = bench.NewHTTPClient(conns)
	cfg.Client = client
	if !quiet {
		cfg.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunScenario(ctx, scenario, cfg)
	if rep == nil {
		return err
	}
	rep.Command = "sluice bench " + strings.Join(args, " ")
	if out != "" {
		b, merr := json.MarshalIndent(rep, "", " ")
		if merr != nil {
			return fmt.Errorf("encoding report: %w", merr)
		}
		if werr := os.WriteFile(out, append(b, '\n'), 0o644); werr != nil {
			return fmt.Errorf("writing report: %w", werr)
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", " ")
		return errors.Join(err, enc.Encode(rep))
	}
	return errors.Join(err, rep.WriteTable(os.Stdout))
}

// benchDefaults fills what depends on the scenario and checks the flags.
func benchDefaults(cfg *bench.Config, scenario, levels, metricsURL, url string, set map[string]bool) error {
	l := &cfg.Load
	if scenario != bench.ScenarioAbandon {
		cfg.AbandonRatio = 0
	}
	switch scenario {
	case bench.ScenarioSweep:
		for _, f := range strings.Split(levels, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("--levels: bad level %q", f)
			}
			cfg.Levels = append(cfg.Levels, n)
		}
		if l.Duration == 0 && l.Requests == 0 {
			l.Duration = 30 * time.Second
		}
	case bench.ScenarioAbandon:
		if !set["concurrency"] {
			l.Concurrency = 16
		}
		if !set["max-tokens"] {
			cfg.MaxTokens = 256 // long enough that a hang-up leaves most of the work undone
		}
	case bench.ScenarioStreams1k:
		if l.Duration == 0 {
			l.Duration = 60 * time.Second
		}
		if !set["max-tokens"] {
			cfg.MaxTokens = 4096
		}
	}
	if l.Requests == 0 && l.Duration == 0 {
		l.Requests = max(4*l.Concurrency, 8)
	}
	if l.Drain < 0 {
		l.Drain = l.Duration
	}
	switch {
	case metricsURL == "none":
	case metricsURL != "":
		cfg.MetricsURL = metricsURL
	case scenario == bench.ScenarioAbandon || scenario == bench.ScenarioStreams1k:
		cfg.MetricsURL = strings.TrimRight(url, "/") + "/metrics"
	}
	if (cfg.MetricsURL != "" || cfg.ServerPID > 0) && cfg.Settle == 0 {
		cfg.Settle = 3 * time.Second
	}
	if cfg.MaxTokens < 1 || l.Concurrency < 0 || l.Rate < 0 || (l.Rate == 0 && l.Concurrency == 0) {
		return errors.New("--max-tokens must be ≥ 1 and --concurrency ≥ 1 (or --rate > 0)")
	}
	return nil
}

// joinInts writes ns as "1,4,16".
func joinInts(ns []int) string {
	f := make([]string, len(ns))
	for i, n := range ns {
		f[i] = strconv.Itoa(n)
	}
	return strings.Join(f, ",")
}
