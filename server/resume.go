package server

import (
	"time"

	"github.com/sluicehq/sluice/server/internal/httpedge"
)

// Headers of the resume protocol (httpedge: every HTTP API shares it). The
// response id also appears as "id" in every chunk.
const (
	streamIDHeader    = httpedge.StreamIDHeader
	lastEventIDHeader = httpedge.LastEventIDHeader
)

// ResumeStore keeps recent streams replayable for a bounded window and
// within a total byte cap (httpedge.Store); the Messages and Responses
// streams live in the same one, under the same caps.
type ResumeStore struct{ *httpedge.Store }

// NewResumeStore keeps each stream for window after its last use, and all
// streams' events within maxBytes.
func NewResumeStore(window time.Duration, maxBytes int) *ResumeStore {
	return &ResumeStore{httpedge.NewStore(window, maxBytes)}
}

// shared is the store the other HTTP adapters are lent (nil: resume off).
func (s *ResumeStore) shared() *httpedge.Store {
	if s == nil {
		return nil
	}
	return s.Store
}
