package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice/server/metrics/metricstest"
)

// chatShape and completionsShape are the OpenAI chunk streams as the fake
// upstream speaks them, beside messagesShape and responsesShape.
var (
	chatShape = shape{
		name: "chat", path: "/v1/chat/completions", body: chatBody, start: sseStart,
		text: func(w http.ResponseWriter, s string) { chunk(w, 0, s) },
		end:  func(w http.ResponseWriter) { finish(w, "stop") },
		fail: func(w http.ResponseWriter) {
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"the GPU fell over\"}}\n\n")
			flush(w)
		},
	}
	completionsShape = shape{
		name: "completions", path: "/v1/completions", body: `{"model":"m","prompt":"hi","stream":true}`, start: sseHeader,
		text: func(w http.ResponseWriter, s string) {
			fmt.Fprintf(w, "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":%s,\"finish_reason\":null}]}\n\n", rawJSON(s))
			flush(w)
		},
		end:  chatShape.end,
		fail: chatShape.fail,
	}
)

// scrape GETs the relay's /metrics and parses it as Prometheus does.
func scrape(t *testing.T, rig *relayRig) metricstest.Families {
	t.Helper()
	resp, err := http.Get(rig.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	return fams
}

// TestRelayMetricsEveryAPI: the per-upstream figures issue 16 lists, read
// from /metrics with the Prometheus text parser, for each of the four
// relayed APIs: TTFT and ITL as seen through the relay (streamed and
// whole), upstream errors by kind (malformed, in-band, stall, 5xx and 4xx
// before the first byte), truncations, streams cancelled upstream after
// the client left, and the chunks received after it left (~0: the relay
// closes the upstream at once). Every other series stays at zero, so a
// figure counted under the wrong name or kind fails too.
func TestRelayMetricsEveryAPI(t *testing.T) {
	type want map[string]float64 // series (name or name/kind) → value; every other counter is 0
	cases := []struct {
		name   string
		whole  bool // not streamed
		script shapeScript
		leave  bool // the client hangs up after 3 text events
		want   want
	}{
		{name: "clean", script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			sh.start(w)
			for _, s := range []string{"a", "b", "c"} {
				sh.text(w, s)
			}
			sh.end(w)
		}, want: want{"ttft": 1, "itl": 2, "streams": 1}},
		{name: "clean, whole", whole: true, script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			sh.start(w)
			sh.text(w, "a")
			sh.text(w, "b")
			sh.end(w)
		}, want: want{"ttft": 1, "itl": 1, "streams": 1}},
		{name: "malformed", script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			fmt.Fprint(w, "data: {\"type\":\n\n")
			flush(w)
			f.waitGone(r)
		}), want: want{"ttft": 1, "streams": 1, "errors/malformed": 1}},
		{name: "in-band", script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) { sh.fail(w) }),
			want: want{"ttft": 1, "streams": 1, "errors/in_band": 1}},
		{name: "truncated", script: afterA(func(shape, http.ResponseWriter, *http.Request, *fakeUpstream) {}),
			want: want{"ttft": 1, "streams": 1, "truncated": 1}},
		{name: "stall", script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) { f.waitGone(r) }),
			want: want{"ttft": 1, "streams": 1, "errors/stall": 1}},
		{name: "5xx", script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			w.WriteHeader(http.StatusInternalServerError)
		},
			want: want{"errors/status_5xx": 1}},
		{name: "4xx", script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			http.Error(w, `{"error":{"message":"bad","type":"invalid_request_error"}}`, http.StatusBadRequest)
		}, want: want{"errors/status_4xx": 1}},
		{name: "client leaves", leave: true, script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
			sh.start(w)
			for r.Context().Err() == nil {
				sh.text(w, "x")
				time.Sleep(2 * time.Millisecond)
			}
			f.gone <- struct{}{}
		}, want: want{"ttft": 1, "streams": 1, "cancelled": 1}},
	}
	series := map[string]string{
		"ttft": "sluice_relay_time_to_first_token_seconds", "itl": "sluice_relay_inter_token_latency_seconds",
		"truncated": "sluice_relay_upstream_truncated_total", "cancelled": "sluice_relay_upstream_cancelled_total",
		"after": "sluice_relay_tokens_after_client_left_total", "streams": "sluice_relay_streams_total",
	}
	kinds := []string{"connect", "timeout", "status_4xx", "status_5xx", "stall", "malformed", "in_band"}
	for _, sh := range []shape{chatShape, completionsShape, messagesShape, responsesShape} {
		for _, c := range cases {
			t.Run(sh.name+"/"+c.name, func(t *testing.T) {
				leakCheck(t)
				up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) { c.script(sh, w, r, f) })
				rig := newRelay(t, up, fast)
				body := sh.body
				if c.whole {
					body = strings.Replace(strings.Replace(body, `"stream":true`, `"stream":false`, 1), `,"stream_options":{"include_usage":true}`, "", 1)
				}
				ctx, cancel := context.WithCancel(t.Context())
				limit := 0
				if c.leave {
					limit = 3
				}
				if c.whole {
					resp, err := http.Post(rig.url+sh.path, "application/json", strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"ab"`) {
						t.Errorf("whole answer %d %s", resp.StatusCode, raw)
					}
				} else if sh.name == "chat" || sh.name == "completions" { // unnamed events: the chunk reader
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rig.url+sh.path, strings.NewReader(body))
					if res := do(t, req, limit); c.name == "clean" && (res.text != "abc" || !res.done) {
						t.Fatalf("clean stream: %+v", res)
					}
				} else {
					status, raw, evs, _ := postShape(t, ctx, rig.url, sh, body, limit)
					if c.name == "clean" && len(evs) == 0 {
						t.Fatalf("%d %s: no events", status, raw)
					}
				}
				cancel()
				host := mustHost(t, up.URL)
				// The reader ends after the response: poll until the expected figures show.
				var fams metricstest.Families
				deadline := time.Now().Add(5 * time.Second)
				value := func(k string) float64 {
					if name, kind, ok := strings.Cut(k, "/"); ok {
						return fams.Value(t, "sluice_relay_upstream_"+name+"_total", "upstream", host, "kind", kind)
					}
					return fams.Value(t, series[k], "upstream", host)
				}
				for {
					fams = scrape(t, rig)
					settled := fams.Value(t, "sluice_relay_streams_in_flight", "upstream", host) == 0
					for k, v := range c.want {
						settled = settled && value(k) == v
					}
					if settled || time.Now().After(deadline) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				for k := range series {
					if k == "after" {
						continue
					}
					if got, w := value(k), c.want[k]; got != w && !(k == "itl" && c.leave && got >= 2) {
						t.Errorf("%s = %v, want %v", series[k], got, w)
					}
				}
				for _, kind := range kinds {
					if got, w := value("errors/"+kind), c.want["errors/"+kind]; got != w {
						t.Errorf("errors{kind=%s} = %v, want %v", kind, got, w)
					}
				}
				// What was in flight when the client left (the socket's buffer) may
				// still be read; a relay that kept reading would count hundreds here.
				if got := value("after"); got > 4 {
					t.Errorf("%v chunks received after the client left, want ~0", got)
				} else if c.leave {
					t.Logf("chunks received after the client left: %v", got)
				}
			})
		}
	}
}

func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
