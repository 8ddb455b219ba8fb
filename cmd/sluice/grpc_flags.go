package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/kvevents"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/server"
	grpcserver "github.com/sluicehq/sluice/server/grpc"
	"github.com/sluicehq/sluice/server/metrics"
	"github.com/sluicehq/sluice/server/nvml"
)

// opsFlags are serve's flags for the gRPC endpoint, the metrics and the KV events.
type opsFlags struct {
	grpcAddr string
	compat   string
	kvEvents string
	kvSecret string // a file with the PLAIN credentials subscribers must present
	kvReplay string // the replay ROUTER's endpoint
	kvSteps  int    // batches kept for replay
	kvPod    string // what the topic names the replica by: "name" or "address"
}

func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	f := &opsFlags{}
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "gRPC listen address, e.g. :9090 (empty = no gRPC endpoint)")
	fs.StringVar(&f.compat, "metrics-compat", "", `also export another server's metric names on /metrics: "vllm", "llamacpp" (llama-server's) or "both"`)
	fs.StringVar(&f.kvEvents, "kv-events-endpoint", "", "publish prefix-cache events for llm-d's KV-cache indexer on this ZeroMQ endpoint (empty = off). "+
		"An address of this machine is bound, e.g. "+kvevents.DefaultEndpoint+" (this host only) or tcp://$(POD_IP):5557 (the pod's network); "+
		"tcp://*:5557 binds every interface and logs a warning, as the events carry every tenant's token ids; another host is dialed. "+
		"The topic's pod is $POD_NAME or the host name")
	fs.StringVar(&f.kvSecret, "kv-events-secret-file", "", "require ZMTP PLAIN credentials of KV-event subscribers: FILE holds one line, "+
		"user:password, or a password alone for the user "+kvevents.DefaultUser+" (PLAIN authenticates; it does not encrypt)")
	fs.StringVar(&f.kvReplay, "kv-events-replay-endpoint", "", "also serve vLLM's replay socket on this ZeroMQ endpoint (a ROUTER, always bound, e.g. tcp://$(POD_IP):5558; empty = off): "+
		"llm-d's indexer (its replaySocketPort) asks it for the batches it missed, from a sequence number on. It takes --kv-events-secret-file's credentials")
	fs.IntVar(&f.kvSteps, "kv-events-buffer-steps", kvevents.DefaultBufferSteps, "batches kept for the replay socket (vLLM's buffer_steps), at most 64 MiB of them; "+
		"once the first has left, an indexer that restarts cannot replay from 0 (kvevents/doc.go)")
	fs.StringVar(&f.kvPod, "kv-events-topic-pod", "name", `what the topic kv@POD@MODEL names this replica by: "name", $POD_NAME or the host name; `+
		`"address", $POD_IP (else --addr's IP) and --addr's port, IP:PORT, the serving endpoint llm-d's centralized indexer (the publisher dials it) keys pods by`)
	return f
}

// ops is what serve runs beside the HTTP API: GET /metrics (engine figures,
// and GPU figures when NVML finds a driver) and the optional gRPC endpoint.
type ops struct {
	metrics  *metrics.Metrics
	kvEvents *kvevents.Publisher
	grpc     *grpcserver.Server
	served   chan error
	nvmlDone func()
}

