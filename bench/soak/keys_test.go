package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The jobs' keys alternate so that each key sends as many as the other,
// the malformed request of each ten left out.
func TestJobsShareKeysEvenly(t *testing.T) {
	keys := []string{"one", "two"}
	r := rand.New(rand.NewPCG(1, 2))
	count := map[string]int{}
	for n := range 200 {
		if n%10 == 9 {
			continue
		}
		count[newJob(r, n, keys).key]++
	}
	if count["one"] != 90 || count["two"] != 90 {
		t.Fatalf("jobs per key %v, want 90 each", count)
	}
}

// The per-key tally reports each key by its place, never by the secret,
// with its share of the completed requests, and the checks fail on a
// cross-key read, a cross-key cache hit, a probe that shows nothing, or a
// key crowded out.
func TestKeysReport(t *testing.T) {
	keys := []string{"secret-one", "secret-two"}
	var kt keyTally
	for range 6 {
		kt.add(outcome{kind: "completed", key: keys[0], tokens: 3})
	}
	for range 4 {
		kt.add(outcome{kind: "completed", key: keys[1], tokens: 2})
	}
	kt.add(outcome{kind: "http_429_queue_full", key: keys[1]})
	kt.add(outcome{kind: "abandoned", key: keys[1]})
	rep := kt.report(keys)
	if got := rep["key1"]; got.Completed != 6 || got.Tokens != 18 || got.Share != 0.6 {
		t.Errorf("key1 %+v", got)
	}
	if got := rep["key2"]; got.Sent != 6 || got.Completed != 4 || got.Refused != 1 || got.Share != 0.4 {
		t.Errorf("key2 %+v", got)
	}
	for name := range rep {
		if strings.Contains(name, "secret") {
			t.Errorf("the report names a key by its secret: %s", name)
		}
	}
	for _, tc := range []struct {
		name string
		k    keysReport
		want string
	}{
		{"clean", keysReport{Phase2: rep, Cache: cacheProbe{SameKeyCached: 48}}, ""},
		{"other key's cache hit", keysReport{Phase2: rep, Cache: cacheProbe{SameKeyCached: 48, OtherKeyCached: 48}}, "second key"},
		{"probe shows nothing", keysReport{Phase2: rep, Cache: cacheProbe{}}, "no cached tokens"},
		{"crowded out", keysReport{Phase2: map[string]keyShare{"key1": {Share: 0.9}, "key2": {Share: 0.1}}, Cache: cacheProbe{SameKeyCached: 1}}, "key2 completed 10%"},
	} {
		got := strings.Join(tc.k.check(nil), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: failures %q, want %q", tc.name, got, tc.want)
		}
	}
	crossKey.reads.Add(1)
	defer crossKey.reads.Add(-1)
	k := keysReport{Phase2: rep, Cache: cacheProbe{SameKeyCached: 1}}
	if got := strings.Join(k.check(nil), "; "); !strings.Contains(got, "cross-key resumes read") {
		t.Errorf("a cross-key read: failures %q", got)
	}
}
