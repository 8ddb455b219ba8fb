package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// outcome is what one request came to.
type outcome struct {
	kind      string // "completed", "abandoned", "cut" (the soak's end), "malformed", or an error kind
	endpoint  string
	abandonAt string // abandoned: "before_first_token" or "mid_decode"
	errCode   string // a completed stream ended by an in-band error
	detail    string
	resumed   bool
	tokens    int
	key       string // the API key it was sent under (keys.go)
}

// open counts streams whose response headers arrived and whose body is
// still being read: the streams held.
var open, openPeak atomic.Int64

func holdOpen() func() {
	n := open.Add(1)
	for {
		p := openPeak.Load()
		if n <= p || openPeak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { open.Add(-1) }
}

// conns is how the soak's clients reach one server.
type conns struct {
	hc   *http.Client
	cc   *grpc.ClientConn
	base string
}

// runJob sends j over its transport as j's client behaves.
func runJob(ctx context.Context, cl conns, j job) outcome {
	o := runJobAs(ctx, cl, j)
	o.key = j.key
	return o
}

func runJobAs(ctx context.Context, cl conns, j job) outcome {
	switch {
	case j.ep.proto == ProtoGRPC:
		return runGRPC(ctx, cl.cc, j)
	case !j.stream:
		return runWhole(ctx, cl.hc, cl.base, j)
	}
	return runStream(ctx, cl.hc, cl.base, j)
}

// send posts j's body under j's key on a context of its own, cancelled after
// j's cut delay when its client is one that abandons; the caller defers stop.
func send(ctx context.Context, hc *http.Client, base string, j job) (context.Context, *http.Response, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	stop := cancel
	if j.behave == behaveAbandon && j.cutDelay > 0 {
		t := time.AfterFunc(j.cutDelay, cancel)
		stop = func() { t.Stop(); cancel() }
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+j.ep.path, bytes.NewReader(j.body))
	req.Header.Set("Content-Type", "application/json")
	authHeader(req.Header, j.key)
	resp, err := hc.Do(req)
	return ctx, resp, stop, err
}

// runWhole sends a non-streaming request and checks the response it gets.
func runWhole(ctx context.Context, hc *http.Client, base string, j job) outcome {
	o := outcome{endpoint: j.ep.name + "_whole"}
	ctx, resp, stop, err := send(ctx, hc, base, j)
	defer stop()
	if err != nil {
		return failed(ctx, o, j, err, "connect")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpError(o, resp)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return failed(ctx, o, j, err, "body")
	}
	c, err := CheckWhole(j.ep.proto, raw, j.want)
	if err != nil {
		o.kind, o.detail = "malformed", fmt.Sprintf("%s whole %s: %v\n%s", j.ep.name, j.body, err, tail(string(raw), 2000))
		return o
	}
	o.kind, o.tokens = "completed", c.OutTokens
	return o
}

// runStream sends j and reads its stream as j's client behaves, then checks
// what it received when the stream ran to its end.
func runStream(ctx context.Context, hc *http.Client, base string, j job) outcome {
	o := outcome{endpoint: j.ep.name}
	ctx, resp, stop, err := send(ctx, hc, base, j)
	defer stop()
	if err != nil {
		return failed(ctx, o, j, err, "connect")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpError(o, resp)
	}
	defer holdOpen()()
	var raw bytes.Buffer
	events, last, err := readEvents(resp.Body, &raw, j, -1)
	switch {
	case errors.Is(err, errCut) && j.behave == behaveReconnect:
		resp.Body.Close()
		probeCrossKey(ctx, hc, base, j, resp.Header.Get("X-Sluice-Stream-Id"), last) // keys.go
		more, err := resume(ctx, hc, base, j, resp.Header.Get("X-Sluice-Stream-Id"), last, &raw)
		if err != nil {
			return failed(ctx, o, j, err, "resume")
		}
		o.resumed = true
		_ = more
	case errors.Is(err, errCut):
		o.kind, o.abandonAt = "abandoned", "mid_decode"
		return o
	case err != nil:
		if j.behave == behaveAbandon && ctx.Err() != nil {
			o.kind, o.abandonAt = "abandoned", "before_first_token"
			if events > j.ep.initial {
				o.abandonAt = "mid_decode"
			}
			return o
		}
		return failed(ctx, o, j, err, "stream")
	}
	c, err := Check(j.ep.proto, raw.Bytes(), j.want)
	if err != nil {
		o.kind, o.detail = "malformed", fmt.Sprintf("%s %s: %v\n%s", j.ep.name, j.body, err, tail(raw.String(), 2000))
		return o
	}
	o.kind, o.errCode, o.tokens = "completed", c.ErrCode, max(c.OutTokens, 0)
	return o
}

var errCut = errors.New("the client cut the stream")

// readEvents copies whole events from body into raw until the body ends.
// For a job that cuts (abandon or reconnect after cutAfter events past the
// endpoint's first ones) it stops there with errCut. It returns the events
// read and the last event id seen.
func readEvents(body io.Reader, raw *bytes.Buffer, j job, _ int) (int, int64, error) {
	br := bufio.NewReaderSize(body, 1<<14)
	events, lastID := 0, int64(0)
	var cur []byte
	inEvent := false
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) == 0 && !inEvent {
				return events, lastID, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return events, lastID, err
		}
		cur = append(cur, line...)
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			raw.Write(cur)
			cur = cur[:0]
			if !inEvent {
				continue
			}
			inEvent = false
			events++
			if j.cutAfter > 0 && (j.behave == behaveAbandon || j.behave == behaveReconnect) && events == j.ep.initial+j.cutAfter {
				return events, lastID, errCut
			}
			if j.slow > 0 {
				time.Sleep(j.slow)
			}
		case bytes.HasPrefix(line, []byte("id: ")):
			lastID, _ = strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
			inEvent = true
		case line[0] != ':':
			inEvent = true
		}
	}
}

