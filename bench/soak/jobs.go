package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// endpoint is one streaming route and its wire shape.
type endpoint struct {
	name, path string
	proto      Proto
	initial    int // events before the first token's (role chunk, created, ...)
	resumable  bool
}

var endpoints = []endpoint{
	{"chat", "/v1/chat/completions", ProtoOpenAI, 1, true},
	{"completions", "/v1/completions", ProtoOpenAI, 0, true},
	{"responses", "/v1/responses", ProtoResponses, 4, true},
	{"messages", "/v1/messages", ProtoMessages, 3, true},
	{"grpc", "sluice.v1.Inference/Generate", ProtoGRPC, 0, false},
}

// Client behaviours.
const (
	behaveNormal    = "normal"
	behaveAbandon   = "abandon"
	behaveSlow      = "slow_reader"
	behaveReconnect = "reconnect"
)

// job is one streaming request and what its client does with the stream.
type job struct {
	ep       endpoint
	stream   bool // HTTP: a stream, or the whole response at once (gRPC always streams)
	body     []byte
	grpcReq  *sluicev1.GenerateRequest
	key      string
	want     Expect
	behave   string
	cutAfter int           // abandon or reconnect: after this many events past ep.initial (0: on a timer)
	cutDelay time.Duration // abandon on a timer: this long after the request was sent
	slow     time.Duration // slow reader: pause between events
}

// Stop strings drawn for requests: common pieces of the model's English,
// so that many of them match.
var stopPool = []string{".", ",", " the", "\n", " is", "ing", " and", "!", "?", " a "}

var topics = []string{"rivers", "the moon", "bread", "trains", "music", "bees", "glass", "winter", "chess", "maps",
	"volcanoes", "paper", "tea", "bridges", "clocks", "salt", "whales", "copper", "kites", "deserts"}

// newJob draws one request: its endpoint, whether it streams (three in
// four HTTP requests do), its sampling and stops, and its client's
// behaviour.
func newJob(r *rand.Rand, n int, keys []string) job {
	ep := endpoints[pick(r, []float64{0.35, 0.175, 0.15, 0.15, 0.175})]
	max := 4 + r.IntN(21)
	// Keys alternate over the jobs, the malformed request of each ten
	// (n%10 == 9) left out: n/10 shifts the parity every ten, so each key
	// sends as many jobs as the other (keys.go reports their shares).
	j := job{ep: ep, stream: ep.proto == ProtoGRPC || r.Float64() < 0.75, key: keys[(n+n/10)%len(keys)], want: Expect{MaxTokens: max}}
	var stops []string
	if ep.proto != ProtoResponses && r.Float64() < 0.5 {
		for range 1 + r.IntN(2) {
			stops = append(stops, stopPool[r.IntN(len(stopPool))])
		}
		j.want.Stops = stops
	}
	prompt := fmt.Sprintf("Write a few sentences about %s (%d).", topics[r.IntN(len(topics))], n)
	temp := []float64{0, 0.7, 1}[r.IntN(3)]
	var req map[string]any
	switch ep.name {
	case "grpc":
		t := float32(temp)
		m := uint32(max)
		j.grpcReq = &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{
			Messages: []*sluicev1.ChatMessage{{Role: "user", Content: prompt}}}},
			Sampling: &sluicev1.SamplingParams{Temperature: &t, MaxTokens: &m, Stop: stops}}
	case "chat":
		req = map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}, "max_tokens": max}
	case "completions":
		req = map[string]any{"prompt": prompt, "max_tokens": max}
	case "responses":
		req = map[string]any{"input": prompt, "max_output_tokens": max, "store": false}
	case "messages":
		req = map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}, "max_tokens": max}
	}
	if req != nil {
		req["stream"], req["temperature"] = j.stream, temp
		if j.stream && ep.proto == ProtoOpenAI { // refused without a stream
			req["stream_options"] = map[string]bool{"include_usage": true}
		}
	}
	if stops != nil && req != nil {
		if ep.name == "messages" {
			req["stop_sequences"] = stops
		} else {
			req["stop"] = stops
		}
	}
	if req != nil {
		j.body, _ = json.Marshal(req)
	}
	switch x := r.Float64(); {
	case x < 0.30:
		j.behave = behaveAbandon
		if r.IntN(2) == 0 {
			j.cutDelay = time.Duration(r.Int64N(int64(3 * time.Second))) // queued, prefilling or decoding, whatever it reached
		} else {
			j.cutAfter = 1 + r.IntN(6) // mid-decode
		}
	case x < 0.40:
		j.behave, j.slow = behaveSlow, time.Duration(20+r.IntN(130))*time.Millisecond
	case x < 0.50 && ep.resumable:
		j.behave, j.cutAfter = behaveReconnect, 1+r.IntN(4)
	default:
		j.behave = behaveNormal
	}
	if !j.stream && j.behave != behaveNormal {
		// A whole response has no events to cut after or read slowly: its
		// client either waits for it or hangs up on a timer.
		j.cutAfter, j.slow = 0, 0
		if j.behave == behaveAbandon {
			j.cutDelay = time.Duration(r.Int64N(int64(3 * time.Second)))
		} else {
			j.behave = behaveNormal
		}
	}
	return j
}

