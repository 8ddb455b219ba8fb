package httpedge

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/stream"
)

// Headers of the resume protocol every HTTP stream speaks: a client that
// lost its connection sends the same POST again with the stream's id and the
// last event id it saw, and gets the events after it (then the rest of the
// generation, continued from the tokens already produced, never started
// over).
const (
	StreamIDHeader    = "X-Sluice-Stream-Id"
	LastEventIDHeader = "Last-Event-ID"
)

// Retained is the part of a resumable stream every adapter shares: its id,
// its event log, its owner, and the lease that lets one request at a time
// write it. An adapter's stream state embeds it, which makes that state
// Resumable.
//
// The request that creates a stream takes its lease first (every adapter
// acquires before it adds the stream to a Store), and that request's
// tenant (auth.Tenant) becomes the stream's owner: a Store finds the
// stream only for a request of the same tenant.
type Retained struct {
	ID  string
	Log *EventLog
	// kept is what the adapter's state holds besides the log for a resume
	// (the request's text and token ids: Keeps), counted with the log
	// against the store's byte cap. Set before the stream is added.
	kept int64

	lease chan struct{} // holds a value while no request holds the stream

	mu      sync.Mutex
	owner   string // the tenant of the first Acquire, never changed after
	owned   bool   // an Acquire set owner; until then no request finds the stream
	held    bool
	cancel  context.CancelFunc // ends the current holder, for a takeover
	lastUse time.Time
}

// NewRetained is a stream nobody holds yet.
func NewRetained(id string, log *EventLog) *Retained {
	r := &Retained{ID: id, Log: log, lease: make(chan struct{}, 1)}
	r.lease <- struct{}{}
	return r
}

// Keeps records n bytes of request state (prompt text, token ids) the
// stream retains beside its log, so the store's byte cap counts them: a
// stream of a 1 MiB prompt and a short reply is not a few hundred bytes.
func (r *Retained) Keeps(n int) { r.kept = int64(n) }

// Retention implements Resumable.
func (r *Retained) Retention() *Retained { return r }

// Acquire takes the stream's lease for a request. A request still holding
// it (its client vanished without the server noticing yet) is cancelled:
// the newest connection wins. The returned context ends when ctx does or
// when another request takes over; release must be called once.
func (r *Retained) Acquire(ctx context.Context) (context.Context, func(), error) {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	select {
	case <-r.lease:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	hctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.held, r.cancel = true, cancel
	if !r.owned {
		r.owner, r.owned = auth.Tenant(ctx), true
	}
	r.mu.Unlock()
	release := func() {
		cancel()
		r.mu.Lock()
		r.held, r.cancel, r.lastUse = false, nil, time.Now()
		r.mu.Unlock()
		r.lease <- struct{}{}
	}
	return hctx, release, nil
}

// ownedBy reports whether tenant's requests may reach the stream.
func (r *Retained) ownedBy(tenant string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned && r.owner == tenant
}

// idleSince returns when the stream was last released and whether nobody
// holds it now.
func (r *Retained) idleSince() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastUse, !r.held
}

// Resumable is an adapter's stream state kept in a Store.
type Resumable interface{ Retention() *Retained }

// Store keeps recent streams of every HTTP API replayable for a bounded
// window and within a total byte cap; the oldest idle streams are dropped
// first. The ids' prefixes (chatcmpl-, msg_, resp_) keep the APIs apart;
// an adapter finds its own states by type.
type Store struct {
	window   time.Duration
	maxBytes int64
	now      func() time.Time

	mu        sync.Mutex
	streams   map[string]Resumable
	lastSweep time.Time
}

// NewStore keeps each stream for window after its last use, and all
// streams' events and retained requests (Retained.Keeps) within maxBytes.
func NewStore(window time.Duration, maxBytes int) *Store {
	return &Store{window: window, maxBytes: int64(maxBytes), now: time.Now, streams: map[string]Resumable{}}
}

// Add retains st under its id.
func (s *Store) Add(st Resumable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[st.Retention().ID] = st
	s.sweepLocked(false)
}

// Get is the stream id names, nil when none is retained.
func (s *Store) Get(id string) Resumable {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(true)
	return s.streams[id]
}

