package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/plain"

	"github.com/sluicehq/sluice/kvcache"
)

// DefaultEndpoint is bound when Config names none: llm-d's port (its indexer
// dials pods on 5557) on loopback only, as the stream carries every
// tenant's token ids. A deployment binds the address its indexer reaches
// (the chart: the pod's IP) and, across hosts, sets Credentials.
const DefaultEndpoint = "tcp://127.0.0.1:5557"

// The transport's limits on what peers can make the publisher hold or wait
// for (see "Transport" in doc.go).
const (
	handshakeTimeout = 5 * time.Second  // a peer that has not finished its handshake is dropped
	writeTimeout     = 10 * time.Second // a subscriber that cannot take one batch in this is dropped
	maxInbound       = 64 << 10         // the largest message a subscriber may send (subscriptions)
	maxSubscribers   = 64               // connections held, in handshake or subscribed
	subscriberHWM    = 1024             // batches queued per subscriber; past it (or sendQueueBytes) they are dropped for it
	sendQueueBytes   = 64 << 20
)

// Media: where the KV lives, in vLLM's spelling.
const (
	MediumGPU = "GPU"
	MediumCPU = "CPU"
)

// Config configures New.
type Config struct {
	// Endpoint is bound when it names this machine (a wildcard, loopback,
	// one of its addresses, or an ipc path) and dialed otherwise: vLLM's
	// rule (bind a wildcard, dial anything else) extended to the specific
	// addresses Sluice binds by default (Binds).
	Endpoint string
	// Credentials, when set, require ZMTP PLAIN (RFC 24) of every
	// subscriber (or, when dialing, are presented to the peer); nil is
	// ZMTP NULL: anyone who reaches the endpoint reads the stream.
	Credentials *Credentials
	Pod         string // the topic's pod, how llm-d names the replica
	Model       string // the topic's model, what requests name it
	Medium      string // MediumGPU or MediumCPU
	// BlockSize is the KV block size in tokens (the pool's).
	BlockSize int
	// Buffer bounds the events waiting for the sender (0 = 1<<16, about 4 MiB
	// of tokens at 16 per block); past it events are dropped and counted.
	Buffer int
	// MaxBatch bounds the events one message carries (0 = 1024).
	MaxBatch int
	// ReplayEndpoint, when set, is bound to a ROUTER socket that resends
	// kept batches from a sequence number on (vLLM's replay_endpoint;
	// replay.go). It must name this machine: it is always bound. It takes
	// the same Credentials as Endpoint.
	ReplayEndpoint string
	// BufferSteps is how many of the last batches are kept for replay (0 =
	// DefaultBufferSteps, vLLM's buffer_steps); BufferBytes bounds their
	// payloads (0 = 64 MiB). The oldest go first.
	BufferSteps int
	BufferBytes int
	// Now stamps batches (nil = time.Now); tests inject a clock.
	Now func() time.Time
}

type kind uint8

const (
	stored kind = iota
	removed
	cleared
)

type event struct {
	kind         kind
	group        kvcache.Group
	hash, parent uint64
	tokens       []int32
}

