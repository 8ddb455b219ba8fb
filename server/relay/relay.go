package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// Relay routes requests to upstreams by served model name.
type Relay struct {
	ups    []*upstream
	routes map[string][]*upstream // served name → the upstreams serving it, tried in turn
	names  []string               // served names in order of configuration
	m      *Metrics
}

// upstream is one configured server with its client and admission slots.
type upstream struct {
	cfg     Upstream
	base    string // URL without a trailing "/v1"
	label   string // the metrics label: host[:port]
	client  *http.Client
	slots   chan struct{} // a value per stream in flight
	waiting atomic.Int64  // requests waiting for a slot
}

// New checks the upstreams and builds their clients. An upstream without
// Models is asked for its GET /v1/models under ctx (bounded by its timeouts).
// reg receives the metrics (nil: a private registry).
func New(ctx context.Context, ups []Upstream, reg prometheus.Registerer) (*Relay, error) {
	if len(ups) == 0 {
		return nil, errors.New("relay: no upstreams")
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("relay metrics: %w", err)
	}
	r := &Relay{routes: map[string][]*upstream{}, m: m}
	for _, cfg := range ups {
		cfg = cfg.WithDefaults(Defaults)
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		u := newUpstream(cfg)
		if len(u.cfg.Models) == 0 {
			if u.cfg.Models, err = u.listModels(ctx); err != nil {
				return nil, fmt.Errorf("relay: %s lists no models and none were configured: %w", u.label, err)
			}
		}
		m.touch(u.label)
		r.ups = append(r.ups, u)
		for _, name := range u.cfg.Models {
			if _, ok := r.routes[name]; !ok {
				r.names = append(r.names, name)
			}
			r.routes[name] = append(r.routes[name], u)
		}
	}
	return r, nil
}

