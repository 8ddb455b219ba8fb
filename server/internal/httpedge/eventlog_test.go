package httpedge

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/stream"
)

func frameOf(id int64) []byte { return fmt.Appendf(nil, "id: %d\ndata: %03d\n\n", id, id) } // 18 bytes for ids < 10

func framesFrom(from, to int64) string {
	var s []byte
	for id := from; id <= to; id++ {
		s = append(s, frameOf(id)...)
	}
	return string(s)
}

func TestEventLog(t *testing.T) {
	tests := []struct {
		name    string
		maxLen  int
		add     int64 // frames 1..add
		sent    int64 // trim(sent) after adding
		after   int64
		want    string
		wantErr bool
	}{
		{"replay everything", 1 << 10, 5, 5, 0, framesFrom(1, 5), false},
		{"replay the missing tail", 1 << 10, 5, 5, 3, framesFrom(4, 5), false},
		{"nothing missing", 1 << 10, 5, 5, 5, "", false},
		{"an id never issued", 1 << 10, 5, 5, 6, "", true},
		{"cap drops the oldest", 3 * 18, 5, 5, 2, framesFrom(3, 5), false},
		{"dropped frames cannot be replayed", 3 * 18, 5, 5, 1, "", true},
		{"unsent frames are kept past the cap", 18, 5, 2, 2, framesFrom(3, 5), false},
		{"no retention keeps nothing sent", 0, 5, 5, 5, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewEventLog(tt.maxLen)
			for id := int64(1); id <= tt.add; id++ {
				if l.NextID() != id {
					t.Fatalf("nextID %d, want %d", l.NextID(), id)
				}
				l.Add(frameOf(id))
			}
			l.Trim(tt.sent)
			if int64(l.Size()) != l.Retained() {
				t.Errorf("retained %d, size %d", l.Retained(), l.Size())
			}
			got, err := l.After(tt.after)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, stream.ErrResumeGap)) {
				t.Fatalf("after(%d) error %v, want error %v", tt.after, err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("after(%d) = %q, want %q", tt.after, got, tt.want)
			}
		})
	}
}

// TestEventLogCompacts checks that a long stream under a cap keeps its arena
// bounded and still replays the right frames.
func TestEventLogCompacts(t *testing.T) {
	l := NewEventLog(10 * 18)
	for id := int64(1); id <= 9; id++ {
		l.Add(frameOf(id))
	}
	for round := 0; round < 1000; round++ {
		id := l.NextID()
		l.Add([]byte(fmt.Sprintf("id: %d\ndata: %03d\n\n", id, id%1000)))
		l.Trim(id)
	}
	if len(l.data) > 3*10*20 {
		t.Errorf("arena grew to %d bytes for a cap of %d", len(l.data), 10*18)
	}
	got, err := l.After(l.LastID() - 1)
	if err != nil || string(got) != fmt.Sprintf("id: %d\ndata: %03d\n\n", l.LastID(), l.LastID()%1000) {
		t.Errorf("last frame %q, %v", got, err)
	}
}

// TestStoreCountsKeptRequests: the store's byte cap counts what a stream
// keeps for a resume besides its log (Retained.Keeps). Before, two idle
// streams of 1 MiB prompts and empty logs counted 0 bytes against a
// 1.5 MiB cap and both stayed.
func TestStoreCountsKeptRequests(t *testing.T) {
	s := NewStore(time.Hour, 3<<19)
	clock := time.Unix(1000, 0)
	s.now = func() time.Time { return clock }
	for i, id := range []string{"old", "new"} {
		r := NewRetained(id, NewEventLog(1<<10))
		r.Keeps(1 << 20)
		r.owned, r.lastUse = true, clock.Add(time.Duration(i)*time.Second)
		s.Add(r)
		clock = clock.Add(2 * time.Second) // past the sweep's once-a-second limit
	}
	if s.Get("old") != nil || s.Get("new") == nil {
		t.Errorf("retained: old %v, new %v; want only the newest idle stream under a 1.5 MiB cap", s.Get("old") != nil, s.Get("new") != nil)
	}
}
