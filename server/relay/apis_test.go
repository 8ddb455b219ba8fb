package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/relay"
)

// shape is one of the APIs beyond chat as the fake upstream speaks it and
// as the relay's client reads it: the Anthropic Messages API and the OpenAI
// Responses API.
type shape struct {
	name, path string
	body       string // a streaming request
	start      func(w http.ResponseWriter)
	text       func(w http.ResponseWriter, s string)
	end        func(w http.ResponseWriter) // a proper ending: stop, usage 7 in / 3 out
	fail       func(w http.ResponseWriter) // an in-band upstream error
	// read sums what the client got from a stream of the shape's events.
	read func(t *testing.T, evs []namedEvent) apiResult
}

type namedEvent struct{ name, data, id string }

// apiResult is a relayed stream as its client understood it.
type apiResult struct {
	text, finish string // finish: stop_reason / response status
	stopSeq      string
	in, out      float64 // usage
	errCode      string  // an in-band error's code
	ended        bool    // the shape's last event arrived
}

// rawJSON quotes s byte for byte, as an upstream that splits a character
// across events sends it (json.Marshal would turn the halves into U+FFFD).
func rawJSON(s string) string { return `"` + s + `"` }

func flush(w http.ResponseWriter) { w.(http.Flusher).Flush() }

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

func named(w http.ResponseWriter, name, data string) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	flush(w)
}

