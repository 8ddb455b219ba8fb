package server

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Headers of the resume protocol. The response id also appears as "id" in
// every chunk; Last-Event-ID is the standard SSE reconnect header.
const (
	streamIDHeader    = "X-Sluice-Stream-Id"
	lastEventIDHeader = "Last-Event-ID"
)

// streamState is everything needed to replay or continue one streaming
// response: the request as submitted (its sampler seed fixed), the
// TextStream with every token consumed so far and the text it holds back,
// and the event log. One request at a time holds its lease and may touch
// the fields below mu.
type streamState struct {
	id     string
	gen    *stream.GenRequest
	req    engine.Request
	format chunkFormat
	ts     *stream.TextStream
	log    *httpedge.EventLog
	cached int                // prompt tokens the first submission found in the prefix cache
	done   bool               // the log ends with [DONE]: nothing left to generate
	relay  *relayCursor       // relay mode: the upstream's side (relay.go); nil for a local model
	tools  *stream.ToolStream // the reply's tool-call parse (toolcalls.go); nil without tools

	lease chan struct{} // holds a value while no request holds the stream

	mu      sync.Mutex
	held    bool
	cancel  context.CancelFunc // ends the current holder, for a takeover
	lastUse time.Time
}

func newStreamState(id string, gen *stream.GenRequest, req engine.Request, f chunkFormat, ts *stream.TextStream, log *httpedge.EventLog) *streamState {
	st := &streamState{id: id, gen: gen, req: req, format: f, ts: ts, log: log, lease: make(chan struct{}, 1), tools: stream.NewToolStream(gen)}
	st.lease <- struct{}{}
	return st
}

// acquire takes the stream's lease for a request. A request still holding it
// (its client vanished without the server noticing yet) is cancelled: the
// newest connection wins. The returned context ends when ctx does or when
// another request takes over; release must be called once.
func (st *streamState) acquire(ctx context.Context) (context.Context, func(), error) {
	st.mu.Lock()
	if st.cancel != nil {
		st.cancel()
	}
	st.mu.Unlock()
	select {
	case <-st.lease:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	hctx, cancel := context.WithCancel(ctx)
	st.mu.Lock()
	st.held, st.cancel = true, cancel
	st.mu.Unlock()
	release := func() {
		cancel()
		st.mu.Lock()
		st.held, st.cancel, st.lastUse = false, nil, time.Now()
		st.mu.Unlock()
		st.lease <- struct{}{}
	}
	return hctx, release, nil
}

// idleSince returns when the stream was last released and whether nobody
// holds it now.
func (st *streamState) idleSince() (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lastUse, !st.held
}

// ResumeStore keeps recent streams replayable for a bounded window and
// within a total byte cap; the oldest idle streams are dropped first.
type ResumeStore struct {
	window   time.Duration
	maxBytes int64
	now      func() time.Time

	mu        sync.Mutex
	streams   map[string]*streamState
	lastSweep time.Time
}

// NewResumeStore keeps each stream for window after its last use, and all
// streams' events within maxBytes.
func NewResumeStore(window time.Duration, maxBytes int) *ResumeStore {
	return &ResumeStore{window: window, maxBytes: int64(maxBytes), now: time.Now, streams: map[string]*streamState{}}
}

func (s *ResumeStore) add(st *streamState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[st.id] = st
	s.sweepLocked(false)
}

func (s *ResumeStore) get(id string) *streamState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(true)
	return s.streams[id]
}

// Len is the number of retained streams.
func (s *ResumeStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// sweepLocked drops expired streams, then the oldest idle ones while the
// total retained bytes exceed the cap. It runs at most once a second unless
// forced, so a burst of new streams does not rescan the map each time.
func (s *ResumeStore) sweepLocked(force bool) {
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
		size := st.log.Retained()
		last, free := st.idleSince()
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