func newUpstream(cfg Upstream) *upstream {
	base := strings.TrimSuffix(strings.TrimSuffix(cfg.URL, "/"), "/v1")
	p, _ := url.Parse(base) // validated
	dialer := &net.Dialer{Timeout: cfg.Connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.Connect,
		ResponseHeaderTimeout: cfg.FirstByte,
		// A compressed stream is buffered by the compressor: no gzip.
		DisableCompression:  true,
		MaxIdleConnsPerHost: cfg.MaxConcurrent,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &upstream{cfg: cfg, base: base, label: p.Host, client: &http.Client{Transport: tr}, slots: make(chan struct{}, cfg.MaxConcurrent)}
}

// Models are the served names, in configuration order.
func (r *Relay) Models() []string { return r.names }

// Metrics are the relay's figures.
func (r *Relay) Metrics() *Metrics { return r.m }

// Serves reports whether name selects a served model ("" selects the first).
func (r *Relay) Serves(name string) bool {
	_, ok := r.routes[name]
	return ok || name == ""
}

// Request is a client's request as the relay forwards it.
type Request struct {
	Path string // PathChat, PathCompletions, PathMessages or PathResponses
	// Model is the name the client used ("" = the first served name).
	Model string
	// Body is the client's JSON object. The relay sends it on with model,
	// stream and stream_options.include_usage set (the stream core needs the
	// stream and the usage whatever the client asked) and every other field
	// as the client wrote it: the upstream validates what it serves.
	// (Messages and Responses requests get model and stream only: their
	// streams carry the usage unasked.)
	Body map[string]json.RawMessage
	// Detach keeps reading the upstream after Close, to its end, as a relay
	// that never watches its client does. It exists only for the abandon
	// benchmark (serve --abort-on-disconnect=false).
	Detach bool
}

// Open sends req to an upstream serving its model and returns the stream
// once an upstream answered 200. Failures before that — no connection, the
// first-byte timeout, 429, 502/503/504 — are retried on the next upstream
// (or the same one, alone) up to Retries times, with a short backoff: nothing
// reached the client yet, so a retry is invisible to it. Other 4xx and 5xx
// answers are returned at once as a *StatusError.
func (r *Relay) Open(ctx context.Context, req Request) (*Stream, error) {
	start := time.Now()
	return attempts(r, ctx, req, apiOf(req.Path), func(up *upstream, body []byte) (*Stream, error) {
		return r.try(ctx, up, http.MethodPost, up.base+req.Path, body, "", req.Detach, start, apiOf(req.Path))
	})
}

// attempts runs send on the upstreams serving req's model until one
// succeeds, with Open's retry rule: only a retryable failure while the
// client is still there moves on, after a backoff, counted per upstream.
func attempts[T any](r *Relay, ctx context.Context, req Request, a api, send func(up *upstream, body []byte) (T, error)) (T, error) {
	var zero T
	model := req.Model
	if model == "" {
		model = r.names[0]
	}
	ups := r.routes[model]
	if len(ups) == 0 {
		return zero, fmt.Errorf("%w: %q (this relay serves %s)", stream.ErrModelNotFound, model, strings.Join(r.names, ", "))
	}
	var last error
	for attempt := 0; attempt <= ups[0].cfg.Retries; attempt++ {
		up := pick(ups, attempt)
		if attempt > 0 {
			r.m.retries.WithLabelValues(up.label).Inc()
			if err := backoff(ctx, attempt, last); err != nil {
				return zero, err
			}
		}
		body, err := up.body(req.Body, model, a)
		if err != nil {
			return zero, err
		}
		v, err := send(up, body)
		if err == nil {
			return v, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return zero, err
		}
		last = err
	}
	return zero, last
}

// maxCallBody bounds a one-shot answer (Call): a token count is a few bytes.
const maxCallBody = 1 << 20

// Call sends req to an upstream serving its model and returns the body of
// its 200 answer: a one-shot JSON endpoint (PathCountTokens), not a stream.
// Admission slots are for streams and are not taken; failures, retries and
// their metrics are Open's. The whole call is bounded by the connect,
// first-byte and stall timeouts together, so a silent body cannot hang it.
func (r *Relay) Call(ctx context.Context, req Request) ([]byte, error) {
	return attempts(r, ctx, req, apiCall, func(up *upstream, body []byte) ([]byte, error) {
		return r.call(ctx, up, up.base+req.Path, body)
	})
}

func (r *Relay) call(ctx context.Context, up *upstream, target string, body []byte) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, up.cfg.Connect+up.cfg.FirstByte+up.cfg.Stall)
	defer cancel()
	hreq, err := http.NewRequestWithContext(cctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if up.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+up.cfg.APIKey)
	}
	resp, err := up.client.Do(hreq)
	if err != nil {
		return nil, r.transportError(up, ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, r.statusError(up, resp, target)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxCallBody+1))
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case err != nil && cctx.Err() != nil:
		r.m.errors.WithLabelValues(up.label, KindStall).Inc()
		return nil, fmt.Errorf("%w: %s did not finish its answer within %v", stream.ErrUpstreamTimeout, up.label, up.cfg.Connect+up.cfg.FirstByte+up.cfg.Stall)
	case err != nil:
		r.m.truncated.WithLabelValues(up.label).Inc()
		return nil, fmt.Errorf("%w: %s: reading its answer: %v", stream.ErrUpstreamTruncated, up.label, err)
	case len(raw) > maxCallBody || !json.Valid(raw) || bytes.TrimSpace(raw)[0] != '{':
		r.m.errors.WithLabelValues(up.label, KindMalformed).Inc()
		return nil, fmt.Errorf("%w: %s answered %s with %d bytes that are not a JSON object: %.120q", stream.ErrUpstreamMalformed, up.label, strings.TrimPrefix(target, up.base), len(raw), raw)
	}
	return raw, nil
}

