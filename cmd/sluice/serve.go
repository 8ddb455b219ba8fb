package main

import (
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

	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tokenizer"
)

// runServe: sluice serve --model PATH [--addr :8080] ... Every flag can also
// come from the environment as SLUICE_<FLAG> (--kv-blocks: SLUICE_KV_BLOCKS);
// a flag on the command line wins.
func runServe(args []string) error {
	cfg := server.DefaultConfig()
	var lo loader.Options
	var modelPath, aliases string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&modelPath, "model", "", "model file (GGUF)")
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address")
	fs.StringVar(&cfg.APIKey, "api-key", "", "require 'Authorization: Bearer KEY' on /v1/*")
	keyFile := fs.String("api-key-file", "", "accept every key in this file too (one per line, # comments; reread on SIGHUP), on HTTP and gRPC")
	fs.StringVar(&aliases, "served-model-name", "", "comma-separated extra names requests may use for the model")
	fs.Var((*originList)(&cfg.CORSOrigins), "cors-origin", "answer browsers from this origin (scheme://host[:port], or * for any) with CORS headers; repeatable (default: none, no CORS)")
	fs.IntVar(&lo.Threads, "threads", runtime.NumCPU(), "CPU threads for the forward pass")
	backend := fs.String("backend", "cpu", "compute backend: cpu, or cuda (in the sluice-cuda build)")
	device := fs.Int("device", 0, "CUDA device ordinal (with --backend cuda)")
	chatTemplate := fs.String("chat-template", "", "chat template for a model without one, or to replace its own: a Jinja file or a built-in ("+
		strings.Join(tokenizer.BuiltinTemplates(), ", ")+")")
	fs.IntVar(&lo.ContextLen, "ctx", 0, "context length cap (0 = the model's own)")
	fs.IntVar(&lo.KVBlocks, "kv-blocks", 0, "KV cache blocks of 16 tokens (0 = 1 GiB worth)")
	fs.IntVar(&lo.MaxSeqs, "max-seqs", 0, "sequences running at once (0 = default)")
	fs.IntVar(&lo.MaxBatchTokens, "max-batch-tokens", 0, "tokens per engine step (0 = default)")
	fs.IntVar(&lo.MaxPrefillTokensWithDecodes, "max-prefill-tokens-with-decodes", 0, fmt.Sprintf(
		"most prompt tokens per engine step while other streams decode (4 per decoding stream, at least 16): bounds their stall when a request arrives (0 = %d)",
		scheduler.DefaultMaxPrefillTokensWithDecodes))
	fs.IntVar(&lo.MaxQueue, "max-queue", 0, "sequences waiting before 429 (0 = default)")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", cfg.FlushInterval, "group tokens into one write per interval (0 = every token)")
	fs.DurationVar(&cfg.KeepAlive, "keepalive", cfg.KeepAlive, "keep-alive comment after this much silence (0 = off)")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", cfg.StallTimeout, "abort a stream that makes no progress (no token, no prompt chunk processed) for this long once the engine admitted it; queueing excluded (0 = off)")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "deadline of each write to a client (0 = none)")
	fs.DurationVar(&cfg.ResumeWindow, "resume-window", cfg.ResumeWindow, "how long a stream stays resumable after its client left (0 = no resume)")
	fs.IntVar(&cfg.ResumeStreamBytes, "resume-stream-bytes", cfg.ResumeStreamBytes, "events retained per stream for resume, in bytes")
	fs.IntVar(&cfg.ResumeTotalBytes, "resume-total-bytes", cfg.ResumeTotalBytes, "events retained for resume, all streams, in bytes")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "larger request bodies get 413")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "a request body not received within this is refused with 408; responses are not bounded by it (0 = none)")
	fs.BoolVar(&cfg.AbortOnDisconnect, "abort-on-disconnect", cfg.AbortOnDisconnect,
		"abort a sequence when its client leaves (false only reproduces naive servers' waste, for benchmarks)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "on SIGTERM, how long open streams may finish")
	opsf := addOpsFlags(fs) // --grpc-addr, --metrics-compat (grpc_flags.go)
	webOn := addWebFlag(fs) // --web (web.go)
	rf := addRelayFlags(fs) // --upstream... (relay.go)
	addFaultFlag(fs, &lo)   // --inject-fault, in the faultinject test build only (faults_on.go)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	if cfg.Keys, err = loadKeys(cfg.APIKey, *keyFile, log); err != nil {
		return err
	}
	keysCtx, stopKeys := context.WithCancel(context.Background())
	defer stopKeys()
	reloadKeysOnHUP(keysCtx, cfg.Keys, *keyFile, log, nil) // relay mode too
	if rf.active() {
		if modelPath != "" {
			return errors.New("--upstream and --model: a server either relays or serves a model")
		}
		return runRelayServe(rf, cfg)
	}
	if modelPath == "" {
		return errors.New("--model or --upstream is required")
	}
	if lo.NewBackend, err = backendFactory(*backend, *device); err != nil {
		return err
	}
	if *chatTemplate != "" {
		if lo.ChatTemplate, err = tokenizer.ChatTemplate(*chatTemplate); err != nil {
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
	ops, err := opsf.start(ctx, cfg, srv, &lo, log) // GET /metrics, gRPC; before Serve and Load
	if err != nil {
		return err
	}
	page, err := startWeb(ctx, *webOn, srv, cfg.Keys) // GET /, GET /v1/engine/events; before Serve
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
	if err := srv.SetBackend(m.Backend()); err != nil {
		return err
	}
	if err := ops.ready(m, modelPath); err != nil {
		return err
	}
	attachWeb(page, m.Engine)
	log.Info("ready", "model", m.ID, "context", m.Llama.ContextLen(), "kv_blocks", m.Llama.Options().KVBlocks,
		"threads", lo.Threads, "load", time.Since(start).Round(time.Millisecond))
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
