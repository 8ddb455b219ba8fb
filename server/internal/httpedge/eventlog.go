package httpedge

import (
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/server/stream"
)

// EventLog holds a stream's SSE frames, in order, for the connection that
// writes them and for replay after a reconnect. Ids are consecutive from 1.
// Frames lie back to back in one arena; the oldest are dropped when the
// retained bytes pass the cap:
//
//	data: [ dropped … | frame first | frame first+1 | … | frame next-1 ]
//	                  ^off          ^ends[0]                ^ends[len-1] = len(data)
//
// An EventLog is owned by the goroutine holding its stream's lease.
type EventLog struct {
	data   []byte
	ends   []int // ends[i]: end offset in data of frame first+i
	off    int   // start offset in data of frame first
	first  int64 // id of the oldest retained frame
	next   int64 // id the next frame gets
	maxLen int   // retained bytes cap; 0 keeps only what is unsent
	// retained mirrors Size() for a resume store, which reads it (Retained)
	// without holding the stream's lease.
	retained atomic.Int64
}

func NewEventLog(maxLen int) *EventLog {
	return &EventLog{first: 1, next: 1, maxLen: maxLen}
}

// NextID is the id the next added frame must carry.
func (l *EventLog) NextID() int64 { return l.next }

// LastID is the id of the newest frame (0 when none).
func (l *EventLog) LastID() int64 { return l.next - 1 }

// Add stores a complete frame carrying id NextID().
func (l *EventLog) Add(frame []byte) {
	l.data = append(l.data, frame...)
	l.ends = append(l.ends, len(l.data))
	l.next++
	l.retained.Store(int64(l.Size()))
}

// Retained is Size as last stored, safe to read from any goroutine.
func (l *EventLog) Retained() int64 { return l.retained.Load() }

// Size is the number of retained bytes.
func (l *EventLog) Size() int { return len(l.data) - l.off }

// After returns the frames with ids above id, back to back. It fails when
// some of them were dropped or id was never issued.
func (l *EventLog) After(id int64) ([]byte, error) {
	switch {
	case id >= l.next:
		return nil, fmt.Errorf("%w: event %d was never sent (last is %d)", stream.ErrResumeGap, id, l.next-1)
	case id+1 < l.first:
		return nil, fmt.Errorf("%w: oldest retained event is %d, client has %d", stream.ErrResumeGap, l.first, id)
	case id+1 == l.next:
		return nil, nil
	}
	start := l.off
	if i := id + 1 - l.first; i > 0 {
		start = l.ends[i-1]
	}
	return l.data[start:], nil
}

// Trim drops the oldest frames until the retained bytes fit the cap, but
// never a frame above keepAfter (not yet written to the current client).
func (l *EventLog) Trim(keepAfter int64) {
	n := 0
	for n < len(l.ends) && l.first+int64(n) <= keepAfter && len(l.data)-l.start(n) > l.maxLen {
		n++
	}
	if n == 0 {
		return
	}
	l.off = l.ends[n-1]
	l.ends = l.ends[n:]
	l.first += int64(n)
	if l.off > len(l.data)/2 { // compact: keep the arena from growing forever
		kept := copy(l.data, l.data[l.off:])
		l.ends = append(make([]int, 0, 2*len(l.ends)), l.ends...)
		for i := range l.ends {
			l.ends[i] -= l.off
		}
		l.data = l.data[:kept]
		l.off = 0
	}
	l.retained.Store(int64(l.Size()))
}

// start is the offset where the i-th retained frame begins.
func (l *EventLog) start(i int) int {
	if i == 0 {
		return l.off
	}
	return l.ends[i-1]
}
