package kvevents

import (
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// DefaultBufferSteps is how many batches the replay socket keeps when
// Config names none: vLLM's buffer_steps default.
const DefaultBufferSteps = 10_000

// defaultBufferBytes bounds the retained batches' payloads when Config names
// no bound: past it the oldest go, however few batches are kept (a batch
// of MaxBatch events with their token ids is ~100 KiB, so 10,000 of them
// unbounded could be a GiB).
const defaultBufferBytes = 64 << 20

// endSeq is the replay's end marker's sequence: -1 as 8 signed big-endian
// bytes, vLLM's END_SEQ.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ring holds the last batches sent, by sequence number, for replay. Sequence
// numbers are contiguous: the sender adds each batch it sends with the next
// one.
type ring struct {
	mu       sync.Mutex
	first    uint64   // the sequence of items[0]
	items    [][]byte // payloads, oldest first
	bytes    int
	maxItems int
	maxBytes int
}

func (r *ring) add(seq uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) == 0 {
		r.first = seq
	}
	r.items = append(r.items, payload)
	r.bytes += len(payload)
	// The newest batch stays even when it alone is over maxBytes.
	for len(r.items) > 1 && (len(r.items) > r.maxItems || r.bytes > r.maxBytes) {
		r.bytes -= len(r.items[0])
		r.items[0] = nil
		r.items = r.items[1:]
		r.first++
	}
}

// span is the sequence of the oldest batch kept and one past the newest;
// first == next when there is none.
func (r *ring) span() (first, next uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.first + uint64(len(r.items))
}

func (r *ring) get(seq uint64) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < r.first || seq-r.first >= uint64(len(r.items)) {
		return nil, false
	}
	return r.items[seq-r.first], true
}

// replayer serves the replay socket, vLLM's ZmqEventPublisher._service_replay:
// a ROUTER that takes [identity, "", start] (start: a big-endian sequence
// number, 8 bytes from llm-d; vLLM reads any length) and answers
// [identity, "", topic, seq, payload] for each kept batch from start on,
// then [identity, "", "", -1, ""]. A request of another shape is ignored,
// as vLLM does.
//
// Unlike vLLM's, which serves requests one at a time on its publishing
// thread, each peer is served by its own goroutine, so a peer that reads
// slowly holds up no one else (and its writes have the socket's deadline);
// a peer has at most one request running and one waiting, further ones are
// dropped.
type replayer struct {
	sock  zmq4.Socket
	topic []byte
	ring  *ring
	stop  chan struct{}   // the publisher's Close
	done  <-chan struct{} // the publisher's context

	mu      sync.Mutex
	waiting map[string]chan uint64 // per peer being served: its next request
	wg      sync.WaitGroup
	served  func() // tests: called after each request's reply
}

var errEvicted = errors.New("kvevents: a batch left the replay buffer during its replay")

// parseReplayRequest reads a request's frames as vLLM does: three frames,
// the last a big-endian integer of any length (one over 8 bytes with a
// non-zero high byte is past every sequence number).
func parseReplayRequest(frames [][]byte) (id []byte, start uint64, ok bool) {
	if len(frames) != 3 {
		return nil, 0, false
	}
	b := frames[2]
	for len(b) > 8 {
		if b[0] != 0 {
			return frames[0], math.MaxUint64, true
		}
		b = b[1:]
	}
	for _, x := range b {
		start = start<<8 | uint64(x)
	}
	return frames[0], start, true
}

func (p *replayer) serve() {
	defer p.wg.Done()
	for {
		msg, err := p.sock.Recv()
		if err != nil {
			select {
			case <-p.stop:
				return
			case <-p.done:
				return
			default:
			}
			// The fork's ROUTER reports no peer's error, only its own end;
			// should another come, a pause keeps the loop off the CPU.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		id, start, ok := parseReplayRequest(msg.Frames)
		if !ok {
			slog.Debug("kv events: replay request ignored", "frames", len(msg.Frames))
			continue
		}
		p.request(id, start)
	}
}

// request hands start to id's goroutine, starting one if there is none.
func (p *replayer) request(id []byte, start uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q, ok := p.waiting[string(id)]; ok {
		select {
		case q <- start:
		default: // one is waiting already: this one is dropped
		}
		return
	}
	q := make(chan uint64, 1)
	p.waiting[string(id)] = q
	p.wg.Add(1)
	go p.peer(string(id), start, q)
}

// peer serves one peer's requests in turn and ends when none is waiting.
func (p *replayer) peer(id string, start uint64, q chan uint64) {
	defer p.wg.Done()
	for {
		if err := p.replay([]byte(id), start); err != nil {
			slog.Debug("kv events: replay cut short", "from", start, "err", err)
		}
		if p.served != nil {
			p.served()
		}
		p.mu.Lock()
		select {
		case start = <-q:
			p.mu.Unlock()
		default:
			delete(p.waiting, id)
			p.mu.Unlock()
			return
		}
	}
}

// replay sends what the ring holds from start on, then the end marker. The
// ring's newest batch when the request is served bounds the reply (as
// vLLM's, which runs on the thread that adds to its buffer); a batch
// evicted while the reply is under way ends it without the marker, so the
// peer sees an incomplete replay rather than a gap.
func (p *replayer) replay(id []byte, start uint64) error {
	first, next := p.ring.span()
	var seq [8]byte
	for s := max(start, first); s < next; s++ {
		payload, ok := p.ring.get(s)
		if !ok {
			return errEvicted
		}
		putSeq(seq[:], s)
		if err := p.sock.SendMulti(zmq4.NewMsgFrom(id, nil, p.topic, seq[:], payload)); err != nil {
			return err
		}
	}
	return p.sock.SendMulti(zmq4.NewMsgFrom(id, nil, nil, endSeq, nil))
}

func putSeq(b []byte, s uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(s)
		s >>= 8
	}
}
