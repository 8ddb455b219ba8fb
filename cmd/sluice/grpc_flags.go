package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/server"
	grpcserver "github.com/sluicehq/sluice/server/grpc"
	"github.com/sluicehq/sluice/server/local"
	"github.com/sluicehq/sluice/server/metrics"
	"github.com/sluicehq/sluice/server/nvml"
)

// opsFlags are serve's flags for the gRPC endpoint and the metrics.
type opsFlags struct {
	grpcAddr string
	compat   string
}

func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	f := &opsFlags{}
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "gRPC listen address, e.g. :9090 (empty = no gRPC endpoint)")
	fs.StringVar(&f.compat, "metrics-compat", "", `also export another server's metric names on /metrics ("vllm")`)
	return f
}

// ops is what serve runs beside the HTTP API: GET /metrics (engine figures,
// and GPU figures when NVML finds a driver) and the optional gRPC endpoint.
type ops struct {
	metrics  *metrics.Metrics
	grpc     *grpcserver.Server
	served   chan error
	nvmlDone func()
}

// start registers /metrics on srv and sets the engine observer in lo; it
// must run before srv serves and before the model loads. The gRPC endpoint
// starts at once and answers health checks (NOT_SERVING) while the model loads.
func (f *opsFlags) start(ctx context.Context, cfg server.Config, srv *server.Server, lo *local.Options, log *slog.Logger) (*ops, error) {
	compat, err := metrics.ParseCompat(f.compat)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	// local.Load sizes KV blocks at 16 tokens (models.Options default).
	m, err := metrics.New(reg, cfg.ModelID, metrics.Options{Compat: compat, BlockSize: 16})
	if err != nil {
		return nil, err
	}
	o := &ops{metrics: m}
	lo.Observer = m
	srv.Handle("GET /metrics", m.Handler())
	if o.nvmlDone, err = nvml.Register(reg, nvml.System(), log); err != nil {
		return nil, err
	}
	if f.grpcAddr == "" {
		return o, nil
	}
	if o.grpc, err = grpcserver.New(grpcserver.Config{Addr: f.grpcAddr, HTTP: cfg}, log); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return nil, fmt.Errorf("grpc listen: %w", err)
	}
	o.served = make(chan error, 1)
	go func() { o.served <- o.grpc.Serve(ctx, ln) }()
	log.Info("grpc listening", "addr", ln.Addr().String())
	return o, nil
}

// ready attaches the loaded model to the metrics and the gRPC endpoint.
func (o *ops) ready(m *local.Model, path string) error {
	o.metrics.SetSource(m.Engine.Stats)
	if o.grpc == nil {
		return nil
	}
	return o.grpc.SetBackend(m.Backend(), grpcserver.ModelInfo{Path: path, VocabSize: m.Llama.VocabSize()})
}

// wait returns when the gRPC endpoint has shut down (serve's context ended).
func (o *ops) wait() error {
	defer o.nvmlDone()
	if o.served == nil {
		return nil
	}
	if err := <-o.served; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
