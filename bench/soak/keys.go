package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The soak's two API keys share the load (jobs alternate between them), and
// what one key's request leaves behind must stay that key's (issue 30):
//
//   - share: each key's part of the completed requests and output tokens,
//     and of the 429s, phase by phase: with equal load, near half each;
//   - cross-key resume: a stream cut for a reconnect is first asked for by
//     the other key (GET /v1/streams/{id} with Last-Event-ID), which must
//     get 404, as if it did not exist; anything else is a cross-key read;
//   - cross-key cache: after the warm-up, one prompt is sent twice under the
//     first key and once under the second: the repeat must report cached
//     tokens (the cache works), the second key none (cached_tokens says
//     nothing across keys).

// keyStats is one key's part of a phase.
type keyStats struct {
	Sent      int `json:"sent"`
	Completed int `json:"completed"`
	Tokens    int `json:"output_tokens"`
	Refused   int `json:"http_429"`
}

// keyTally counts per key; safe for concurrent use.
type keyTally struct {
	mu   sync.Mutex
	keys map[string]*keyStats
}

func (t *keyTally) add(o outcome) {
	if o.key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[string]*keyStats{}
	}
	k := t.keys[o.key]
	if k == nil {
		k = &keyStats{}
		t.keys[o.key] = k
	}
	k.Sent++
	switch {
	case o.kind == "completed":
		k.Completed++
		k.Tokens += o.tokens
	case strings.HasPrefix(o.kind, "http_429"):
		k.Refused++
	}
}

// report names the keys by their place in keys (never the secrets
// themselves, which the report would otherwise carry) and gives each its
// share of the completed requests.
func (t *keyTally) report(keys []string) map[string]keyShare {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	for _, k := range t.keys {
		total += k.Completed
	}
	out := map[string]keyShare{}
	for i, key := range keys {
		var s keyStats
		if k := t.keys[key]; k != nil {
			s = *k
		}
		sh := keyShare{keyStats: s}
		if total > 0 {
			sh.Share = float64(s.Completed) / float64(total)
		}
		out[fmt.Sprintf("key%d", i+1)] = sh
	}
	return out
}

type keyShare struct {
	keyStats
	Share float64 `json:"share_of_completed"`
}

// crossKey counts the resume probes under the other key and what they read.
var crossKey struct {
	probes, reads atomic.Int64
	mu            sync.Mutex
	samples       []string
}

// otherKey is the key that is not key, among the soak's two.
var soakKeys []string

func otherKey(key string) string {
	for _, k := range soakKeys {
		if k != key {
			return k
		}
	}
	return ""
}