// Resume continues an upstream stream that the relay closed when its client
// left, when the upstream keeps its streams resumable (an upstream Sluice:
// GET /v1/streams/{id} with Last-Event-ID). The upstream replays the events
// after lastSeq and continues the same generation, from its prefix cache;
// nothing is generated twice. It is never retried elsewhere.
func (r *Relay) Resume(ctx context.Context, model, upstreamID string, lastSeq int64) (*Stream, error) {
	ups := r.routes[model]
	if len(ups) == 0 || upstreamID == "" {
		return nil, fmt.Errorf("%w: the upstream of model %q cannot resume", stream.ErrStreamNotFound, model)
	}
	up := ups[0]
	if host, _, ok := strings.Cut(upstreamID, "|"); ok {
		for _, u := range ups {
			if u.label == host {
				up = u
			}
		}
		upstreamID = upstreamID[len(host)+1:]
	}
	return r.try(ctx, up, http.MethodGet, up.base+"/v1/streams/"+url.PathEscape(upstreamID), nil, strconv.FormatInt(lastSeq, 10), false, time.Now(), apiOpenAI)
}

// try is one attempt on one upstream: admission, request, status.
func (r *Relay) try(ctx context.Context, up *upstream, method, target string, body []byte, lastEventID string, detach bool, start time.Time, a api) (*Stream, error) {
	release, err := up.admit(ctx, r.m.queued.WithLabelValues(up.label))
	if err != nil {
		if errors.Is(err, engine.ErrQueueFull) {
			r.m.queueRefuse.WithLabelValues(up.label).Inc()
		}
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	if detach {
		rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	hreq, err := http.NewRequestWithContext(rctx, method, target, bytes.NewReader(body))
	if err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("relay: %w", err)
	}
	if body == nil {
		hreq.Body = nil
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if up.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+up.cfg.APIKey)
	}
	if lastEventID != "" {
		hreq.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := up.client.Do(hreq)
	if err != nil {
		cancel()
		release()
		return nil, r.transportError(up, ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer release()
		return nil, r.statusError(up, resp, target)
	}
	r.m.streams.WithLabelValues(up.label).Inc()
	return newStream(ctx, r.m, up, resp, cancel, release, detach, start, a), nil
}

// transportError names what failed before any answer.
func (r *Relay) transportError(up *upstream, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx) // the client left: nobody to tell
	}
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		r.m.errors.WithLabelValues(up.label, KindTimeout).Inc()
		return fmt.Errorf("%w: connecting to %s took over %v", stream.ErrUpstreamTimeout, up.label, up.cfg.Connect)
	case errors.As(err, &ne) && ne.Timeout():
		r.m.errors.WithLabelValues(up.label, KindTimeout).Inc()
		return fmt.Errorf("%w: %s sent no response within %v", stream.ErrUpstreamTimeout, up.label, up.cfg.FirstByte)
	}
	r.m.errors.WithLabelValues(up.label, KindConnect).Inc()
	return fmt.Errorf("%w: %s: %v", stream.ErrUpstreamUnavailable, up.label, err)
}

// StatusError is an upstream's refusal before its first byte, in its words.
type StatusError struct {
	Upstream   string
	Status     int
	Type, Code string
	Param      *string
	Message    string
	RetryAfter string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("upstream %s answered %d: %s", e.Upstream, e.Status, e.Message)
}

// Unwrap gives the statuses the relay answers itself their sentinel: a busy
// upstream is a 429 for the client, a failing one a 502; other 4xx answers
// (a bad request, an unknown model) go to the client as the upstream said them.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == http.StatusTooManyRequests:
		return engine.ErrQueueFull
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status >= 500:
		return stream.ErrUpstreamUnavailable
	}
	return nil
}

// PassThrough reports whether the client should see the upstream's status
// and error as they are (its own request was refused).
func (e *StatusError) PassThrough() bool { return e.Unwrap() == nil }