var messagesShape = shape{
	name: "messages", path: "/v1/messages",
	body: `{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
	start: func(w http.ResponseWriter) {
		sseHeader(w)
		named(w, "message_start", `{"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":7,"output_tokens":0}}}`)
		named(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		named(w, "ping", `{"type":"ping"}`)
	},
	text: func(w http.ResponseWriter, s string) {
		named(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, rawJSON(s)))
	},
	end: func(w http.ResponseWriter) {
		named(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
		named(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":3}}`)
		named(w, "message_stop", `{"type":"message_stop"}`)
	},
	fail: func(w http.ResponseWriter) {
		named(w, "error", `{"type":"error","error":{"type":"overloaded_error","message":"the GPU fell over"}}`)
	},
	read: func(t *testing.T, evs []namedEvent) apiResult {
		var r apiResult
		for i, ev := range evs {
			var e struct {
				Type  string `json:"type"`
				Delta struct {
					Text         string  `json:"text"`
					StopReason   *string `json:"stop_reason"`
					StopSequence *string `json:"stop_sequence"`
				} `json:"delta"`
				Usage *struct {
					InputTokens  float64 `json:"input_tokens"`
					OutputTokens float64 `json:"output_tokens"`
				} `json:"usage"`
				Error *struct {
					Type string `json:"type"`
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.name {
				t.Fatalf("event %d %q: data %q (%v)", i, ev.name, ev.data, err)
			}
			switch e.Type {
			case "content_block_delta":
				r.text += e.Delta.Text
			case "message_delta":
				if e.Delta.StopReason != nil {
					r.finish = *e.Delta.StopReason
				}
				if e.Delta.StopSequence != nil {
					r.stopSeq = *e.Delta.StopSequence
				}
				if e.Usage != nil {
					r.in, r.out = e.Usage.InputTokens, e.Usage.OutputTokens
				}
			case "message_stop":
				r.ended = true
			case "error":
				if e.Error.Type == "" {
					t.Errorf("in-band error without its type: %s", ev.data)
				}
				r.errCode = e.Error.Code
			}
		}
		return r
	},
}

func responsesEvent(w http.ResponseWriter, typ, fields string) {
	named(w, typ, fmt.Sprintf(`{"type":%q,"sequence_number":0%s}`, typ, fields))
}

var responsesShape = shape{
	name: "responses", path: "/v1/responses",
	body: `{"model":"m","input":"hi","stream":true}`,
	start: func(w http.ResponseWriter) {
		sseHeader(w)
		responsesEvent(w, "response.created", `,"response":{"id":"resp_up","status":"in_progress","output":[]}`)
		responsesEvent(w, "response.output_item.added", `,"output_index":0,"item":{"type":"message","id":"msg_up","content":[]}`)
	},
	text: func(w http.ResponseWriter, s string) {
		responsesEvent(w, "response.output_text.delta", fmt.Sprintf(`,"output_index":0,"content_index":0,"item_id":"msg_up","delta":%s`, rawJSON(s)))
	},
	end: func(w http.ResponseWriter) {
		responsesEvent(w, "response.output_text.done", `,"output_index":0,"content_index":0,"item_id":"msg_up","text":"..."`)
		responsesEvent(w, "response.incomplete", `,"response":{"id":"resp_up","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10}}`)
	},
	fail: func(w http.ResponseWriter) {
		responsesEvent(w, "error", `,"code":"server_error","message":"the GPU fell over","param":null`)
		responsesEvent(w, "response.failed", `,"response":{"id":"resp_up","status":"failed","error":{"code":"server_error","message":"the GPU fell over"}}`)
	},
	read: func(t *testing.T, evs []namedEvent) apiResult {
		var r apiResult
		for i, ev := range evs {
			var e struct {
				Type     string `json:"type"`
				Seq      *int   `json:"sequence_number"`
				Delta    string `json:"delta"`
				Code     string `json:"code"`
				Response *struct {
					Status string `json:"status"`
					Output []struct {
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"output"`
					Usage *struct {
						InputTokens  float64 `json:"input_tokens"`
						OutputTokens float64 `json:"output_tokens"`
					} `json:"usage"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.name || e.Seq == nil || *e.Seq != i {
				t.Fatalf("event %d %q: data %q (%v)", i, ev.name, ev.data, err)
			}
			switch e.Type {
			case "response.output_text.delta":
				r.text += e.Delta
			case "response.completed", "response.incomplete", "response.failed":
				r.finish, r.ended = e.Response.Status, e.Type != "response.failed"
				if u := e.Response.Usage; u != nil {
					r.in, r.out = u.InputTokens, u.OutputTokens
				}
				if out := e.Response.Output; e.Type != "response.failed" && (len(out) != 1 || len(out[0].Content) != 1 || out[0].Content[0].Text != r.text) {
					t.Errorf("%s carries output %+v, want the deltas %q", e.Type, out, r.text)
				}
			case "error":
				r.errCode = e.Code
			}
		}
		return r
	},
}

var shapes = []shape{messagesShape, responsesShape}

// postShape sends a request of the shape and reads its events, all of them
// or (limit > 0) up to limit text events, then hangs up.
func postShape(t *testing.T, ctx context.Context, url string, sh shape, body string, limit int) (status int, raw string, evs []namedEvent, keepAlives int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+sh.path, strings.NewReader(body))
	r := readShape(t, req, limit)
	return r.status, r.raw, r.evs, r.keepAlives
}

// shapeRead is what a client read of a stream of named events.
type shapeRead struct {
	status           int
	raw              string // a non-200 body
	evs              []namedEvent
	keepAlives       int
	streamID, lastID string
}

func readShape(t *testing.T, req *http.Request, limit int) (r shapeRead) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r.status, r.streamID = resp.StatusCode, resp.Header.Get("X-Sluice-Stream-Id")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		r.raw = string(b)
		return r
	}
	br := bufio.NewReader(resp.Body)
	var cur namedEvent
	texts := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return r
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && cur.data != "":
			if cur.name == "ping" {
				r.keepAlives++
			} else {
				r.evs = append(r.evs, cur)
			}
			if strings.HasSuffix(cur.name, "delta") {
				texts++
			}
			cur = namedEvent{}
			if limit > 0 && texts >= limit {
				return r
			}
		case strings.HasPrefix(line, ":"):
			r.keepAlives++
		case strings.HasPrefix(line, "id: "):
			r.lastID, cur.id = line[4:], line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
}

// shapeScript is a fake upstream's answer in a shape.
type shapeScript func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream)

// afterA starts a stream, sends the text "a", then runs then.
func afterA(then shapeScript) shapeScript {
	return func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sh.start(w)
		sh.text(w, "a")
		then(sh, w, r, f)
	}
}

// endless streams "x" until the relay closes the connection.
func endless(sh shape) func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
	return func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
		sh.start(w)
		for r.Context().Err() == nil {
			sh.text(w, "x")
		}
		f.gone <- struct{}{}
	}
}

