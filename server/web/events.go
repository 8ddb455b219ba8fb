package web

import (
	"net/http"
	"strconv"
	"time"
)

// keepAlive is how long a quiet status stream (an idle engine publishes
// nothing) waits before a comment, so proxies and the browser keep it open.
const keepAlive = 15 * time.Second

// writeTimeout bounds one write: a client that stops reading for this long
// is dropped rather than kept as a goroutine forever.
const writeTimeout = 10 * time.Second

// serveEvents streams status frames as SSE, the newest each time the client
// is ready for one.
func (w *Web) serveEvents(rw http.ResponseWriter, r *http.Request) {
	tenant, ok := w.authorize(r)
	if !ok {
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("WWW-Authenticate", "Bearer")
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"error":{"message":"a valid API key is required","type":"authentication_error","param":null,"code":"invalid_api_key"}}`))
		return
	}
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(rw)
	select {
	case <-w.quit:
		http.Error(rw, "shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	w.hub.join()
	defer w.hub.leave()
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := rw.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	rw.WriteHeader(http.StatusOK)
	if rc.Flush() != nil { // headers now: the client knows it is connected before the first frame
		return
	}
	ka := time.NewTimer(keepAlive)
	defer ka.Stop()
	var buf []byte
	var sent *frame
	for f := w.hub.cur.Load(); ; {
		if f != sent && f.data != nil {
			data := f.data
			if tenant != "" && f.st != nil {
				data = encodeStatusFor(f.st, tenant) // per client: only a slow one's skipped frames go unencoded
			}
			buf = append(buf[:0], "id: "...)
			buf = strconv.AppendUint(buf, f.id, 10)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, data...)
			buf = append(buf, "\n\n"...)
			if !write(buf) {
				return
			}
			sent = f
			ka.Reset(keepAlive)
		}
		select {
		case <-f.next:
			f = w.hub.cur.Load() // the newest: frames in between are skipped
		case <-ka.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
			ka.Reset(keepAlive)
		case <-r.Context().Done():
			return
		case <-w.quit:
			return
		}
	}
}