func (r *Relay) statusError(up *upstream, resp *http.Response, target string) error {
	kind := KindStatus4xx
	if resp.StatusCode >= 500 {
		kind = KindStatus5xx
	}
	r.m.errors.WithLabelValues(up.label, kind).Inc()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	e := &StatusError{Upstream: up.label, Status: resp.StatusCode, Type: "upstream_error", RetryAfter: resp.Header.Get("Retry-After")}
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    any     `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		e.Message, e.Param = body.Error.Message, body.Error.Param
		if body.Error.Type != "" {
			e.Type = body.Error.Type
		}
		if body.Error.Code != nil {
			e.Code = fmt.Sprint(body.Error.Code)
		}
	} else {
		e.Message = strings.TrimSpace(string(raw))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			// No error object: the path itself is unknown there, not the model.
			e.Type, e.Code = "invalid_request_error", "upstream_endpoint_missing"
			e.Message = fmt.Sprintf("upstream %s has no %s endpoint (it answered %d: %.200s); relay this API only to an upstream that serves it, such as another Sluice",
				up.label, strings.TrimPrefix(target, up.base), resp.StatusCode, e.Message)
		}
	}
	return e
}

// retryable: failures before the upstream answered, and answers that say
// "try again" (busy, or a gateway in front of it failing).
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, stream.ErrUpstreamUnavailable) || errors.Is(err, stream.ErrUpstreamTimeout)
}

// backoff waits 50 ms × 2^(attempt-1), or the upstream's Retry-After when
// it is shorter than a second (a longer one is the client's to honour).
func backoff(ctx context.Context, attempt int, last error) error {
	d := 50 * time.Millisecond << (attempt - 1)
	var se *StatusError
	if errors.As(last, &se) && se.RetryAfter != "" {
		if s, err := strconv.Atoi(se.RetryAfter); err == nil && s >= 0 && s < 1 {
			d = time.Duration(s) * time.Second
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// pick chooses the upstream for an attempt: the least loaded, starting the
// scan at the attempt's index so a retry moves to another upstream.
func pick(ups []*upstream, attempt int) *upstream {
	best := ups[attempt%len(ups)]
	if attempt > 0 {
		return best
	}
	for _, u := range ups {
		if len(u.slots) < len(best.slots) {
			best = u
		}
	}
	return best
}

// admit takes a stream slot, waiting in a bounded queue when all are taken.
func (u *upstream) admit(ctx context.Context, queued prometheus.Gauge) (func(), error) {
	release := func() { <-u.slots }
	select {
	case u.slots <- struct{}{}:
		return release, nil
	default:
	}
	if u.waiting.Add(1) > int64(u.cfg.MaxQueue) {
		u.waiting.Add(-1)
		return nil, fmt.Errorf("%w: %s has %d streams open and %d waiting", engine.ErrQueueFull, u.label, u.cfg.MaxConcurrent, u.cfg.MaxQueue)
	}
	queued.Inc()
	defer queued.Dec()
	defer u.waiting.Add(-1)
	select {
	case u.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// body is the client's request as this upstream gets it.
func (u *upstream) body(client map[string]json.RawMessage, model string, a api) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(client)+3)
	for k, v := range client {
		out[k] = v
	}
	if u.cfg.Model != "" {
		model = u.cfg.Model
	}
	out["model"], _ = json.Marshal(model)
	if a != apiCall {
		out["stream"] = json.RawMessage("true")
	}
	if a == apiOpenAI {
		out["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, stream.InvalidParam("", "request body: %v", err)
	}
	return b, nil
}

// listModels asks the upstream which models it serves.
func (u *upstream) listModels(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Connect+u.cfg.FirstByte)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.base+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	if u.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+u.cfg.APIKey)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/models: %s", resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /v1/models: %w", err)
	}
	var names []string
	for _, m := range list.Data {
		if m.ID != "" {
			names = append(names, m.ID)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("GET /v1/models: empty list")
	}
	return names, nil
}

// Close drops the upstreams' idle connections.
func (r *Relay) Close() {
	for _, u := range r.ups {
		u.client.CloseIdleConnections()
	}
}