// TestRelayAPIsFaults: the Messages and Responses APIs through the relay
// against a fake upstream of the same API: a clean stream, each fault the
// chat tests cover (a stall mid-stream, truncation, a malformed event, an
// in-band upstream error, 5xx before the first byte, an upstream without the
// endpoint), each ending as the API's own error, with no leak.
func TestRelayAPIsFaults(t *testing.T) {
	type fault struct {
		name   string
		up     relay.Upstream
		script shapeScript
		check  func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig)
	}
	faults := []fault{
		{
			name: "a clean stream", up: fast,
			script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sh.start(w)
				sh.text(w, "Hel")
				sh.text(w, "lo \xe2\x82") // a character split across events
				sh.text(w, "\xac!")
				sh.end(w)
			},
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				want := map[string]string{"messages": "max_tokens", "responses": "incomplete"}[sh.name]
				if res.text != "Hello €!" || res.finish != want || !res.ended || res.in != 7 || res.out != 3 || res.errCode != "" {
					t.Errorf("got %+v, want the text, %s, usage 7/3", res, want)
				}
				body := <-rig.up.bodies
				if body["stream"] != true || body["model"] != "m" || body["stream_options"] != nil {
					t.Errorf("upstream body %v: stream asked for, no stream_options (not this API's field)", body)
				}
			},
		},
		{
			name: "a stall mid-stream", up: fast,
			script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) { f.waitGone(r) }),
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if res.text != "a" || res.errCode != "stall_timeout" || res.ended {
					t.Errorf("got %+v, want the text then stall_timeout", res)
				}
				awaitGone(t, rig.up)
			},
		},
		{
			name: "truncated", up: fast,
			script: afterA(func(shape, http.ResponseWriter, *http.Request, *fakeUpstream) {}),
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if res.text != "a" || res.errCode != "upstream_truncated" {
					t.Errorf("got %+v, want upstream_truncated", res)
				}
				if n := counter(t, rig.reg, "sluice_relay_upstream_truncated_total"); n != 1 {
					t.Errorf("truncations %v", n)
				}
			},
		},
		{
			name: "a malformed event", up: fast,
			script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				fmt.Fprint(w, "data: {\"type\":\n\n")
				flush(w)
				f.waitGone(r)
			}),
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if res.text != "a" || res.errCode != "upstream_malformed" {
					t.Errorf("got %+v, want upstream_malformed", res)
				}
				awaitGone(t, rig.up)
			},
		},
		{
			name: "an in-band upstream error", up: fast,
			script: afterA(func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) { sh.fail(w) }),
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if res.text != "a" || res.errCode != "upstream_error" || res.ended {
					t.Errorf("got %+v, want upstream_error", res)
				}
			},
		},
		{
			name: "5xx before the first byte, retried", up: withRetries(fast, 1),
			script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				w.WriteHeader(http.StatusServiceUnavailable)
			},
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if status != http.StatusBadGateway || rig.up.requests.Load() != 2 || !strings.Contains(raw, "upstream_unavailable") {
					t.Errorf("status %d after %d requests: %s", status, rig.up.requests.Load(), raw)
				}
				checkErrorShape(t, sh, raw, "api_error")
			},
		},
		{
			name: "an upstream without the endpoint", up: fast,
			script: func(sh shape, w http.ResponseWriter, r *http.Request, f *fakeUpstream) { http.NotFound(w, r) },
			check: func(t *testing.T, sh shape, status int, raw string, res apiResult, rig *relayRig) {
				if status != http.StatusNotFound || !strings.Contains(raw, "has no "+sh.path+" endpoint") || !strings.Contains(raw, "upstream_endpoint_missing") {
					t.Errorf("status %d: %s", status, raw)
				}
				checkErrorShape(t, sh, raw, "not_found_error")
			},
		},
	}
	for _, sh := range shapes {
		for _, ft := range faults {
			t.Run(sh.name+"/"+ft.name, func(t *testing.T) {
				leakCheck(t)
				rig := newRelay(t, newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) { ft.script(sh, w, r, f) }), ft.up)
				status, raw, evs, _ := postShape(t, t.Context(), rig.url, sh, sh.body, 0)
				var res apiResult
				if status == http.StatusOK {
					res = sh.read(t, evs)
				}
				ft.check(t, sh, status, raw, res, rig)
			})
		}
	}
}

// checkErrorShape: an error before the first byte is in the API's shape
// (Anthropic's {"type":"error","error":{"type":…}}, OpenAI's {"error":{…}}).
func checkErrorShape(t *testing.T, sh shape, raw, anthropicType string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Error.Message == "" {
		t.Fatalf("error body %q: %v", raw, err)
	}
	if sh.name == "messages" && (e.Type != "error" || e.Error.Type != anthropicType) {
		t.Errorf("Anthropic error %q, want type error / %s", raw, anthropicType)
	}
	if sh.name == "responses" && e.Type != "" {
		t.Errorf("OpenAI error with a top-level type: %q", raw)
	}
}