// probeCrossKey asks for stream id, cut at last, under the other key: the
// answer must be 404 (a transport error, the server restarting, counts as
// nothing). Only the OpenAI APIs resume by GET, which cannot start work.
func probeCrossKey(ctx context.Context, hc *http.Client, base string, j job, id string, last int64) {
	other := otherKey(j.key)
	if j.ep.proto != ProtoOpenAI || id == "" || other == "" {
		return
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/streams/"+id, nil)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	authHeader(req.Header, other)
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	crossKey.probes.Add(1)
	if resp.StatusCode == http.StatusNotFound {
		return
	}
	crossKey.reads.Add(1)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	crossKey.mu.Lock()
	defer crossKey.mu.Unlock()
	if len(crossKey.samples) < 4 {
		crossKey.samples = append(crossKey.samples, fmt.Sprintf("stream %s under the other key: HTTP %d %s", id, resp.StatusCode, body))
	}
}

// cacheProbe is the cross-key cache check's figures.
type cacheProbe struct {
	PromptTokens   int    `json:"prompt_tokens"`
	SameKeyCached  int    `json:"same_key_repeat_cached_tokens"`
	OtherKeyCached int    `json:"other_key_cached_tokens"`
	Err            string `json:"error,omitempty"`
}

// probeCache sends one prompt of several blocks twice under keys[0], then
// once under keys[1], each alone, and reads each answer's cached tokens.
func probeCache(ctx context.Context, hc *http.Client, base string, keys []string) cacheProbe {
	prompt := "A probe of the prefix cache, long enough for several blocks:" + strings.Repeat(" the same words again", 24)
	var p cacheProbe
	for i, key := range []string{keys[0], keys[0], keys[1]} {
		u, err := completionUsage(ctx, hc, base, key, prompt)
		if err != nil {
			p.Err = err.Error()
			return p
		}
		p.PromptTokens = u.PromptTokens
		switch i {
		case 1:
			p.SameKeyCached = u.Details.CachedTokens
		case 2:
			p.OtherKeyCached = u.Details.CachedTokens
		}
	}
	return p
}

type usage struct {
	PromptTokens int `json:"prompt_tokens"`
	Details      struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func completionUsage(ctx context.Context, hc *http.Client, base, key, prompt string) (usage, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 1, "temperature": 0})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	authHeader(req.Header, key)
	resp, err := hc.Do(req)
	if err != nil {
		return usage{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return usage{}, fmt.Errorf("cache probe: HTTP %d %s", resp.StatusCode, tail(string(raw), 300))
	}
	var r struct {
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return usage{}, fmt.Errorf("cache probe: %w", err)
	}
	return r.Usage, nil
}

// keysReport is the report's per-key section.
type keysReport struct {
	Phase1        map[string]keyShare `json:"phase1"`
	Phase2        map[string]keyShare `json:"phase2"`
	ResumeProbes  int64               `json:"cross_key_resume_probes"`
	CrossKeyReads int64               `json:"cross_key_reads"`
	Samples       []string            `json:"cross_key_samples,omitempty"`
	Cache         cacheProbe          `json:"cross_key_cache"`
}

// minKeyShare is the least part of phase 2's completed requests a key may
// have under an equal load: the draws of ~1,000 requests put it within a
// few points of half; a key crowded out would be far below.
const minKeyShare = 0.4

// check adds the per-key failures to failures.
func (k *keysReport) check(failures []string) []string {
	crossKey.mu.Lock()
	k.ResumeProbes, k.CrossKeyReads, k.Samples = crossKey.probes.Load(), crossKey.reads.Load(), crossKey.samples
	crossKey.mu.Unlock()
	if k.CrossKeyReads > 0 {
		failures = append(failures, fmt.Sprintf("%d of %d cross-key resumes read another key's stream", k.CrossKeyReads, k.ResumeProbes))
	}
	switch c := k.Cache; {
	case c.Err != "":
		failures = append(failures, c.Err)
	case c.OtherKeyCached > 0:
		failures = append(failures, fmt.Sprintf("the second key's request reported %d cached tokens of the first key's prompt", c.OtherKeyCached))
	case c.SameKeyCached == 0:
		failures = append(failures, "the cache probe's repeat under the same key reported no cached tokens: the probe shows nothing")
	}
	for name, s := range k.Phase2 {
		if s.Share < minKeyShare {
			failures = append(failures, fmt.Sprintf("%s completed %.0f%% of phase 2's requests, under %.0f%%", name, 100*s.Share, 100*minKeyShare))
		}
	}
	return failures
}

func (k *keysReport) print(w io.Writer) {
	for i, ph := range []map[string]keyShare{k.Phase1, k.Phase2} {
		fmt.Fprintf(w, "phase %d by key:", i+1)
		for _, name := range []string{"key1", "key2"} {
			s := ph[name]
			fmt.Fprintf(w, " %s %d sent, %d completed (%.0f%%), %d tokens, %d refused;", name, s.Sent, s.Completed, 100*s.Share, s.Tokens, s.Refused)
		}
		fmt.Fprintln(w)
	}
	c := k.Cache
	fmt.Fprintf(w, "cross-key: %d of %d resumes under the other key read a stream; cache probe (%d prompt tokens): repeat %d cached, other key %d cached\n",
		k.CrossKeyReads, k.ResumeProbes, c.PromptTokens, c.SameKeyCached, c.OtherKeyCached)
	if c.Err != "" {
		fmt.Fprintf(w, "  cache probe: %s\n", c.Err)
	}
}
