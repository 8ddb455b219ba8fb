package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/stream"
	"github.com/sluicehq/sluice/tokenizer"
)

// serveFlags is what serve's flags fill.
type serveFlags struct {
	cfg                   server.Config
	lo                    loader.Options
	modelPath, aliases    string
	keyFile, chatTemplate string
	sealKeyFile           string
	backend               string
	device                int
	ops                   *opsFlags
	web                   *bool
	relay                 *relayFlags
	test                  *testFlags
}

// newServeFlags defines serve's flags over server.DefaultConfig.
func newServeFlags() (*flag.FlagSet, *serveFlags) {
	f := &serveFlags{cfg: server.DefaultConfig()}
	cfg, lo := &f.cfg, &f.lo
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.modelPath, "model", "", "model file (GGUF)")
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address; the default answers this machine only: to serve others give an interface's address or :8080 (every interface), with an API key")
	fs.StringVar(&cfg.APIKey, "api-key", "", "require 'Authorization: Bearer KEY' on /v1/* (and /metrics)")
	fs.StringVar(&f.keyFile, "api-key-file", "", "accept every key in this file too (one per line, # comments; reread on SIGHUP), on HTTP and gRPC")
	fs.StringVar(&f.aliases, "served-model-name", "", "comma-separated extra names requests may use for the model")
	fs.Var((*commaList)(&cfg.CORSOrigins), "cors-origin", "answer browsers from this origin (scheme://host[:port], or * for any) with CORS headers; repeatable (default: none, no CORS). A page on any other site is refused (403)")
	fs.Var((*commaList)(&cfg.AllowedHosts), "allowed-hosts", "Host header names served besides localhost, 127.0.0.1 and [::1] (comma-separated or repeated; * = any). On a loopback --addr any other Host gets 403 (DNS rebinding); elsewhere a list turns the same check on")
	fs.BoolVar(&cfg.MetricsPublic, "metrics-public", false, "serve GET /metrics without the API key (for a scraper that cannot send one)")
	fs.StringVar(&f.sealKeyFile, "seal-key-file", "", "seal reasoning (Messages signatures, Responses encrypted_content) under a key derived from this file's secret (at least 32 bytes) instead of a random one per process, so a restart or another replica given the same file opens them")
	fs.BoolVar(&cfg.RenderPublic, "render-public", false, "serve the render endpoints (/v1/chat/completions/render, /v1/completions/render: token ids of the caller's own text, nothing generated) without the API key, for llm-d's precise prefix routing, whose picker sends none")
	fs.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "open HTTP connections at most; beyond it a connection gets 503 (0 = no cap)")
	fs.IntVar(&cfg.MaxConnsPerIP, "max-conns-per-ip", 0, "open HTTP connections one client address (IPv6: its /64) may hold; beyond it 503 (0 = an eighth of --max-conns for other machines' addresses, while this machine's, such as a local proxy, count only toward --max-conns)")
	fs.IntVar(&lo.Threads, "threads", runtime.NumCPU(), "CPU threads for the forward pass")
	fs.StringVar(&f.backend, "backend", "cpu", "compute backend: cpu, or cuda (in the sluice-cuda build)")
	fs.IntVar(&f.device, "device", 0, "CUDA device ordinal (with --backend cuda)")
	fs.StringVar(&f.chatTemplate, "chat-template", "", "chat template for a model without one, or to replace its own: a Jinja file or a built-in ("+
		strings.Join(tokenizer.BuiltinTemplates(), ", ")+")")
	fs.StringVar(&lo.ReasoningFormat, "reasoning-format", "", "how the model's reasoning is split from its answer: "+
		strings.Join(stream.ReasoningFormats, ", ")+" (default: the model's own, from its architecture and chat template; none sends it as content)")
	fs.IntVar(&lo.ContextLen, "ctx", 0, "context length cap (0 = the model's own)")
	fs.IntVar(&lo.KVBlocks, "kv-blocks", 0, "KV cache blocks of 16 tokens (0 = 1 GiB worth)")
	fs.IntVar(&lo.MaxSeqs, "max-seqs", 0, "sequences running at once (0 = default)")
	fs.IntVar(&lo.MaxBatchTokens, "max-batch-tokens", 0, "tokens per engine step (0 = default)")
	fs.IntVar(&lo.MaxPrefillTokensWithDecodes, "max-prefill-tokens-with-decodes", 0, fmt.Sprintf(
		"most prompt tokens per engine step while other streams decode, however many: bounds their stall when a request arrives, while a prompt still goes in few steps (0 = %d)",
		scheduler.DefaultMaxPrefillTokensWithDecodes))
	fs.IntVar(&lo.MaxQueue, "max-queue", 0, "sequences waiting before 429 (0 = default)")
	fs.StringVar(&lo.Speculate.Method, "speculate", "", "speculative decoding: ngram (drafts from earlier text of the prompt and reply, verified in the same step; each sequence tunes its draft length and stops drafting where it does not pay), draft (a draft model's greedy guesses, --draft-model), mtp (the model's own multi-token-prediction head: a Qwen3.5/3.6 GGUF with its nextn block) or empty for off")
	fs.StringVar(&lo.DraftModel, "draft-model", "", "a smaller model of the same vocabulary whose greedy guesses are verified in the same step (turns on --speculate draft; its own KV pool of as many blocks as the model's), or a Gemma 4 assistant (GGUF gemma4-assistant, as llama.cpp's draft-mtp takes one) for its Gemma 4 target: it drafts from the target's own hidden state and K/V, keeps no KV, and the target's window layers then keep every position")
	fs.IntVar(&lo.Speculate.K, "speculate-k", 0, fmt.Sprintf("most draft tokens per sequence per step with --speculate (0 = %d)", engine.DefaultSpecK))
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", cfg.FlushInterval, "group tokens into one write per interval (0 = every token)")
	fs.DurationVar(&cfg.KeepAlive, "keepalive", cfg.KeepAlive, "keep-alive comment after this much silence (0 = off)")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", cfg.StallTimeout, "abort a stream that waits this long without service once the engine admitted it (no token, no prompt chunk, no step working on it); time queued or inside a long step does not count (0 = off)")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "deadline of each write to a client (0 = none)")
	fs.DurationVar(&cfg.ResumeWindow, "resume-window", cfg.ResumeWindow, "how long a stream stays resumable after its client left (0 = no resume)")
	fs.IntVar(&cfg.ResumeStreamBytes, "resume-stream-bytes", cfg.ResumeStreamBytes, "events retained per stream for resume, in bytes")
	fs.IntVar(&cfg.ResumeTotalBytes, "resume-total-bytes", cfg.ResumeTotalBytes, "events retained for resume, all streams, in bytes")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "larger request bodies get 413")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "a request body not received within this is refused with 408; responses are not bounded by it (0 = none)")
	fs.BoolVar(&cfg.AbortOnDisconnect, "abort-on-disconnect", cfg.AbortOnDisconnect,
		"abort a sequence when its client leaves (false only reproduces naive servers' waste, for benchmarks)")
	fs.BoolVar(&cfg.LenientFields, "lenient-fields", cfg.LenientFields, "accept request fields an endpoint does not know, listing them in the Sluice-Ignored-Fields response header and the log (default: 400 naming the field)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "on SIGTERM, how long open streams may finish")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", cfg.DrainDelay, "on SIGTERM, answer /ready with 503 and keep serving this long before closing the listener, so a router stops sending first (0 = close at once)")
	fs.DurationVar(&cfg.HealthStepTimeout, "health-step-timeout", cfg.HealthStepTimeout, "/health answers 503 when the engine has work and has not finished a step for this long: a wedged loop the liveness probe should restart (0 = off)")
	f.ops = addOpsFlags(fs)     // --grpc-addr, --metrics-compat (grpc_flags.go)
	f.web = addWebFlag(fs)      // --web (web.go)
	f.relay = addRelayFlags(fs) // --upstream... (relay.go)
	f.test = addTestFlags(fs)   // --force-tool-call (testopts.go)
	addFaultFlag(fs, lo)        // --inject-fault, in the faultinject test build only (faults_on.go)
	return fs, f
}

