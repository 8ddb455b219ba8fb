// Package ssetest posts requests and reads a Server-Sent Events body as a
// client does, for the tests of the server and of server/e2e.
package ssetest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Event is one event of a stream. Comment lines (keep-alives) are skipped.
// Name is the event: line's, on the named-event streams of the Messages and
// Responses APIs.
type Event struct {
	ID   int64
	Name string
	Data string
}

// Read parses events from body until [DONE], EOF, or limit events (0: no
// limit). It reads no further than the blank line ending the last event it
// returns, so a later Read on the same body continues the stream. An
// event: line fails the test: chat streams send none.
func Read(t testing.TB, body *bufio.Reader, limit int) []Event {
	t.Helper()
	return read(t, body, limit, false)
}

// ReadNamed is Read for a named-event stream (Messages, Responses): event:
// lines name the events, and the stream ends at EOF, [DONE] being no
// sentinel there.
func ReadNamed(t testing.TB, body *bufio.Reader, limit int) []Event {
	t.Helper()
	return read(t, body, limit, true)
}

func read(t testing.TB, body *bufio.Reader, limit int, named bool) []Event {
	t.Helper()
	var out []Event
	var cur Event
	for {
		line, err := body.ReadString('\n')
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.Data == "" {
				continue
			}
			out = append(out, cur)
			if (!named && cur.Data == "[DONE]") || (limit > 0 && len(out) == limit) {
				return out
			}
			cur = Event{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.ID, err = strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Fatalf("bad id line %q", line)
			}
		case named && strings.HasPrefix(line, "event: "):
			cur.Name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

// Post sends body as JSON to url with the header name/value pairs; the
// response body is closed when the test ends.
func Post(t testing.TB, url, body string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
