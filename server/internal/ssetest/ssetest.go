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
type Event struct {
	ID   int64
	Data string
}

// Read parses events from body until [DONE], EOF, or limit events (0: no
// limit). It reads no further than the blank line ending the last event it
// returns, so a later Read on the same body continues the stream.
func Read(t testing.TB, body *bufio.Reader, limit int) []Event {
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
			if cur.Data == "[DONE]" || (limit > 0 && len(out) == limit) {
				return out
			}
			cur = Event{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.ID, err = strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				t.Fatalf("bad id line %q", line)
			}
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