// start registers /metrics on srv and sets the engine observer in lo; it
// must run before srv serves and before the model loads. The gRPC endpoint
// starts at once and answers health checks (NOT_SERVING) while the model loads.
func (f *opsFlags) start(ctx context.Context, cfg server.Config, srv *server.Server, lo *loader.Options, log *slog.Logger) (*ops, error) {
	compat, err := metrics.ParseCompat(f.compat)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	// Series are labelled with the name requests use, the first served name
	// when there is one, as vLLM labels them (model_name): dashboards and
	// routers match it against the model a request names, not the file.
	name := cfg.ModelID
	if len(cfg.Aliases) > 0 {
		name = cfg.Aliases[0]
	}
	// loader.Load sizes KV blocks at 16 tokens (models.Options default).
	m, err := metrics.New(reg, name, metrics.Options{Compat: compat, BlockSize: 16})
	if err != nil {
		return nil, err
	}
	o := &ops{metrics: m}
	lo.Observer = m
	srv.Handle("GET /metrics", m.Handler())
	// vLLM's render endpoints, which llm-d's router tokenizes through.
	srv.Handle(server.ChatRenderRoute, srv.RenderHandler(true))
	srv.Handle(server.CompletionRenderRoute, srv.RenderHandler(false))
	if o.nvmlDone, err = nvml.Register(reg, nvml.System(), log); err != nil {
		return nil, err
	}
	// Only the GPU backends come through a factory.
	if o.kvEvents, err = f.startKVEvents(ctx, cfg, lo.NewBackend != nil, reg, log); err != nil {
		return nil, err
	}
	if o.kvEvents != nil { // a nil *Publisher in the interface would not be nil
		lo.KVEvents = o.kvEvents
		auth := "none"
		if f.kvSecret != "" {
			auth = "plain"
		}
		log.Info("kv events", "endpoint", f.kvEvents, "bound", kvevents.Binds(f.kvEvents), "auth", auth, "topic", o.kvEvents.Topic(), "replay", f.kvReplay)
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
func (o *ops) ready(m *loader.Model, path string) error {
	o.metrics.SetSource(m.Engine.Stats)
	if o.grpc == nil {
		return nil
	}
	return o.grpc.SetBackend(m.Backend(), grpcserver.ModelInfo{Path: path, VocabSize: m.Net.VocabSize()})
}

// wait returns when the gRPC endpoint has shut down (serve's context ended).
func (o *ops) wait() error {
	defer o.nvmlDone()
	if o.kvEvents != nil {
		// Runs before the engine closes: the events of its last steps wait
		// unsent, which a replica going away can afford (kvevents.Close).
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = o.kvEvents.Close(ctx)
		}()
	}
	if o.served == nil {
		return nil
	}
	if err := <-o.served; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startKVEvents opens the KV-event publisher when --kv-events-endpoint is set. The topic names the model as requests do
// (the first --served-model-name, else the file's id) because llm-d's indexer
// hashes that name into its block keys.
func (f *opsFlags) startKVEvents(ctx context.Context, cfg server.Config, gpu bool, reg *prometheus.Registry, log *slog.Logger) (*kvevents.Publisher, error) {
	endpoint := f.kvEvents
	if endpoint == "" {
		if f.kvSecret != "" {
			return nil, errors.New("--kv-events-secret-file needs --kv-events-endpoint")
		}
		if f.kvReplay != "" {
			return nil, errors.New("--kv-events-replay-endpoint needs --kv-events-endpoint")
		}
		return nil, nil
	}
	if f.kvSteps < 0 {
		return nil, fmt.Errorf("--kv-events-buffer-steps %d: want at least 1", f.kvSteps)
	}
	var creds *kvevents.Credentials
	if f.kvSecret != "" {
		var err error
		if creds, err = kvevents.ReadCredentials(f.kvSecret); err != nil {
			return nil, err
		}
	}
	for _, ep := range []string{endpoint, f.kvReplay} {
		if ep == "" || !kvevents.AllInterfaces(ep) {
			continue
		}
		if creds == nil {
			log.Warn("kv events: the endpoint binds every interface and takes no credentials: any host that reaches it reads every tenant's token ids; "+
				"bind the address the indexer dials (tcp://$(POD_IP):5557 in a pod) or set --kv-events-secret-file", "endpoint", ep)
		} else {
			log.Warn("kv events: the endpoint binds every interface; subscribers need the PLAIN credentials, which cross the network in clear, as the events do",
				"endpoint", ep)
		}
	}
	pod, err := topicPod(f.kvPod, cfg.Addr)
	if err != nil {
		return nil, err
	}
	model := cfg.ModelID
	if len(cfg.Aliases) > 0 {
		model = cfg.Aliases[0]
	}
	medium := kvevents.MediumCPU
	if gpu {
		medium = kvevents.MediumGPU
	}
	// loader.Load sizes KV blocks at 16 tokens (models.Options default).
	// The socket outlives serve's context: the drain after SIGTERM still
	// stores and evicts blocks, and ops.wait closes the publisher.
	p, err := kvevents.New(context.WithoutCancel(ctx), kvevents.Config{Endpoint: endpoint, Credentials: creds, Pod: pod, Model: model, Medium: medium, BlockSize: 16,
		ReplayEndpoint: f.kvReplay, BufferSteps: f.kvSteps})
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_kv_events_dropped_total",
			Help: "KV events (block stored or removed) lost: the publisher's buffer was full or its socket refused them.",
		}, func() float64 { return float64(p.Dropped()) })),
		reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_kv_event_batches_total",
			Help: "KV-event batches handed to the ZeroMQ socket.",
		}, func() float64 { return float64(p.Batches()) })),
	)
	if err != nil {
		_ = p.Close(ctx)
		return nil, err
	}
	return p, nil
}

// topicPod is the topic's POD part for --kv-events-topic-pod mode, given
// the HTTP listen address. "address" is IP:PORT as llm-d writes an
// endpoint's address and port (no brackets for IPv6), because its
// centralized mode, where every replica dials one indexer, has no other way
// to tell which endpoint a batch's blocks are on.
func topicPod(mode, addr string) (string, error) {
	switch mode {
	case "", "name":
		if pod := os.Getenv("POD_NAME"); pod != "" {
			return pod, nil
		}
		pod, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("kv events: pod name: %w", err)
		}
		return pod, nil
	case "address":
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", fmt.Errorf("--kv-events-topic-pod address: --addr %q: %w", addr, err)
		}
		if env := os.Getenv("POD_IP"); env != "" {
			host = env
		}
		ip := net.ParseIP(host)
		if ip == nil || ip.IsUnspecified() {
			return "", fmt.Errorf("--kv-events-topic-pod address: no IP to name: set $POD_IP (the chart's downward API) or listen on a specific address, not %q", addr)
		}
		if port == "0" {
			return "", errors.New("--kv-events-topic-pod address: --addr has no fixed port")
		}
		return ip.String() + ":" + port, nil
	default:
		return "", fmt.Errorf(`--kv-events-topic-pod %q: want "name" or "address"`, mode)
	}
}
