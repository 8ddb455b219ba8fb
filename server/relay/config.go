package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Upstream is one OpenAI-compatible server the relay forwards to.
type Upstream struct {
	// URL is the server's base: requests go to URL + "/v1/chat/completions"
	// (a URL that already ends in /v1 is accepted as is).
	URL string
	// Models are the names clients use for it. Empty: the ids its
	// GET /v1/models lists at start.
	Models []string
	// Model is the name sent upstream in place of the client's ("" keeps it).
	Model  string
	APIKey string // sent as "Authorization: Bearer KEY"

	Timeouts
	// Retries is how many more upstreams (or times, with one) a request is
	// tried on after a failure before the upstream answered.
	Retries int
	// MaxConcurrent streams at once; MaxQueue more may wait for a slot;
	// beyond that a request is refused with 429 and Retry-After.
	MaxConcurrent int
	MaxQueue      int
}

// Timeouts bound each phase of an upstream request. Zero is not "none":
// Validate refuses it, because the one failure a relay must never have is a
// client waiting forever on an upstream that went quiet.
type Timeouts struct {
	Connect   time.Duration // TCP (and TLS) connect
	FirstByte time.Duration // request sent → the upstream's response headers
	Stall     time.Duration // longest silence between two lines of its stream
}

// Defaults are the values a field left zero takes.
var Defaults = Upstream{
	Timeouts:      Timeouts{Connect: 5 * time.Second, FirstByte: 60 * time.Second, Stall: 30 * time.Second},
	Retries:       2,
	MaxConcurrent: 64,
	MaxQueue:      64,
}

// WithDefaults fills u's zero fields from d (negative Retries means none).
func (u Upstream) WithDefaults(d Upstream) Upstream {
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&u.Connect, d.Connect)
	set(&u.FirstByte, d.FirstByte)
	set(&u.Stall, d.Stall)
	if u.Retries == 0 {
		u.Retries = d.Retries
	}
	if u.Retries < 0 {
		u.Retries = 0
	}
	if u.MaxConcurrent == 0 {
		u.MaxConcurrent = d.MaxConcurrent
	}
	if u.MaxQueue == 0 {
		u.MaxQueue = d.MaxQueue
	}
	return u
}

func (u *Upstream) validate() error {
	var errs []error
	p, err := url.Parse(u.URL)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		errs = append(errs, fmt.Errorf("upstream %q: want an http(s) URL", u.URL))
	}
	for name, d := range map[string]time.Duration{"connect": u.Connect, "first-byte": u.FirstByte, "stall": u.Stall} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("upstream %s: %s timeout must be positive, got %v", u.URL, name, d))
		}
	}
	if u.MaxConcurrent < 1 || u.MaxQueue < 0 {
		errs = append(errs, fmt.Errorf("upstream %s: max_concurrent must be ≥ 1 and max_queue ≥ 0", u.URL))
	}
	return errors.Join(errs...)
}

// ParseFlag reads one --upstream value: URL, or NAMES=URL where NAMES are
// the comma-separated model names clients use for it.
func ParseFlag(v string) (Upstream, error) {
	var u Upstream
	if names, rest, ok := strings.Cut(v, "="); ok && !strings.Contains(names, "://") {
		u.Models = strings.Split(names, ",")
		v = rest
	}
	u.URL = v
	if u.URL == "" {
		return u, errors.New("--upstream: empty URL")
	}
	return u, nil
}

// fileUpstream is one entry of the config file. Durations are Go strings
// ("30s"); the key may come from the environment so the file holds no secret.
type fileUpstream struct {
	URL              string   `json:"url"`
	Models           []string `json:"models"`
	Model            string   `json:"model"`
	APIKey           string   `json:"api_key"`
	APIKeyEnv        string   `json:"api_key_env"`
	ConnectTimeout   string   `json:"connect_timeout"`
	FirstByteTimeout string   `json:"first_byte_timeout"`
	StallTimeout     string   `json:"stall_timeout"`
	Retries          *int     `json:"retries"`
	MaxConcurrent    int      `json:"max_concurrent"`
	MaxQueue         int      `json:"max_queue"`
}

// LoadFile reads a JSON config file:
//
//	{"upstreams": [{"url": "https://api.example.com", "models": ["gpt-x"],
//	  "api_key_env": "EXAMPLE_KEY", "stall_timeout": "20s", "retries": 1}]}
func LoadFile(path string) ([]Upstream, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("relay config: %w", err)
	}
	var f struct {
		Upstreams []fileUpstream `json:"upstreams"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields() // a misspelt timeout must not silently fall back to the default
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("relay config %s: %w", path, err)
	}
	var out []Upstream
	var errs []error
	for i, fu := range f.Upstreams {
		u := Upstream{URL: fu.URL, Models: fu.Models, Model: fu.Model, APIKey: fu.APIKey, MaxConcurrent: fu.MaxConcurrent, MaxQueue: fu.MaxQueue}
		if fu.APIKeyEnv != "" {
			if u.APIKey = os.Getenv(fu.APIKeyEnv); u.APIKey == "" {
				errs = append(errs, fmt.Errorf("relay config %s: upstreams[%d]: $%s is empty", path, i, fu.APIKeyEnv))
			}
		}
		if fu.Retries != nil {
			u.Retries = *fu.Retries
			if u.Retries == 0 {
				u.Retries = -1 // explicitly none, not "default"
			}
		}
		for _, d := range []struct {
			s   string
			dst *time.Duration
		}{{fu.ConnectTimeout, &u.Connect}, {fu.FirstByteTimeout, &u.FirstByte}, {fu.StallTimeout, &u.Stall}} {
			if d.s == "" {
				continue
			}
			if *d.dst, err = time.ParseDuration(d.s); err != nil {
				errs = append(errs, fmt.Errorf("relay config %s: upstreams[%d]: %w", path, i, err))
			}
		}
		out = append(out, u)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("relay config %s: no upstreams", path))
	}
	return out, errors.Join(errs...)
}
