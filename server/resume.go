package server

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Headers of the resume protocol (httpedge: every HTTP API shares it). The
// response id also appears as "id" in every chunk.
const (
	streamIDHeader    = httpedge.StreamIDHeader
	lastEventIDHeader = httpedge.LastEventIDHeader
)

// streamState is everything needed to replay or continue one streaming
// response: the request as submitted (its sampler seed fixed), the
// TextStream with every token consumed so far and the text it holds back,
// and the event log. One request at a time holds its lease (Retained) and
// may touch it.
type streamState struct {
	*httpedge.Retained
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
}

func newStreamState(id string, gen *stream.GenRequest, req engine.Request, f chunkFormat, ts *stream.TextStream, log *httpedge.EventLog) *streamState {
	return &streamState{Retained: httpedge.NewRetained(id, log), id: id, gen: gen, req: req, format: f, ts: ts, log: log, tools: stream.NewToolStream(gen)}
}

// acquire takes the stream's lease for a request (httpedge.Retained.Acquire:
// the newest connection wins).
func (st *streamState) acquire(ctx context.Context) (context.Context, func(), error) {
	return st.Acquire(ctx)
}

// ResumeStore keeps recent streams replayable for a bounded window and
// within a total byte cap (httpedge.Store); the Messages and Responses
// streams live in the same one, under the same caps.
type ResumeStore struct{ *httpedge.Store }

// NewResumeStore keeps each stream for window after its last use, and all
// streams' events within maxBytes.
func NewResumeStore(window time.Duration, maxBytes int) *ResumeStore {
	return &ResumeStore{httpedge.NewStore(window, maxBytes)}
}

func (s *ResumeStore) add(st *streamState) { s.Add(st) }

// get is the chat or completions stream id names, nil when none is retained.
func (s *ResumeStore) get(id string) *streamState {
	st, _ := s.Get(id).(*streamState)
	return st
}

// shared is the store the other HTTP adapters are lent (nil: resume off).
func (s *ResumeStore) shared() *httpedge.Store {
	if s == nil {
		return nil
	}
	return s.Store
}