// Len is the number of retained streams.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// sweepLocked drops expired streams, then the oldest idle ones while the
// total retained bytes exceed the cap. It runs at most once a second unless
// forced, so a burst of new streams does not rescan the map each time.
func (s *Store) sweepLocked(force bool) {
	now := s.now()
	if !force && now.Sub(s.lastSweep) < time.Second {
		return
	}
	s.lastSweep = now
	type idle struct {
		id   string
		at   time.Time
		size int64
	}
	var total int64
	var idles []idle
	for id, st := range s.streams {
		r := st.Retention()
		size := r.Log.Retained() + r.kept
		last, free := r.idleSince()
		if free && now.Sub(last) > s.window {
			delete(s.streams, id)
			continue
		}
		total += size
		if free {
			idles = append(idles, idle{id, last, size})
		}
	}
	if total <= s.maxBytes {
		return
	}
	sort.Slice(idles, func(i, j int) bool { return idles[i].at.Before(idles[j].at) })
	for _, it := range idles {
		if total <= s.maxBytes {
			break
		}
		delete(s.streams, it.id)
		total -= it.size
	}
}

// Reconnect is a resume request that holds its stream: the events after
// Last reach the client first. Release must be called once.
type Reconnect struct {
	State   Resumable
	Last    int64
	Ctx     context.Context
	Release func()
}

// Open finds the stream id names (match picks the adapter's own states),
// reads Last-Event-ID, takes the stream's lease for r and checks the log
// still holds what follows that id. A nil Store retains nothing. A stream
// another tenant created is not found, with the error an unknown id gets.
func (s *Store) Open(r *http.Request, id string, match func(Resumable) bool) (*Reconnect, error) {
	st, err := s.find(r, id, match)
	if err != nil {
		return nil, err
	}
	var last int64
	if h := r.Header.Get(LastEventIDHeader); h != "" {
		if last, err = strconv.ParseInt(h, 10, 64); err != nil || last < 0 {
			return nil, stream.InvalidParam(LastEventIDHeader, "Last-Event-ID must be an event id, got %q", h)
		}
	}
	return open(r, st, last)
}

// OpenAfter is Open for a client that names the last event it has
// itself (the Responses API's starting_after) instead of Last-Event-ID.
func (s *Store) OpenAfter(r *http.Request, id string, last int64, match func(Resumable) bool) (*Reconnect, error) {
	st, err := s.find(r, id, match)
	if err != nil {
		return nil, err
	}
	return open(r, st, last)
}

func (s *Store) find(r *http.Request, id string, match func(Resumable) bool) (Resumable, error) {
	var st Resumable
	if s != nil {
		st = s.Get(id)
	}
	if st == nil || !st.Retention().ownedBy(auth.Tenant(r.Context())) || !match(st) {
		return nil, fmt.Errorf("%w: %q", stream.ErrStreamNotFound, id)
	}
	return st, nil
}

func open(r *http.Request, st Resumable, last int64) (*Reconnect, error) {
	ret := st.Retention()
	ctx, release, err := ret.Acquire(r.Context())
	if err != nil {
		return nil, err
	}
	if _, err := ret.Log.After(last); err != nil {
		release()
		return nil, err
	}
	return &Reconnect{State: st, Last: last, Ctx: ctx, Release: release}, nil
}

// Replay returns the writer of a reconnected stream, its log's events
// after rc.Last already sent.
func (e *Env) Replay(ctx context.Context, w http.ResponseWriter, rc *Reconnect) *SSE {
	sse := NewSSE(ctx, w, rc.State.Retention().Log, e.WriteTimeout, rc.Last)
	_ = sse.Flush() // a failure shows in the stream's next write
	return sse
}

// OpenSSE sends the streaming headers of a new stream and returns its
// writer. When the server retains streams (Streams set) the stream is
// resumable: its events carry ids and stay in st's log, and the
// StreamIDHeader names it; otherwise it is StartSSE's, ids off.
func (e *Env) OpenSSE(ctx context.Context, w http.ResponseWriter, st *Retained, header map[string]string) *SSE {
	if e.Streams == nil {
		return StartSSE(ctx, w, e.WriteTimeout, header)
	}
	h := map[string]string{StreamIDHeader: st.ID}
	for k, v := range header {
		h[k] = v
	}
	SetHeaders(w, h)
	return NewSSE(ctx, w, st.Log, e.WriteTimeout, 0)
}

// NewRetainedFor is the Retained of a new stream under e's per-stream cap
// (nothing kept beyond what is unsent when resume is off).
func (e *Env) NewRetainedFor(id string) *Retained {
	n := 0
	if e.Streams != nil {
		n = e.StreamBytes
	}
	return NewRetained(id, NewEventLog(n))
}