// runServe: sluice serve --model PATH [--addr 127.0.0.1:8080] ... Every
// flag can also come from the environment as SLUICE_<FLAG> (--kv-blocks:
// SLUICE_KV_BLOCKS); a flag on the command line wins.
func runServe(args []string) error {
	fs, f := newServeFlags()
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	cfg, lo := f.cfg, f.lo
	modelPath, aliases, keyFile, rf := f.modelPath, f.aliases, &f.keyFile, f.relay
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	if cfg.Keys, err = loadKeys(cfg.APIKey, *keyFile, log); err != nil {
		return err
	}
	keysCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	reloadKeysOnHUP(keysCtx, cfg.Keys, *keyFile, log, nil) // relay mode too
	warnExposed(cfg.Addr, cfg.Keys, log)
	if f.sealKeyFile != "" {
		if cfg.SealSecret, err = os.ReadFile(f.sealKeyFile); err != nil {
			return fmt.Errorf("--seal-key-file: %w", err)
		}
		cfg.SealSecret = bytes.TrimSpace(cfg.SealSecret)
	}
	if rf.active() {
		if modelPath != "" {
			return errors.New("--upstream and --model: a server either relays or serves a model")
		}
		return runRelayServe(rf, cfg)
	}
	if modelPath == "" {
		return errors.New("--model or --upstream is required")
	}
	force, err := f.test.forcedCall()
	if err != nil {
		return err
	}
	if lo.NewBackend, err = backendFactory(f.backend, f.device); err != nil {
		return err
	}
	if f.chatTemplate != "" {
		if lo.ChatTemplate, err = tokenizer.ChatTemplate(f.chatTemplate); err != nil {
			return err
		}
	}
	if aliases != "" {
		cfg.Aliases = strings.Split(aliases, ",")
	}
	cfg.ModelID = loader.ModelID(modelPath)
	srv, err := server.New(cfg, log)
	if err != nil {
		return err
	}
	if limit, err := server.RaiseFileLimit(); err != nil {
		log.Warn("raising the open-file limit", "err", err)
	} else {
		log.Info("open-file limit", "nofile", limit)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ops, err := f.ops.start(ctx, cfg, srv, &lo, log) // GET /metrics, gRPC; before Serve and Load
	if err != nil {
		return err
	}
	page, err := startWeb(ctx, *f.web, srv, cfg.Keys) // GET /, GET /v1/engine/events; before Serve
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }() // /health answers while the model loads
	log.Info("listening", "addr", ln.Addr().String(), "model", modelPath)

	start := time.Now()
	m, err := loader.Load(modelPath, lo)
	if err != nil {
		stop()
		<-served
		return errors.Join(err, ops.wait())
	}
	b := m.Backend()
	b.Force = force
	if err := srv.SetBackend(b); err != nil {
		return err
	}
	if err := ops.ready(m, modelPath); err != nil {
		return err
	}
	attachWeb(page, m.Engine)
	attrs := []any{"model", m.ID, "context", m.Net.ContextLen(), "kv_blocks", m.Net.Options().KVBlocks,
		"threads", lo.Threads, "load", time.Since(start).Round(time.Millisecond)}
	if st := m.Engine.Stats(); st.KV.StatesTotal > 0 { // a hybrid model: its state memory beside the KV
		attrs = append(attrs, "state_slots", st.KV.StatesTotal, "state_slot_bytes", st.StateSlotBytes)
	}
	log.Info("ready", attrs...)
	broke := watchBroken(ctx, m.Engine, srv, stop, log) // a lost device: drain, exit non-zero
	err = errors.Join(<-served, ops.wait())
	stop()
	err = errors.Join(err, <-broke)
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, m.Close(closeCtx))
}

// parseWithEnv applies SLUICE_* variables as flag defaults, then parses args.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fs.Parse(args)
}
