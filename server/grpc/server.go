package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
	"github.com/sluicehq/sluice/server/stream"
)

// Config is the gRPC endpoint's configuration. HTTP carries the settings it
// shares with the HTTP server (model id and aliases, API key, stream
// timing, shutdown grace), so both endpoints behave alike.
type Config struct {
	Addr string // --grpc-addr, ":9090"
	HTTP server.Config
}

// ModelInfo describes the loaded model beyond what stream.Backend carries,
// for VllmEngine.GetModelInfo.
type ModelInfo struct {
	Path      string
	VocabSize int
}

// model is what SetBackend attaches, stored as one so that the backend and
// its description are never seen apart.
type model struct {
	backend *stream.Backend
	info    ModelInfo
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("grpc addr is empty"))
	}
	if err := c.HTTP.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Server is the gRPC endpoint. Health reports NOT_SERVING until SetBackend
// attaches a loaded model, and again from the start of shutdown.
type Server struct {
	cfg      Config
	log      *slog.Logger
	gs       *grpc.Server
	health   *health.Server
	model    atomic.Pointer[model] // nil until SetBackend
	inflight inflight
	started  time.Time
	lastRecv atomic.Int64 // unix nanoseconds of the last Generate
	keys     *auth.Keys   // cfg.HTTP.AuthKeys(): the HTTP server's instance when the CLI shares one

	drainOnce sync.Once
	drain     chan struct{} // closed when open streams must end
}

// Service names as the health service and reflection list them.
const (
	InferenceService = "sluice.v1.Inference"
	VLLMService      = "vllm.grpc.engine.VllmEngine"
)

// New validates cfg and returns a server with no model attached yet.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("grpc config: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	keys, err := cfg.HTTP.AuthKeys()
	if err != nil {
		return nil, fmt.Errorf("grpc config: %w", err)
	}
	s := &Server{cfg: cfg, log: log, started: time.Now(), drain: make(chan struct{}), keys: keys,
		inflight: inflight{calls: map[callKey]context.CancelCauseFunc{}}}
	s.gs = grpc.NewServer(
		// Pings find a vanished client (cable pulled, NAT dropped) so its
		// streams' contexts end and their blocks are freed, as a TCP reset would.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// The HTTP API's body limit bounds a request message too.
		grpc.MaxRecvMsgSize(int(min(cfg.HTTP.MaxBodyBytes, 1<<30))),
		grpc.ChainUnaryInterceptor(s.authUnary),
		grpc.ChainStreamInterceptor(s.authStream),
	)
	s.health = health.NewServer()
	for _, name := range []string{"", InferenceService, VLLMService} {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(s.gs, s.health)
	sluicev1.RegisterInferenceServer(s.gs, &inference{s: s})
	vllmpb.RegisterVllmEngineServer(s.gs, &vllmEngine{s: s})
	reflection.Register(s.gs)
	return s, nil
}

// SetBackend attaches the loaded model; health turns SERVING.
func (s *Server) SetBackend(b *stream.Backend, info ModelInfo) error {
	if b == nil || b.Engine == nil || b.Tokenizer == nil || b.ContextLen <= 0 {
		return errors.New("grpc: backend needs an engine, a tokenizer and a context length")
	}
	s.model.Store(&model{backend: b.WithAbortOnDisconnect(s.cfg.HTTP.AbortOnDisconnect), info: info}) // the abort policy, set once
	for _, name := range []string{"", InferenceService, VLLMService} {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return nil
}

// Serve serves on ln until ctx is done, then shuts down like the HTTP
// server: health turns NOT_SERVING, no new calls, open streams may finish
// within ShutdownTimeout, and those still open then end with an in-band
// shutdown error (UNAVAILABLE).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.gs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("grpc serve: %w", err)
	case <-ctx.Done():
	}
	s.Shutdown(s.cfg.HTTP.ShutdownTimeout)
	return nil
}

// Shutdown stops the server gracefully within grace, then drains.
func (s *Server) Shutdown(grace time.Duration) {
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() { s.gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return
	case <-time.After(grace):
	}
	s.log.Info("grpc: grace period over, ending open streams", "grace", grace)
	s.Drain()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.gs.Stop()
	}
}

// Drain ends every open stream with an in-band shutdown error.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

// loaded returns the backend or UNAVAILABLE while the model loads.
func (s *Server) loaded() (*stream.Backend, error) {
	m, err := s.loadedModel()
	if err != nil {
		return nil, err
	}
	return m.backend, nil
}

// loadedModel is loaded with the model's description.
func (s *Server) loadedModel() (*model, error) {
	m := s.model.Load()
	if m == nil {
		return nil, toStatus(fmt.Errorf("%w: model still loading", engine.ErrClosed))
	}
	return m, nil
}

// servesModel reports whether name selects the served model ("" does).
func (s *Server) servesModel(name string) error {
	return stream.CheckModel(name, s.cfg.HTTP.ModelID, s.cfg.HTTP.Aliases)
}

// backendFor is the loaded model's backend when name selects it, else the
// status saying why not (still loading, or another model).
func (s *Server) backendFor(name string) (*stream.Backend, error) {
	b, err := s.loaded()
	if err != nil {
		return nil, err
	}
	if err := s.servesModel(name); err != nil {
		return nil, toStatus(err)
	}
	return b, nil
}

// running is one generation RPC after admission: the engine request, the
// generation (whose context the client, an Abort RPC or shutdown ends) and
// its text stream, and done, which the handler must call to unregister the
// id.
type running struct {
	ctx     context.Context // the call's, as Abort ends it
	done    func()
	backend *stream.Backend
	req     engine.Request
	gen     *stream.Generation
	ts      *stream.TextStream
	tools   *stream.ToolStream   // the reply's tool-call parse; nil without tools
	reason  *stream.ReasonStream // the reply's reasoning split; nil unless a chat to a reasoning model
}