// TestRelayAPIsGuarantees: the stream writer's guarantees for each API — a
// client that leaves closes the upstream at once, a stop string held back
// here closes it too, and a silent upstream is covered by keep-alives (ping
// events on the Messages API, comments on Responses).
func TestRelayAPIsGuarantees(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name+"/client leaves", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, endless(sh))
			rig := newRelay(t, up, fast)
			ctx, cancel := context.WithCancel(t.Context())
			_, _, evs, _ := postShape(t, ctx, rig.url, sh, sh.body, 3)
			cancel()
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			awaitGone(t, up)
			waitFor(t, func() bool { return counter(t, rig.reg, "sluice_relay_upstream_cancelled_total") == 1 })
		})
		t.Run(sh.name+"/resume", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, endless(sh))
			rig := newRelay(t, up, fast)
			ctx, cancel := context.WithCancel(t.Context())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rig.url+sh.path, strings.NewReader(sh.body))
			first := readShape(t, req, 3)
			cancel()
			awaitGone(t, up)
			// Reconnect from the second event (by its id: a ping, not in
			// evs, may come before it): the rest of what was sent is
			// replayed from this server's log, then the stream ends with a
			// resume_gap in the API's shape (the upstream's generation was
			// cancelled and no second one is started).
			again, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, rig.url+"/v1/streams/"+first.streamID, nil)
			again.Header.Set("Last-Event-ID", first.evs[1].id)
			rest := readShape(t, again, 0)
			if rest.status != http.StatusOK || len(rest.evs) < len(first.evs)-2 {
				t.Fatalf("resume: %d %s, %d events after 2 (first connection read %d)", rest.status, rest.raw, len(rest.evs), len(first.evs))
			}
			for i, ev := range first.evs[2:] {
				if rest.evs[i] != ev {
					t.Fatalf("replayed event %d %+v, first sent %+v", i, rest.evs[i], ev)
				}
			}
			all := sh.read(t, append(first.evs[:2:2], rest.evs...))
			if all.errCode != "resume_gap" || all.ended || strings.Trim(all.text, "x") != "" {
				t.Errorf("resumed stream %+v, want the replay then resume_gap", all)
			}
			if n := up.requests.Load(); n != 1 {
				t.Errorf("%d upstream requests: a resume must never start a second generation", n)
			}
		})
		t.Run(sh.name+"/keep-alive", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sh.start(w)
				for _, s := range []string{"a", "b", "c"} {
					time.Sleep(250 * time.Millisecond)
					sh.text(w, s)
				}
				sh.end(w)
			})
			rig := newRelay(t, up, slowStall, func(c *server.Config) { c.KeepAlive = 50 * time.Millisecond })
			status, raw, evs, keeps := postShape(t, t.Context(), rig.url, sh, sh.body, 0)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, raw)
			}
			if res := sh.read(t, evs); res.text != "abc" || !res.ended || keeps < 3 {
				t.Errorf("got %+v with %d keep-alives, want the text and a keep-alive in each pause", res, keeps)
			}
		})
		if sh.name != "messages" {
			continue // the Responses API has no stop strings
		}
		t.Run(sh.name+"/stop string", func(t *testing.T) {
			leakCheck(t)
			up := newFake(t, func(w http.ResponseWriter, r *http.Request, f *fakeUpstream) {
				sh.start(w)
				for _, s := range []string{"one ", "two EN", "D three"} {
					sh.text(w, s)
				}
				for r.Context().Err() == nil {
					sh.text(w, " more")
				}
				f.gone <- struct{}{}
			})
			rig := newRelay(t, up, fast)
			body := strings.Replace(sh.body, `"stream":true`, `"stream":true,"stop_sequences":["END"]`, 1)
			status, raw, evs, _ := postShape(t, t.Context(), rig.url, sh, body, 0)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, raw)
			}
			res := sh.read(t, evs)
			if res.text != "one two " || res.finish != "stop_sequence" || res.stopSeq != "END" || !res.ended {
				t.Errorf("got %+v, want the text before END, stop_sequence END", res)
			}
			awaitGone(t, up)
		})
	}
}
