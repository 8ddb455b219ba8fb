package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// The queue's share arithmetic: room is anyone's; a full queue still takes
// a tenant under its share (MaxQueue over the tenants waiting), up to twice
// MaxQueue; alone, a tenant has the plain bound.
func TestQueueShares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   map[string]int
		tenant string
		n      int
		want   error
	}{
		{"room", map[string]int{"a": 5}, "a", 3, nil},
		{"full, alone", map[string]int{"a": 8}, "a", 1, ErrQueueFull},
		{"full, alone, unkeyed", map[string]int{"": 8}, "", 1, ErrQueueFull},
		{"full, a newcomer under its share", map[string]int{"a": 8}, "b", 1, nil},
		{"full, a newcomer's group of its share", map[string]int{"a": 8}, "b", 4, nil},
		{"full, a newcomer's group over its share", map[string]int{"a": 8}, "b", 5, ErrTenantQueueFull},
		{"full, the tenant over its share", map[string]int{"a": 7, "b": 1}, "a", 1, ErrTenantQueueFull},
		{"full, three tenants: share 2", map[string]int{"a": 6, "b": 2}, "c", 2, nil},
		{"full, three tenants: at share", map[string]int{"a": 6, "b": 2, "c": 2}, "b", 1, ErrTenantQueueFull},
		{"headroom spent", map[string]int{"a": 8, "b": 4, "c": 2, "d": 2}, "e", 1, ErrQueueFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueShares(8)
			var queued atomic.Int64
			for k, v := range tc.held {
				q.held[k] = v
				queued.Add(int64(v))
			}
			before := queued.Load()
			err := q.enter(tc.tenant, tc.n, &queued)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err %v, want %v", err, tc.want)
			case tc.want == ErrQueueFull && errors.Is(err, ErrTenantQueueFull):
				t.Fatalf("err %v: a tenant alone or past the headroom gets the plain error", err)
			case err == nil && (queued.Load() != before+int64(tc.n) || q.held[tc.tenant] != tc.held[tc.tenant]+tc.n):
				t.Fatalf("accepted: queued %d, held %d", queued.Load(), q.held[tc.tenant])
			case err != nil && (queued.Load() != before || q.held[tc.tenant] != tc.held[tc.tenant]):
				t.Fatalf("refused but counted: queued %d, held %d", queued.Load(), q.held[tc.tenant])
			}
		})
	}
}

// finishOrder records the tenant and id of each sequence as it finishes.
type finishOrder struct {
	mu    sync.Mutex
	order []string
}

func (f *finishOrder) OnFirstToken(*Sequence, time.Time) {}
func (f *finishOrder) OnToken(*Sequence, time.Time)      {}
func (f *finishOrder) OnReclaim(time.Duration)           {}
func (f *finishOrder) OnStep(time.Duration, int)         {}
func (f *finishOrder) OnFinish(s *Sequence, _ Result, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.order = append(f.order, s.Request().Tenant)
}

// A floods the queue, with single requests or with groups of choices (the
// 5 requests × n=64 of the issue, scaled down); B's one request is still
// accepted, A's next is refused as over its share, and B is served next,
// ahead of everything A queued. Before, B got ErrQueueFull.
func TestTenantFloodStillServesAnother(t *testing.T) {
	for _, group := range []int{1, 4} {
		t.Run(fmt.Sprintf("choices=%d", group), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newHashModel(64, 256, 64, 16)
				gate := make(chan struct{})
				m.onForward = func(*kernels.Batch) error { <-gate; return nil }
				rec := &finishOrder{}
				// Sized so that A's floods fill the queue exactly: the first
				// request's leader runs, the rest of A's fill MaxQueue.
				maxQueue := 8
				if group == 4 {
					maxQueue = 7 // 3 choices of the first, 4 of the second
				}
				e := newTestEngine(t, m, Config{MaxQueue: maxQueue, MaxSeqs: 1, Observer: rec})
				open := sync.OnceFunc(func() { close(gate) })
				t.Cleanup(open) // before Close, should the test stop early
				flood := func(salt int32) ([]*Sequence, error) {
					reqs := choices(group, Request{Prompt: prompt(20, salt, 64), MaxTokens: 3, Tenant: "a"})
					if group == 1 {
						s, err := e.Submit(bg, reqs[0])
						return []*Sequence{s}, err
					}
					return e.SubmitGroup(bg, reqs)
				}
				first, err := flood(0)
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // A's first is admitted; its step waits at the gate
				var all []*Sequence
				for i := int32(1); ; i++ {
					seqs, err := flood(i)
					if errors.Is(err, ErrQueueFull) {
						if errors.Is(err, ErrTenantQueueFull) {
							t.Fatalf("A alone: %v, want the plain ErrQueueFull", err)
						}
						break
					}
					if err != nil || i > 8 {
						t.Fatalf("flood %d: %v", i, err)
					}
					all = append(all, seqs...)
				}
				if got := e.QueuedFor("a"); got != maxQueue {
					t.Fatalf("A holds %d places, want the whole queue, %d", got, maxQueue)
				}
				b, err := e.Submit(bg, Request{Prompt: prompt(5, 99, 64), MaxTokens: 1, Tenant: "b"})
				if err != nil {
					t.Fatalf("B's request under its share: %v", err)
				}
				if _, err := flood(100); !errors.Is(err, ErrTenantQueueFull) {
					t.Fatalf("A over its share: %v, want ErrTenantQueueFull", err)
				}
				if got := e.QueuedFor("b"); got != 1 {
					t.Fatalf("B holds %d places, want 1", got)
				}
				open()
				if r := b.Result(); r.Finish != FinishLength {
					t.Fatalf("B: %+v", r)
				}
				for _, s := range append(first, all...) {
					s.Result()
				}
				synctest.Wait()
				rec.mu.Lock()
				defer rec.mu.Unlock()
				// A's running leader (and, for a group, whatever of it was
				// already running) first, then B, then the rest of A.
				if i := indexOf(rec.order, "b"); i != 1 {
					t.Fatalf("finish order %v: B finished %d-th, want right after A's running sequence", rec.order, i)
				}
				if e.QueuedFor("a") != 0 || e.QueuedFor("b") != 0 {
					t.Fatalf("shares left: a %d, b %d", e.QueuedFor("a"), e.QueuedFor("b"))
				}
			})
		})
	}
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}
