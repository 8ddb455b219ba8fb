package httpedge

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSSEFraming: ids on a resumable stream, names on named events, and the
// keep-alive comment as one line with no blank line after it, so that it
// never ends an event (a blank line after an id'd event is an empty event to
// the OpenAI Python SDK's decoder); a resumed connection gets only the frames
// after its Last-Event-ID.
func TestSSEFraming(t *testing.T) {
	log := NewEventLog(1 << 10)
	rec := httptest.NewRecorder()
	s := NewSSE(context.Background(), rec, log, time.Second, 0)
	s.Event("", []byte(`{"a":1}`))
	s.Comment("keep-alive")
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Event("ping", []byte(`{"type":"ping"}`))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "id: 1\ndata: {\"a\":1}\n\n: keep-alive\nid: 2\nevent: ping\ndata: {\"type\":\"ping\"}\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream\n%q\nwant\n%q", got, want)
	}
	again := httptest.NewRecorder()
	if err := NewSSE(context.Background(), again, log, time.Second, 1).Flush(); err != nil {
		t.Fatal(err)
	}
	if got := again.Body.String(); got != "id: 2\nevent: ping\ndata: {\"type\":\"ping\"}\n\n" {
		t.Errorf("resumed after 1: %q", got)
	}

	plain := httptest.NewRecorder()
	p := StartSSE(context.Background(), plain, time.Second, map[string]string{"request-id": "x"})
	p.Event("message_stop", []byte(`{}`))
	if err := p.Flush(); err != nil || plain.Body.String() != "event: message_stop\ndata: {}\n\n" || plain.Header().Get("request-id") != "x" {
		t.Errorf("unnumbered stream %q (%v), header %q", plain.Body.String(), err, plain.Header().Get("request-id"))
	}
	if log := p.log; log.Size() != 0 {
		t.Errorf("an unnumbered stream retains %d bytes after its flush", log.Size())
	}
}

// TestSSEClientGone: once the client left nothing is written, and Err says so.
func TestSSEClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := httptest.NewRecorder()
	s := NewSSE(ctx, rec, NewEventLog(0), time.Second, 0)
	cancel()
	s.Event("", []byte(`{}`))
	if err := s.Flush(); err != ErrClientGone || s.Err() != ErrClientGone || rec.Body.Len() != 0 {
		t.Errorf("after the client left: flush %v, err %v, wrote %q", err, s.Err(), rec.Body.String())
	}
}