// start is what both generation services do between parsing a request and
// streaming it: find the loaded model, prepare the engine request as HTTP
// does, name it (the client's id, or idPrefix and a random one) so Abort can
// find it, and submit it. Errors come back as gRPC statuses.
func (s *Server) start(parent context.Context, g *stream.GenRequest, id, idPrefix string) (*running, error) {
	b, err := s.backendFor(g.Model)
	if err != nil {
		return nil, err
	}
	req, err := stream.Prepare(b, g)
	if err != nil {
		return nil, toStatus(err)
	}
	if id == "" {
		id = stream.NewID(idPrefix)
	}
	req.ID = id
	ctx, done, err := s.inflight.add(parent, id)
	if err != nil {
		return nil, toStatus(err)
	}
	s.lastRecv.Store(time.Now().UnixNano())
	gen, err := b.Submit(ctx, req)
	if err != nil {
		done()
		return nil, toStatus(err)
	}
	// NewToolStream after Prepare, which fixed the template's call format.
	return &running{ctx: ctx, done: done, backend: b, req: req, gen: gen, tools: stream.NewToolStream(g),
		reason: stream.NewReasonStream(b, g, req.Prompt), ts: stream.NewTextStream(stream.NewDetokenizerFor(b.Tokenizer, req.Prompt), g.Stop)}, nil
}

// stream is what both generation services do after start: pump the
// sequence through a chunkEmitter that sends with send, then end the RPC.
// A normal end, or an Abort RPC (its caller still reading), goes to
// complete with the finish reason; an in-band error goes to sendErr and
// then comes back as a status; a client that left gets its context's status.
func (s *Server) stream(run *running, streaming bool, send func(p *piece) error,
	complete func(out stream.Outcome, finish string) error, sendErr func(err error, code codes.Code, httpStatus int)) error {
	em := &chunkEmitter{send: send}
	pumped := run.reason.Use(run.tools.Use(em), em)
	out := run.tools.End(run.reason.End(stream.Pump(run.gen, run.ts, pumped, s.pumpConfig(streaming), s.drain)))
	_ = em.Flush() // the text Pump released at the end; a failure shows in the next Send too
	switch {
	case errors.Is(context.Cause(run.ctx), errAbortRPC) && out.Err == nil:
		// Abort RPC: the caller is still reading. The sequence may have
		// finished on its own in the same instant.
		if out.CutShort || out.Finish == "" {
			return complete(out, string(engine.FinishAbort))
		}
		return complete(out, out.Finish)
	case out.ClientGone:
		return toStatus(context.Cause(run.ctx))
	case out.Err != nil:
		code, httpStatus := classify(out.Err)
		sendErr(out.Err, code, httpStatus)
		return toStatus(out.Err)
	}
	return complete(out, out.Finish)
}

func (s *Server) pumpConfig(streaming bool) stream.PumpConfig {
	pc := stream.PumpConfig{StallTimeout: s.cfg.HTTP.StallTimeout}
	if streaming {
		// KeepAlive is left off: HTTP/2 pings keep a gRPC connection alive.
		pc.FlushInterval = s.cfg.HTTP.FlushInterval
	}
	return pc
}

// inflight maps request ids to the cancel functions of their calls. Ids
// are per tenant (auth.Tenant of the call's context): a client names its
// own requests, so one key's id neither collides with another's nor
// reaches it, and Abort of another key's id is an unknown id.
type inflight struct {
	mu    sync.Mutex
	calls map[callKey]context.CancelCauseFunc
}

type callKey struct{ tenant, id string }

// add registers id for ctx's tenant; the returned context ends when the
// call does or Abort names id.
func (f *inflight) add(ctx context.Context, id string) (context.Context, func(), error) {
	key := callKey{auth.Tenant(ctx), id}
	ctx, cancel := context.WithCancelCause(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.calls[key]; dup {
		cancel(nil)
		return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateID, id)
	}
	f.calls[key] = cancel
	return ctx, func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		cancel(nil)
	}, nil
}

// abort ends the call id names among ctx's tenant's.
func (f *inflight) abort(ctx context.Context, id string) error {
	f.mu.Lock()
	cancel, ok := f.calls[callKey{auth.Tenant(ctx), id}]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownID, id)
	}
	cancel(errAbortRPC)
	return nil
}

func (f *inflight) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// Health stays open without the API key: load balancers and kubelet probe
// it without credentials, and it tells only whether the server serves.
// Reflection (the services' schema) follows the key, as every other
// service does.
func open(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.")
}

// authorize accepts "authorization: Bearer KEY" or x-api-key metadata
// carrying any key in force, checked by auth.Keys as HTTP checks it, and
// returns ctx marked with that key's tenant (the first accepted value's:
// authorization before x-api-key, as HTTP prefers the bearer token).
func (s *Server) authorize(ctx context.Context, method string) (context.Context, error) {
	if !s.keys.Enabled() || open(method) { // a health check creates nothing: no tenant
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	tenant, ok := "", false
	check := func(id string, good bool) {
		if good && !ok {
			tenant, ok = id, true
		}
	}
	for _, got := range md.Get("authorization") {
		check(s.keys.IdentifyHeader(got, ""))
	}
	for _, got := range md.Get("x-api-key") {
		check(s.keys.Identify(got))
	}
	if !ok {
		return nil, toStatus(stream.ErrUnauthorized)
	}
	return s.keys.WithTenant(ctx, tenant), nil
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &tenantStream{ServerStream: ss, ctx: ctx})
}

// tenantStream is a server stream whose context carries its tenant.
type tenantStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (t *tenantStream) Context() context.Context { return t.ctx }