// resume reconnects to a cut stream with Last-Event-ID and appends the
// rest of it to raw: chat and completions through GET /v1/streams/{id},
// Messages and Responses with their own POST again, carrying the stream's
// id, as each API's resume is documented.
func resume(ctx context.Context, hc *http.Client, base string, j job, id string, last int64, raw *bytes.Buffer) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/streams/"+id, nil)
	if j.ep.proto != ProtoOpenAI {
		req, _ = http.NewRequestWithContext(ctx, "POST", base+j.ep.path, bytes.NewReader(j.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Sluice-Stream-Id", id)
	}
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	authHeader(req.Header, j.key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("resume: HTTP %d %s", resp.StatusCode, msg)
	}
	n, _, err := readEvents(resp.Body, raw, job{}, -1)
	return n, err
}

// failed names the kind of a transport error: the server went away (the
// restart), the soak's end cut it, or something else.
func failed(ctx context.Context, o outcome, j job, err error, stage string) outcome {
	var op *net.OpError
	switch {
	case ctx.Err() != nil && j.behave != behaveAbandon:
		o.kind = "cut"
	case ctx.Err() != nil:
		o.kind, o.abandonAt = "abandoned", "before_first_token"
	case errors.As(err, &op) && op.Op == "dial":
		o.kind = "connection_refused"
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "connection reset") || errors.Is(err, io.EOF):
		o.kind = "connection_lost_" + stage
	default:
		o.kind, o.detail = "transport_"+stage, err.Error()
	}
	return o
}

func httpError(o outcome, resp *http.Response) outcome {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(msg, &e)
	code := e.Error.Code
	if code == "" {
		code = e.Error.Type
	}
	o.kind, o.detail = fmt.Sprintf("http_%d_%s", resp.StatusCode, code), string(msg)
	return o
}

// runBad sends one malformed request and checks the status it gets.
func runBad(ctx context.Context, base string, b bad) outcome {
	o := outcome{endpoint: b.kind}
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return failed(ctx, o, job{}, err, "connect")
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	method, body := "POST", b.body
	if strings.HasPrefix(b.path, "/v1/streams/") {
		method = "GET"
	}
	var hdr strings.Builder
	// The server's own address as Host: a loopback server refuses other names (DNS rebinding).
	fmt.Fprintf(&hdr, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nConnection: close\r\n",
		method, b.path, strings.TrimPrefix(base, "http://"))
	if b.key != "" {
		fmt.Fprintf(&hdr, "Authorization: Bearer %s\r\n", b.key)
	}
	if method == "GET" {
		body = ""
		hdr.WriteString("Last-Event-ID: 3\r\n")
	}
	announced := len(body)
	send := body
	switch {
	case b.short:
		announced += 100
	case b.trickle:
		send = body[:len(body)/2]
	}
	fmt.Fprintf(&hdr, "Content-Length: %d\r\n\r\n", announced)
	if _, err := io.WriteString(conn, hdr.String()+send); err != nil {
		return failed(ctx, o, job{}, err, "send")
	}
	if b.short {
		o.kind = "refused_as_expected"
		return o
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return failed(ctx, o, job{}, err, "bad_request")
	}
	defer resp.Body.Close()
	if resp.StatusCode != b.status {
		o = httpError(o, resp)
		o.kind, o.detail = "unexpected_status", fmt.Sprintf("%s: got %s, want %d: %s", b.kind, o.kind, b.status, o.detail)
		return o
	}
	o.kind = "refused_as_expected"
	return o
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
