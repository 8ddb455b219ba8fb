package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/server/auth"
)

// Config is the server's validated configuration. cmd/sluice fills it from
// flags and SLUICE_* environment variables; DefaultConfig gives the defaults.
type Config struct {
	// Addr is the listen address. The default, 127.0.0.1:8080, answers only
	// this machine; serving others takes an interface's address or ":8080".
	Addr    string
	APIKey  string // when set, requests need "Authorization: Bearer <key>"
	ModelID string // the id /v1/models lists (derived from the model file name)
	// Aliases are extra names a request's "model" may use (--served-model-name).
	Aliases []string
	// Keys, when set, are the accepted keys instead of APIKey alone
	// (--api-key plus --api-key-file): one instance shared by HTTP, gRPC and
	// the web page, so a reload reaches every transport at once.
	Keys *auth.Keys
	// CORSOrigins are the browser origins answered with CORS headers ("*":
	// any); empty, the default, sends none (cors.go).
	CORSOrigins []string
	// AllowedHosts are Host header names answered besides the loopback
	// names (guard.go): on a loopback-bound server every other name is
	// refused, which defeats DNS rebinding; on an exposed one, a list here
	// turns the same check on. "*" turns it off (a proxy that passes any
	// Host through).
	AllowedHosts []string
	// MetricsPublic serves GET /metrics without the key when keys are set,
	// for a scraper that cannot send a header.
	MetricsPublic bool
	// RenderPublic serves the render routes (render.go) without the key
	// when keys are set, for llm-d's picker, which sends none.
	RenderPublic bool
	// SealSecret, when set, keys the reasoning seals (signatures,
	// encrypted_content) instead of a random per-process key, so replicas
	// and restarts given the same secret open each other's seals
	// (--seal-key-file). The seal key is the process's: the last New wins.
	SealSecret []byte
	// MaxConns caps the open HTTP connections (0: no cap); MaxConnsPerIP is
	// what one client address may hold of them, so one client cannot take
	// every slot (0: an eighth of MaxConns, for other machines' addresses only;
	// this machine's count toward MaxConns alone). A connection beyond
	// either gets a bare 503 and is closed (conncap.go).
	MaxConns      int
	MaxConnsPerIP int

	// FlushInterval groups the text of tokens produced within it into one
	// write; 0 writes every token as soon as it exists.
	FlushInterval time.Duration
	// KeepAlive is how long a stream may stay silent (queued, long prefill)
	// before a ": keep-alive" comment is sent.
	KeepAlive time.Duration
	// StallTimeout aborts a sequence that made no progress (no token, no
	// prompt chunk processed) for this long once the engine admitted it;
	// waiting in the queue does not count (see stream.PumpConfig.StallTimeout).
	StallTimeout time.Duration
	// WriteTimeout bounds each single write to a client (not the whole
	// response): a client that stops reading is treated as gone.
	WriteTimeout time.Duration

	// ResumeWindow is how long a stream's events stay replayable after its
	// last write; ResumeStreamBytes caps one stream's retained events and
	// ResumeTotalBytes all streams' together (oldest streams go first).
	ResumeWindow      time.Duration
	ResumeStreamBytes int
	ResumeTotalBytes  int

	MaxBodyBytes int64 // larger request bodies get 413
	// BodyTimeout bounds reading a request body, from the handler's start
	// (headers are ReadHeaderTimeout's); a body not in by then is a 408.
	// It never touches the response: a stream may run for hours.
	BodyTimeout time.Duration
	// AbortOnDisconnect aborts a sequence when its client leaves. false exists
	// only to reproduce the naive servers' waste for the benchmark: the
	// sequence keeps generating into the void.
	AbortOnDisconnect bool
	// LenientFields accepts request fields an endpoint does not know and
	// lists them in the Sluice-Ignored-Fields header and the log; by
	// default such a request is a 400 naming the field (fields.go).
	LenientFields bool

	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout is how long open streams may keep running after SIGTERM
	// before they are ended with an in-band error.
	ShutdownTimeout time.Duration
	// DrainDelay is how long the server keeps accepting requests after
	// SIGTERM with /ready already 503, so a router (llm-d's picker, a
	// kubelet probe) stops sending before the listener closes (0 = close at
	// once).
	DrainDelay time.Duration
	// HealthStepTimeout: /health answers 503 when the engine has work
	// (running or waiting sequences) and has published no step for this
	// long, a wedged loop the liveness probe should restart (0 = off).
	HealthStepTimeout time.Duration
}

// DefaultConfig returns the configuration `sluice serve` starts from.
func DefaultConfig() Config {
	return Config{
		Addr:              "127.0.0.1:8080",
		KeepAlive:         15 * time.Second,
		StallTimeout:      30 * time.Second,
		WriteTimeout:      30 * time.Second,
		ResumeWindow:      60 * time.Second,
		ResumeStreamBytes: 1 << 20,
		ResumeTotalBytes:  256 << 20,
		MaxBodyBytes:      4 << 20,
		BodyTimeout:       30 * time.Second,
		AbortOnDisconnect: true,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		HealthStepTimeout: 2 * time.Minute,
		MaxConns:          1024,
	}
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Addr == "" {
		bad("addr is empty")
	}
	if c.ModelID == "" {
		bad("model id is empty")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		zero bool // zero allowed (means off)
	}{
		{"flush-interval", c.FlushInterval, true},
		{"keepalive", c.KeepAlive, true},
		{"stall-timeout", c.StallTimeout, true},
		{"write-timeout", c.WriteTimeout, true},
		{"resume-window", c.ResumeWindow, true},
		{"read-header-timeout", c.ReadHeaderTimeout, false},
		{"body-timeout", c.BodyTimeout, true},
		{"idle-timeout", c.IdleTimeout, false},
		{"shutdown-timeout", c.ShutdownTimeout, true},
		{"drain-delay", c.DrainDelay, true},
		{"health-step-timeout", c.HealthStepTimeout, true},
	} {
		if d.v < 0 || (!d.zero && d.v == 0) {
			bad("%s must be positive, got %v", d.name, d.v)
		}
	}
	if c.FlushInterval > time.Second {
		bad("flush-interval %v is over 1s: tokens would arrive in bursts", c.FlushInterval)
	}
	if c.ResumeStreamBytes < 0 || c.ResumeTotalBytes < c.ResumeStreamBytes {
		bad("resume byte caps invalid: per stream %d, total %d", c.ResumeStreamBytes, c.ResumeTotalBytes)
	}
	for _, o := range c.CORSOrigins {
		if err := validCORSOrigin(o); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range c.AllowedHosts {
		if err := validAllowedHost(h); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxConns < 0 || c.MaxConnsPerIP < 0 || (c.MaxConns > 0 && c.MaxConnsPerIP > c.MaxConns) {
		bad("max-conns %d / max-conns-per-ip %d: both non-negative, per IP at most the total", c.MaxConns, c.MaxConnsPerIP)
	}
	if c.MaxBodyBytes <= 0 {
		bad("max-body-bytes must be positive, got %d", c.MaxBodyBytes)
	}
	return errors.Join(errs...)
}

// AuthKeys is the key set the transports check: Keys when the CLI built
// one, else one made of APIKey (none: authentication off).
func (c *Config) AuthKeys() (*auth.Keys, error) {
	if c.Keys != nil {
		return c.Keys, nil
	}
	return auth.New([]string{c.APIKey}, "")
}