// pick returns an index drawn with the given weights (summing to 1).
func pick(r *rand.Rand, w []float64) int {
	x := r.Float64()
	for i, p := range w {
		if x < p {
			return i
		}
		x -= p
	}
	return len(w) - 1
}

// bad is one malformed or over-limit request and the status it must get
// (0: none, the client leaves before the server could answer).
type bad struct {
	kind    string
	path    string
	body    string
	key     string // "" sends none
	status  int
	trickle bool // send half the body, then nothing until the server answers
	short   bool // announce more body than is sent, then close
}

func newBad(r *rand.Rand, keys []string) bad {
	key := keys[0]
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true` + extra + `}`
	}
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	kinds := []bad{
		{kind: "bad_json", path: "/v1/chat/completions", body: `{"messages":[{"role":"user",`, status: 400},
		{kind: "wrong_type", path: "/v1/completions", body: `{"prompt":{"a":1},"max_tokens":"x"}`, status: 400},
		{kind: "n_over_16", path: "/v1/chat/completions", body: chat(`,"n":17`), status: 400},
		{kind: "too_many_stops", path: "/v1/chat/completions", body: chat(`,"stop":[` + many(17, `"x"`) + `]`), status: 400},
		{kind: "stop_too_long", path: "/v1/messages", body: chat(`,"stop_sequences":["` + strings.Repeat("s", 300) + `"]`), status: 400},
		{kind: "too_many_messages", path: "/v1/chat/completions",
			body: `{"max_tokens":4,"messages":[` + many(2049, `{"role":"user","content":"m"}`) + `]}`, status: 400},
		{kind: "prompt_over_1MiB", path: "/v1/completions", body: `{"max_tokens":4,"prompt":"` + strings.Repeat("word ", 1<<18) + `"}`, status: 400},
		{kind: "prompt_over_context", path: "/v1/completions", body: `{"max_tokens":4,"prompt":"` + strings.Repeat("alpha beta ", 1500) + `"}`, status: 400},
		{kind: "max_tokens_0", path: "/v1/responses", body: `{"input":"hi","max_output_tokens":0,"stream":true}`, status: 400},
		{kind: "wrong_key", path: "/v1/chat/completions", body: chat(""), status: 401},
		{kind: "no_key", path: "/v1/messages", body: chat(""), status: 401},
		{kind: "unknown_route", path: "/v1/chat/complete", body: chat(""), status: 404},
		{kind: "trickled_body", path: "/v1/chat/completions", body: chat(""), status: 408, trickle: true},
		{kind: "cut_body", path: "/v1/completions", body: `{"prompt":"hello there","max_tokens":4}`, short: true},
		{kind: "resume_unknown", path: "/v1/streams/chatcmpl-nosuchstream", status: 404},
	}
	b := kinds[r.IntN(len(kinds))]
	switch b.kind {
	case "wrong_key":
		b.key = "not-a-key"
	case "no_key":
	default:
		b.key = key
	}
	return b
}

func authHeader(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}
