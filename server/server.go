package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/relay"
	"github.com/sluicehq/sluice/server/stream"
)

// Server is the OpenAI-compatible HTTP server. It serves /health from the
// start and the API once SetBackend has attached a loaded model.
type Server struct {
	cfg     Config
	backend atomic.Pointer[stream.Backend]
	store   *ResumeStore // nil when ResumeWindow is 0
	log     *slog.Logger
	started time.Time

	draining  atomic.Bool // SIGTERM came: /ready says 503 while the listener drains
	drainOnce sync.Once
	drain     chan struct{} // closed when open streams must end (shutdown deadline)

	env   *httpedge.Env           // what the HTTP driver is lent (routes_api.go edgeEnv)
	extra map[string]http.Handler // routes other packages add (GET /metrics)
	keys  *auth.Keys              // cfg.AuthKeys(); off when it holds none
	relay *relay.Relay            // relay mode (SetRelay, relay.go): the API relays to upstreams
}

// Keys are the API keys the server checks (for other routes and transports
// to share, so that a reload reaches them all).
func (s *Server) Keys() *auth.Keys { return s.keys }

// Handle adds a route beside the API, such as "GET /metrics". It must be
// called before Handler, HTTPServer or Serve. /metrics takes the API key
// when keys are set (its figures show the traffic), unless
// Config.MetricsPublic; other routes (the web page) decide for themselves.
func (s *Server) Handle(pattern string, h http.Handler) {
	if s.extra == nil {
		s.extra = map[string]http.Handler{}
	}
	path := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		path = p
	}
	if path == "/metrics" && !s.cfg.MetricsPublic {
		h = s.api(h.ServeHTTP)
	}
	s.extra[pattern] = h
}

// New validates cfg and returns a server with no model attached yet.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	keys, err := cfg.AuthKeys()
	if err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if cfg.SealSecret != nil {
		if err := httpedge.SetSealKey(cfg.SealSecret); err != nil {
			return nil, fmt.Errorf("server config: %w", err)
		}
	}
	s := &Server{cfg: cfg, log: log, started: time.Now(), drain: make(chan struct{}), keys: keys}
	if cfg.ResumeWindow > 0 {
		s.store = NewResumeStore(cfg.ResumeWindow, cfg.ResumeTotalBytes)
	}
	s.env = s.edgeEnv()
	return s, nil
}

// SetBackend attaches the loaded model; /ready turns 200.
func (s *Server) SetBackend(b *stream.Backend) error {
	if b == nil || b.Engine == nil || b.Tokenizer == nil || b.ContextLen <= 0 {
		return errors.New("server: backend needs an engine, a tokenizer and a context length")
	}
	s.backend.Store(b.WithAbortOnDisconnect(s.cfg.AbortOnDisconnect)) // the abort policy, set once
	return nil
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	if s.relay != nil {
		return s.withBodyTimeout(openAIErrors(s.relayHandler()))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /ready", s.handleReady)
	mux.Handle("GET /v1/models", s.api(s.handleModels))
	chat, completions := s.chatAPI(true), s.chatAPI(false) // chatframe.go
	mux.Handle("POST /v1/chat/completions", s.api(func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, chat) }))
	mux.Handle("POST /v1/completions", s.api(func(w http.ResponseWriter, r *http.Request) { s.handleGenerate(w, r, completions) }))
	mux.Handle("GET /v1/streams/{id}", s.api(s.handleStreamGet))
	s.moreRoutes(mux)
	for pattern, h := range s.extra {
		mux.Handle(pattern, h)
	}
	return s.withBodyTimeout(openAIErrors(mux))
}

// api checks the API key, when one is configured.
func (s *Server) api(h http.HandlerFunc) http.Handler { return s.guard(h, writeError) }

// HTTPServer returns an http.Server with streaming-safe timeouts: headers
// must arrive quickly and idle keep-alive connections are closed, but there
// is no WriteTimeout, which would cut long streams; each write has its own
// deadline instead (Config.WriteTimeout).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Addr:              s.cfg.Addr,
		Handler:           s.withEdgeGuard(s.withCORS(s.Handler())),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully: no new
// connections, open streams may finish within ShutdownTimeout, and those
// still open then are ended with an in-band error and [DONE].
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	ln = s.capConns(ln)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// /ready turns 503 first; the listener stays open for DrainDelay so a
	// router that polls readiness moves new requests elsewhere before any
	// connection is refused.
	s.draining.Store(true)
	if d := s.cfg.DrainDelay; d > 0 {
		s.log.Info("draining: not ready, still serving", "for", d)
		select {
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		case <-time.After(d):
		}
	}
	s.log.Info("shutting down", "grace", s.cfg.ShutdownTimeout)
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(grace)
	if errors.Is(err, context.DeadlineExceeded) {
		s.Drain()
		// The streams now write their error event and return; give them a moment.
		last, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = hs.Shutdown(last)
	}
	if err != nil {
		_ = hs.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// Drain ends every open stream with an in-band shutdown error.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

// handleHealth is the liveness probe: 503 when the engine has work and
// has not completed a step for HealthStepTimeout (a wedged loop: a hung
// device call, a deadlock), so the orchestrator restarts it; a busy loop
// publishes a snapshot every step, however long the queue.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if since, stuck := s.engineStuck(); stuck {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `{"status":"engine stalled","seconds_since_step":%.1f}`, since.Seconds())
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// engineStuck reports whether the engine has had work and no step for
// HealthStepTimeout, and since when it has not stepped.
func (s *Server) engineStuck() (time.Duration, bool) {
	b := s.backend.Load()
	if b == nil || s.cfg.HealthStepTimeout <= 0 {
		return 0, false
	}
	e, ok := b.Engine.(interface{ Stats() *engine.Stats })
	if !ok {
		return 0, false
	}
	st := e.Stats()
	if st == nil || st.Running+st.Waiting == 0 {
		return 0, false
	}
	since := time.Since(st.At)
	return since, since > s.cfg.HealthStepTimeout
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	select {
	case <-s.drain:
		s.draining.Store(true)
	default:
	}
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"shutting down"}`))
		return
	}
	if s.backend.Load() == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"loading"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}

// modelName is the name responses report: the one the request used, else
// the first served name.
func (s *Server) modelName(requested string) string {
	if requested != "" {
		return requested
	}
	return s.servedNames()[0]
}

// servedNames are the names /v1/models lists: the --served-model-name
// names when there are any (the file-derived id is then not advertised,
// though a request may still use it), else the id.
func (s *Server) servedNames() []string {
	if len(s.cfg.Aliases) > 0 {
		return s.cfg.Aliases
	}
	return []string{s.cfg.ModelID}
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i, name := range s.servedNames() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%s,"object":"model","created":%d,"owned_by":"sluice"}`,
			appendJSONString(nil, name), s.started.Unix())
	}
	b.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(b.String()))
}