// Publisher is a kvcache.Events that publishes what it hears. Make it with
// New, pass it as the pool's Events, Close it after the engine has stopped.
type Publisher struct {
	cfg     Config
	topic   []byte
	sock    zmq4.Socket
	replay  *replayer // nil without ReplayEndpoint
	events  chan event
	dropped atomic.Uint64
	sent    atomic.Uint64 // batches handed to the socket
	resets  atomic.Uint64 // sequence resets (reset.go)
	state   *blockState   // the pool's blocks, for a sequence reset; nil without replay
	pending atomic.Int64  // events accepted and not yet handed to the socket (or dropped)
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

var _ kvcache.Events = (*Publisher)(nil)

// New opens the socket and starts the sender. ctx bounds the socket's life
// (dialing retries included); Close ends it sooner.
func New(ctx context.Context, cfg Config) (*Publisher, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	if cfg.Pod == "" || cfg.Model == "" || strings.Contains(cfg.Pod, "@") || strings.Contains(cfg.Model, "@") {
		// llm-d splits the topic on '@' and expects three parts.
		return nil, fmt.Errorf("kvevents: pod %q and model %q must be non-empty and free of '@'", cfg.Pod, cfg.Model)
	}
	if cfg.Medium != MediumGPU && cfg.Medium != MediumCPU {
		return nil, fmt.Errorf("kvevents: medium %q (want %s or %s)", cfg.Medium, MediumGPU, MediumCPU)
	}
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("kvevents: block size %d", cfg.BlockSize)
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 16
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BufferSteps <= 0 {
		cfg.BufferSteps = DefaultBufferSteps
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = defaultBufferBytes
	}
	if cfg.ReplayEndpoint != "" && !Binds(cfg.ReplayEndpoint) {
		return nil, fmt.Errorf("kvevents: replay endpoint %s: not an address of this machine (it is always bound)", cfg.ReplayEndpoint)
	}
	opts := []zmq4.Option{
		zmq4.WithLogger(log.New(slogWriter{}, "", 0)),
		zmq4.WithHandshakeTimeout(handshakeTimeout),
		zmq4.WithWriteTimeout(writeTimeout),
		zmq4.WithMaxMsgSize(maxInbound),
		zmq4.WithMaxConns(maxSubscribers),
		zmq4.WithSendQueueBytes(sendQueueBytes),
		zmq4.WithDialerTimeout(handshakeTimeout),
	}
	if c := cfg.Credentials; c != nil {
		if err := c.validate(); err != nil {
			return nil, err
		}
		opts = append(opts, zmq4.WithSecurity(plain.Security(c.User, c.Password)))
	}
	sock := zmq4.NewPub(ctx, opts...)
	// Each subscriber's queue, in batches, like vLLM's (libzmq's) SNDHWM
	// but per subscriber: past it that subscriber misses batches.
	if err := sock.SetOption(zmq4.OptionHWM, subscriberHWM); err != nil {
		return nil, fmt.Errorf("kvevents: hwm: %w", err)
	}
	var err error
	if Binds(cfg.Endpoint) {
		err = sock.Listen(cfg.Endpoint)
	} else {
		err = sock.Dial(cfg.Endpoint)
	}
	if err != nil {
		_ = sock.Close()
		return nil, fmt.Errorf("kvevents: %s: %w", cfg.Endpoint, err)
	}
	p := &Publisher{
		cfg:    cfg,
		topic:  []byte("kv@" + cfg.Pod + "@" + cfg.Model),
		sock:   sock,
		events: make(chan event, cfg.Buffer),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if cfg.ReplayEndpoint != "" {
		// The same limits as the PUB socket's: a replay peer sends one
		// 8-byte request at a time and is written to with a deadline.
		router := zmq4.NewRouter(ctx, opts...)
		if err := router.Listen(cfg.ReplayEndpoint); err != nil {
			_ = router.Close()
			_ = sock.Close()
			return nil, fmt.Errorf("kvevents: replay %s: %w", cfg.ReplayEndpoint, err)
		}
		p.replay = &replayer{sock: router, topic: p.topic, stop: p.stop, done: ctx.Done(), waiting: make(map[string]chan uint64),
			ring: &ring{maxItems: cfg.BufferSteps, maxBytes: cfg.BufferBytes}}
		p.replay.wg.Add(1)
		go p.replay.serve()
		p.state = newBlockState()
	}
	p.offer(event{kind: cleared})
	go p.run()
	return p, nil
}

// slogWriter hands the socket's log lines (a peer's failed handshake, once
// per connection) to slog, the server's log, instead of stderr.
type slogWriter struct{}

func (slogWriter) Write(b []byte) (int, error) {
	slog.Info("kv events: " + strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// Addr is the bound address (nil when dialing): the port of "tcp://*:0".
func (p *Publisher) Addr() net.Addr { return p.sock.Addr() }

// ReplayAddr is the replay socket's bound address (nil without one).
func (p *Publisher) ReplayAddr() net.Addr {
	if p.replay == nil {
		return nil
	}
	return p.replay.sock.Addr()
}

// Topic is the ZeroMQ topic every batch is sent under.
func (p *Publisher) Topic() string { return string(p.topic) }

// Dropped counts events lost: the sender's buffer was full, or the socket
// refused their batch (it is closed).
func (p *Publisher) Dropped() uint64 { return p.dropped.Load() }

// Batches counts messages handed to the socket.
func (p *Publisher) Batches() uint64 { return p.sent.Load() }

// Resets counts the times the sequence started over with the pool's whole
// state (reset.go).
func (p *Publisher) Resets() uint64 { return p.resets.Load() }

// BlockStored implements kvcache.Events: on the engine loop, never blocking.
func (p *Publisher) BlockStored(g kvcache.Group, hash, parent uint64, tokens []int32) {
	p.offer(event{kind: stored, group: g, hash: hash, parent: parent, tokens: slices.Clone(tokens)})
}

// BlockRemoved implements kvcache.Events.
func (p *Publisher) BlockRemoved(g kvcache.Group, hash uint64) {
	p.offer(event{kind: removed, group: g, hash: hash})
}

func (p *Publisher) offer(ev event) {
	p.pending.Add(1)
	select {
	case p.events <- ev:
	default:
		p.pending.Add(-1)
		p.dropped.Add(1)
	}
}

// Close hands what is buffered to the socket, within ctx, then closes it.
// Call it once nothing calls BlockStored or BlockRemoved any more (the engine
// has stopped). ZeroMQ's own queue is not flushed (go-zeromq has no linger):
// a replica going away loses its last batches, which matters little, as the
// indexer forgets a pod that is gone.
func (p *Publisher) Close(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		err = fmt.Errorf("kvevents: close: %w", ctx.Err())
	}
	err = errors.Join(err, p.sock.Close())
	if p.replay != nil {
		// Closing the socket ends Recv and fails every reply under way.
		err = errors.Join(err, p.replay.sock.Close())
		p.replay.wg.Wait()
	}
	return err
}

// run is the sender: it takes one event, as many more as are already waiting
// (up to MaxBatch), and sends them as one batch.
func (p *Publisher) run() {
	defer close(p.done)
	var seq uint64
	batch := make([]event, 0, p.cfg.MaxBatch)
	for {
		select {
		case ev := <-p.events:
			batch = append(batch[:0], ev)
		case <-p.stop:
			if len(p.events) == 0 {
				return
			}
			continue
		}
	fill:
		for len(batch) < p.cfg.MaxBatch {
			select {
			case ev := <-p.events:
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		if err := p.send(&seq, batch); err != nil {
			p.dropped.Add(uint64(len(batch)))
		}
		p.pending.Add(-int64(len(batch)))
	}
}

// send sends batch as *seq and advances it; or, when the batch would push
// the oldest out of the replay buffer, resets the sequence with a state
// that includes the batch (reset.go).
func (p *Publisher) send(seq *uint64, batch []event) error {
	if p.state != nil {
		p.state.apply(batch)
	}
	payload, err := encodeBatch(p.cfg.Now(), batch, p.cfg.BlockSize, p.cfg.Medium)
	if err != nil { // only a bug can fail an in-memory encode
		return err
	}
	if p.replay != nil && p.replay.ring.full(len(payload)) {
		if next, ok := p.resetSequence(); ok {
			*seq = next
			return nil
		}
	}
	if err := p.sendOne(*seq, payload); err != nil {
		return err
	}
	*seq++
	p.sent.Add(1)
	return nil
}

func (p *Publisher) sendOne(seq uint64, payload []byte) error {
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	if err := p.sock.SendMulti(zmq4.NewMsgFrom(p.topic, sb[:], payload)); err != nil {
		return err
	}
	if p.replay != nil {
		p.replay.ring.add(seq, payload)
	}
	return nil
}
