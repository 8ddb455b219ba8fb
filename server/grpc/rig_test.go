package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/loader"
	"github.com/sluicehq/sluice/models/modeltest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	vllmpb "github.com/sluicehq/sluice/server/grpc/proto/vllm"
	"github.com/sluicehq/sluice/server/metrics"
	"github.com/sluicehq/sluice/server/stream"
)

// tinySpec is a random two-layer model with a byte-level BPE vocabulary and
// a context long enough that no test generation ends by length before the
// test is done with it.
var tinySpec = modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 320, Seed: 7, Tied: true, ContextLen: 4096}

// recorder forwards the engine's events to the metrics and lets a test see
// sequences end, and hold the loop at a chosen token so that "midway" is
// certain rather than a race with a fast model.
type recorder struct {
	*metrics.Metrics
	finished chan engine.Result
	reclaims chan time.Duration
	tokens   map[*engine.Sequence]int // tokens delivered; loop goroutine only

	mu      sync.Mutex
	holdAt  int           // hold the loop once a sequence has delivered holdAt tokens (0: never)
	held    chan struct{} // closed when the loop is held
	release chan struct{} // closed to let the loop go on
}

func newRecorder(m *metrics.Metrics) *recorder {
	return &recorder{Metrics: m, finished: make(chan engine.Result, 256), reclaims: make(chan time.Duration, 256),
		tokens: map[*engine.Sequence]int{}}
}

// hold makes the loop stop inside OnToken, once, when a sequence has
// delivered n ≥ 2 tokens. It returns a channel closed when the loop is held
// and the function that releases it (safe to call more than once).
func (r *recorder) hold(n int) (held <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdAt, r.held, r.release = n, make(chan struct{}), make(chan struct{})
	rel := r.release
	var once sync.Once
	return r.held, func() { once.Do(func() { close(rel) }) }
}

func (r *recorder) OnFirstToken(s *engine.Sequence, at time.Time) {
	r.Metrics.OnFirstToken(s, at)
	r.tokens[s] = 1
}

func (r *recorder) OnToken(s *engine.Sequence, at time.Time) {
	r.Metrics.OnToken(s, at)
	r.tokens[s]++
	r.mu.Lock()
	hit := r.holdAt > 0 && r.tokens[s] == r.holdAt
	held, release := r.held, r.release
	if hit {
		r.holdAt = 0
	}
	r.mu.Unlock()
	if hit {
		close(held)
		<-release
	}
}

func (r *recorder) OnFinish(s *engine.Sequence, res engine.Result, queued time.Duration) {
	r.Metrics.OnFinish(s, res, queued)
	delete(r.tokens, s)
	select {
	case r.finished <- res:
	default: // nobody is reading (a benchmark): never block the engine loop
	}
}

func (r *recorder) OnReclaim(d time.Duration) {
	r.Metrics.OnReclaim(d)
	select {
	case r.reclaims <- d:
	default:
	}
}

// rig is a gRPC server on 127.0.0.1 over a real engine and model, with clients.
type rig struct {
	srv    *Server
	model  *loader.Model
	rec    *recorder
	spy    *spyEngine
	addr   string
	conn   *grpc.ClientConn
	client sluicev1.InferenceClient
	vllm   vllmpb.VllmEngineClient
}

type rigOptions struct {
	path     string          // model file; empty: spec written to a temp dir
	spec     *modeltest.Spec // nil: tinySpec
	maxSeqs  int
	maxQueue int
	apiKey   string
	keys     []string // the keys in force, as --api-key-file gives them (instead of apiKey)
	compat   metrics.Compat
	ctxLen   int    // caps the model's context (0: the model's own)
	template string // replaces the model's chat template (empty: its own)
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	path := o.path
	if path == "" {
		path = filepath.Join(t.TempDir(), "tiny.gguf")
		spec := tinySpec
		if o.spec != nil {
			spec = *o.spec
		}
		if err := modeltest.WriteGGUF(path, spec, kernels.F32); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "tiny", metrics.Options{Compat: o.compat, BlockSize: 16, NoRuntime: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(m)
	model, err := loader.Load(path, loader.Options{Threads: 1, KVBlocks: 300, ContextLen: o.ctxLen, MaxSeqs: o.maxSeqs, MaxQueue: o.maxQueue, Observer: rec, ChatTemplate: o.template})
	if err != nil {
		t.Fatal(err)
	}
	m.SetSource(model.Engine.Stats)
	cfg := Config{Addr: "127.0.0.1:0", HTTP: server.DefaultConfig()}
	cfg.HTTP.ModelID, cfg.HTTP.APIKey, cfg.HTTP.ShutdownTimeout = model.ID, o.apiKey, time.Second
	if o.keys != nil {
		if cfg.HTTP.Keys, err = auth.New(o.keys, ""); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	b := model.Backend()
	spy := &spyEngine{Engine: b.Engine, submitted: make(chan context.Context, 256)}
	b.Engine = spy
	if err := srv.SetBackend(b, ModelInfo{Path: path, VocabSize: model.Net.VocabSize()}); err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv, model: model, rec: rec, spy: spy}
	// Cleanups run last-registered first: the server stops (and its handlers
	// return) before the model and tokenizer they use are closed.
	t.Cleanup(func() {
		if err := model.Close(context.Background()); err != nil {
			t.Errorf("closing the model: %v", err)
		}
	})
	r.addr = r.serve(t)
	return r
}

// serve starts r.srv on a free port with clients; cleanup stops both.
func (r *rig) serve(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.srv.Serve(ctx, ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.conn, r.client, r.vllm = conn, sluicev1.NewInferenceClient(conn), vllmpb.NewVllmEngineClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// waitFinish returns the next sequence end the engine reports.
func (r *rig) waitFinish(t *testing.T) engine.Result {
	t.Helper()
	select {
	case res := <-r.rec.finished:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("no sequence finished within 30 s")
		return engine.Result{}
	}
}

// idle waits until the engine has published a snapshot with nothing running
// or waiting and no KV block held. The loop publishes right after it applies
// an abort or ends a step, so this returns within one step of the end.
func (r *rig) idle(t *testing.T) *engine.Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.model.Engine.Stats()
		if st != nil && st.Running == 0 && st.Waiting == 0 && st.KV.Used == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine not idle after 30 s: %+v", st)
		}
		time.Sleep(time.Millisecond) // polling a published snapshot; there is no publish event to wait on
	}
}

// spyEngine passes Submit through and hands the test each accepted call's
// context, so a test knows when a request reached the engine and when the
// engine can see its cancellation.
type spyEngine struct {
	stream.Engine
	submitted chan context.Context
}

func (e *spyEngine) Submit(ctx context.Context, req engine.Request) (stream.Sequence, error) {
	seq, err := e.Engine.Submit(ctx, req)
	if err == nil {
		select {
		case e.submitted <- ctx:
		default: // nobody is reading (a benchmark): never block a request on the spy
		}
	}
	return seq, err
}

// waitSubmitted returns the context of the next request the engine accepted.
func (r *rig) waitSubmitted(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-r.spy.submitted:
		return ctx
	case <-time.After(30 * time.Second):
		t.Fatal("no request reached the engine within 30 s")
		return nil
	}
}

func wait(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30 s", what)
	}
}

func ptr[T any](v T) *T { return &v }
