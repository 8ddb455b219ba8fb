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
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/relay"
)

// relayFlags are serve's flags for relay mode: --upstream (repeatable) or
// --upstream-config, and the defaults an upstream without its own takes.
type relayFlags struct {
	upstreams []string
	config    string
	apiKey    string
	defaults  relay.Upstream
}

func addRelayFlags(fs *flag.FlagSet) *relayFlags {
	f := &relayFlags{defaults: relay.Defaults}
	fs.Func("upstream", "relay to this OpenAI-compatible server instead of loading a model: URL, or NAMES=URL with the comma-separated model names clients use (without NAMES: what its /v1/models lists); repeatable",
		func(v string) error {
			for _, s := range strings.Split(v, " ") { // SLUICE_UPSTREAM may hold several, space-separated
				if s != "" {
					f.upstreams = append(f.upstreams, s)
				}
			}
			return nil
		})
	fs.StringVar(&f.config, "upstream-config", "", `relay config file (JSON: {"upstreams":[{"url","models","model","api_key_env","connect_timeout","first_byte_timeout","stall_timeout","retries","max_concurrent","max_queue"}]})`)
	fs.StringVar(&f.apiKey, "upstream-api-key", "", "API key sent to the --upstream servers (Authorization: Bearer)")
	fs.DurationVar(&f.defaults.Connect, "upstream-connect-timeout", f.defaults.Connect, "relay: TCP/TLS connect timeout")
	fs.DurationVar(&f.defaults.FirstByte, "upstream-first-byte-timeout", f.defaults.FirstByte, "relay: request sent → the upstream's response headers")
	fs.DurationVar(&f.defaults.Stall, "upstream-stall-timeout", f.defaults.Stall, "relay: longest silence of an upstream stream before the client gets a stall_timeout error")
	fs.IntVar(&f.defaults.Retries, "upstream-retries", f.defaults.Retries, "relay: tries after a failure before the upstream answered (-1 = none)")
	fs.IntVar(&f.defaults.MaxConcurrent, "upstream-max-concurrent", f.defaults.MaxConcurrent, "relay: streams open at once per upstream")
	fs.IntVar(&f.defaults.MaxQueue, "upstream-max-queue", f.defaults.MaxQueue, "relay: requests waiting per upstream before 429")
	return f
}

func (f *relayFlags) active() bool { return len(f.upstreams) > 0 || f.config != "" }

func (f *relayFlags) load() ([]relay.Upstream, error) {
	var ups []relay.Upstream
	for _, v := range f.upstreams {
		u, err := relay.ParseFlag(v)
		if err != nil {
			return nil, err
		}
		u.APIKey = f.apiKey
		ups = append(ups, u.WithDefaults(f.defaults))
	}
	if f.config != "" {
		more, err := relay.LoadFile(f.config)
		if err != nil {
			return nil, err
		}
		for _, u := range more {
			ups = append(ups, u.WithDefaults(f.defaults))
		}
	}
	return ups, nil
}

// runRelayServe is `sluice serve --upstream URL`: no model is loaded; the
// API relays to the upstreams with the stream writer's guarantees.
func runRelayServe(f *relayFlags, cfg server.Config) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ups, err := f.load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	rl, err := relay.New(ctx, ups, reg)
	if err != nil {
		return err
	}
	defer rl.Close()
	if err := errors.Join(reg.Register(collectors.NewGoCollector()), reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))); err != nil {
		return err
	}
	cfg.ModelID = rl.Models()[0]
	srv, err := server.New(cfg, log)
	if err != nil {
		return err
	}
	if err := srv.SetRelay(rl); err != nil {
		return err
	}
	srv.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	if _, err := server.RaiseFileLimit(); err != nil {
		log.Warn("raising the open-file limit", "err", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	log.Info("relaying", "addr", ln.Addr().String(), "upstreams", len(ups), "models", strings.Join(rl.Models(), ","))
	return srv.Serve(ctx, ln)
}
