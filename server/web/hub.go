package web

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/engine"
)

// frame is one encoded status frame in a chain: next is closed when a newer
// frame is current. data nil marks a gap: the stream stopped while nobody
// watched, and what came before is stale.
type frame struct {
	id   uint64 // engine.Status.Frame; 0 for a synthetic idle frame
	data []byte
	st   *engine.Status // what data encodes, for a tenant's own view; nil with data
	next chan struct{}
}

// hub turns one engine watcher into any number of SSE clients. The engine
// is watched only while a client is connected.
type hub struct {
	cur atomic.Pointer[frame]

	mu      sync.Mutex
	eng     *engine.Engine
	clients int
	gen     uint64             // increments per run, so a stopping run cannot publish
	stop    context.CancelFunc // the current run's
	running sync.WaitGroup
}

func (h *hub) init() { h.cur.Store(&frame{next: make(chan struct{})}) }

func (h *hub) attach(e *engine.Engine) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.eng = e
	if h.clients > 0 && h.stop == nil {
		h.startLocked()
	}
}

// join counts a client in, starting the watcher for the first one.
func (h *hub) join() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients++
	if h.clients == 1 && h.eng != nil {
		h.startLocked()
	}
}

// leave counts a client out; the last one stops the watcher, and marks the
// chain stale so the next client waits for a fresh frame.
func (h *hub) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients--
	if h.clients == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
		h.gen++
		h.publishLocked(&frame{})
	}
}

func (h *hub) close() {
	h.mu.Lock()
	if h.stop != nil {
		h.stop()
		h.stop = nil
		h.gen++
	}
	h.eng = nil
	h.mu.Unlock()
	h.running.Wait()
}

func (h *hub) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	h.gen++
	gen, w := h.gen, h.eng.WatchStatus()
	h.running.Go(func() {
		defer w.Close()
		for {
			st, err := w.Next(ctx)
			if err != nil {
				return // cancelled, or the engine closed: clients keep the last frame
			}
			// Encoded outside the lock, once for every client.
			data := encodeStatus(st)
			h.mu.Lock()
			if h.gen != gen {
				h.mu.Unlock()
				return
			}
			h.publishLocked(&frame{id: st.Frame, data: data, st: st})
			h.mu.Unlock()
		}
	})
}

func (h *hub) publishLocked(f *frame) {
	f.next = make(chan struct{})
	old := h.cur.Swap(f)
	close(old.next)
}
