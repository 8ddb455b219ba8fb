// Copyright 2018 The go-zeromq Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package zmq4

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Topics is an interface that wraps the basic Topics method.
type Topics interface {
	// Topics returns the sorted list of topics a socket is subscribed to.
	Topics() []string
}

// NewPub returns a new PUB ZeroMQ socket.
// The returned socket value is initially unbound.
func NewPub(ctx context.Context, opts ...Option) Socket {
	pub := &pubSocket{sck: newSocket(ctx, Pub, opts...)}
	pub.sck.w = newPubMWriter(pub.sck)
	pub.sck.r = newPubQReader(pub.sck.ctx)
	return pub
}

// pubSocket is a PUB ZeroMQ socket.
type pubSocket struct {
	sck *socket
}

// Close closes the open Socket
func (pub *pubSocket) Close() error {
	return pub.sck.Close()
}

// Send puts the message on the outbound send queue.
// Send blocks until the message can be queued or the send deadline expires.
func (pub *pubSocket) Send(msg Msg) error {
	ctx, cancel := context.WithTimeout(pub.sck.ctx, pub.sck.Timeout())
	defer cancel()
	return pub.sck.w.write(ctx, msg)
}

// SendMulti puts the message on the outbound send queue.
// SendMulti blocks until the message can be queued or the send deadline expires.
// The message will be sent as a multipart message.
func (pub *pubSocket) SendMulti(msg Msg) error {
	msg.multipart = true
	ctx, cancel := context.WithTimeout(pub.sck.ctx, pub.sck.Timeout())
	defer cancel()
	return pub.sck.w.write(ctx, msg)
}

// Recv receives a complete message.
func (*pubSocket) Recv() (Msg, error) {
	msg := Msg{err: fmt.Errorf("zmq4: PUB sockets can't recv messages")}
	return msg, msg.err
}

// Listen connects a local endpoint to the Socket.
func (pub *pubSocket) Listen(ep string) error {
	return pub.sck.Listen(ep)
}

// Dial connects a remote endpoint to the Socket.
func (pub *pubSocket) Dial(ep string) error {
	return pub.sck.Dial(ep)
}

// Type returns the type of this Socket (PUB, SUB, ...)
func (pub *pubSocket) Type() SocketType {
	return pub.sck.Type()
}

// Addr returns the listener's address.
// Addr returns nil if the socket isn't a listener.
func (pub *pubSocket) Addr() net.Addr {
	return pub.sck.Addr()
}

// GetOption is used to retrieve an option for a socket.
func (pub *pubSocket) GetOption(name string) (interface{}, error) {
	return pub.sck.GetOption(name)
}

// SetOption is used to set an option for a socket.
func (pub *pubSocket) SetOption(name string, value interface{}) error {
	err := pub.sck.SetOption(name, value)
	if err != nil {
		return err
	}

	if name != OptionHWM {
		return ErrBadProperty
	}

	hwm, ok := value.(int)
	if !ok {
		return ErrBadProperty
	}

	w := pub.sck.w.(*pubMWriter)
	w.mu.Lock()
	w.hwm = hwm
	w.mu.Unlock()
	return nil
}

// Topics returns the sorted list of topics a socket is subscribed to.
func (pub *pubSocket) Topics() []string {
	return pub.sck.topics()
}

// pubQReader is a queued-message reader.
type pubQReader struct {
	ctx context.Context

	mu sync.RWMutex
	rs []*Conn
	c  chan Msg

	sem *semaphore // ready when a connection is live.
}

func newPubQReader(ctx context.Context) *pubQReader {
	const qrsize = 10
	return &pubQReader{
		ctx: ctx,
		c:   make(chan Msg, qrsize),
		sem: newSemaphore(),
	}
}

func (q *pubQReader) Close() error {
	q.mu.RLock()
	var err error
	for _, r := range q.rs {
		e := r.Close()
		if e != nil && err == nil {
			err = e
		}
	}
	q.rs = nil
	q.mu.RUnlock()
	return err
}

func (q *pubQReader) addConn(r *Conn) {
	q.mu.Lock()
	q.sem.enable()
	q.rs = append(q.rs, r)
	q.mu.Unlock()
	go q.listen(q.ctx, r)
}

func (q *pubQReader) rmConn(r *Conn) {
	q.mu.Lock()
	defer q.mu.Unlock()

	cur := -1
	for i := range q.rs {
		if q.rs[i] == r {
			cur = i
			break
		}
	}
	if cur >= 0 {
		q.rs = append(q.rs[:cur], q.rs[cur+1:]...)
	}
}

func (q *pubQReader) read(ctx context.Context, msg *Msg) error {
	q.sem.lock(ctx)
	select {
	case <-ctx.Done():
	case *msg = <-q.c:
	}
	return msg.err
}

func (q *pubQReader) listen(ctx context.Context, r *Conn) {
	defer q.rmConn(r)
	defer r.Close()
	// sluice: nothing a subscriber sends may end the process.
	defer func() {
		if e := recover(); e != nil {
			r.SetClosed()
		}
	}()

	for {
		msg := r.read()
		select {
		case <-ctx.Done():
			return
		default:
			if msg.err != nil {
				r.SetClosed() // sluice: so that the socket forgets it (a size-limit error is no I/O error)
				return
			}
			switch {
			case q.topic(msg):
				if !r.subscribe(msg) {
					r.SetClosed()
					return
				}
			case r.typ == Pub:
				// sluice: dropped. v0.17.0 put it on a channel of 10 that a
				// PUB socket never reads: the 11th blocked this goroutine
				// for good, past the connection's end.
			default: // XPUB: Recv reads it
				select {
				case q.c <- msg:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

func (q *pubQReader) topic(msg Msg) bool {
	if msg.isCmd() || len(msg.Frames) != 1 { // sluice: a command is no subscription
		return false
	}
	frame := msg.Frames[0]
	if len(frame) == 0 {
		return false
	}
	topic := frame[0]
	return topic == 0 || topic == 1
}

// pubMWriter sends each message to every subscriber whose topics match it.
//
// sluice: v0.17.0 wrote each message to the subscribers in turn from one
// goroutine, without a deadline, behind one queue for all of them: a
// subscriber that stopped reading stalled every other one once its socket
// buffers were full. Here each subscriber has its own bounded queue (hwm
// messages, sendQueueBytes bytes; past either its messages are dropped, as
// ZeroMQ drops at a pipe's high-water mark) and its own writer goroutine,
// whose writes have a deadline (writeTimeout); a subscriber that misses it
// is disconnected. write never blocks.
type pubMWriter struct {
	sck *socket

	mu     sync.Mutex
	subs   map[*Conn]*subQueue
	hwm    int
	closed bool
}

// subQueue is one subscriber's queue and its writer's stop signal.
type subQueue struct {
	conn  *Conn
	q     chan Msg
	bytes atomic.Int64 // queued, not yet written
	stop  chan struct{}
}

// defaultHWM is libzmq's ZMQ_SNDHWM default, for a PUB socket not given one.
const defaultHWM = 1000

func newPubMWriter(sck *socket) *pubMWriter {
	return &pubMWriter{sck: sck, subs: make(map[*Conn]*subQueue)}
}

func (w *pubMWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	var err error
	for c, s := range w.subs {
		close(s.stop)
		if e := c.Close(); e != nil && err == nil {
			err = e
		}
	}
	clear(w.subs)
	return err
}

func (w *pubMWriter) addConn(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		_ = c.Close()
		return
	}
	hwm := w.hwm
	if hwm <= 0 {
		hwm = defaultHWM
	}
	s := &subQueue{conn: c, q: make(chan Msg, hwm), stop: make(chan struct{})}
	w.subs[c] = s
	go w.send(s)
}

func (w *pubMWriter) rmConn(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.subs[c]; ok {
		close(s.stop)
		delete(w.subs, c)
		_ = c.Close()
	}
}

func (w *pubMWriter) write(ctx context.Context, msg Msg) error {
	topic := string(msg.Frames[0])
	size := int64(msg.size())
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.subs {
		if !s.conn.subscribed(topic) {
			continue
		}
		if limit := w.sck.sendQueueBytes; limit > 0 && s.bytes.Load()+size > limit {
			continue
		}
		select {
		case s.q <- msg:
			s.bytes.Add(size)
		default:
		}
	}
	return nil
}

// send is one subscriber's writer: it ends when the subscriber is removed,
// the socket closes, or a write fails or misses its deadline (a message cut
// off in the middle leaves the stream unreadable, so the subscriber goes).
func (w *pubMWriter) send(s *subQueue) {
	defer func() {
		if e := recover(); e != nil {
			_ = s.conn.Close()
			s.conn.SetClosed()
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-w.sck.ctx.Done():
			return
		case msg := <-s.q:
			s.bytes.Add(-int64(msg.size()))
			if w.sck.writeTimeout > 0 {
				_ = s.conn.rw.SetWriteDeadline(time.Now().Add(w.sck.writeTimeout))
			}
			if err := s.conn.SendMsg(msg); err != nil {
				_ = s.conn.Close()
				s.conn.SetClosed()
				return
			}
		}
	}
}

var (
	_ rpool  = (*pubQReader)(nil)
	_ wpool  = (*pubMWriter)(nil)
	_ Socket = (*pubSocket)(nil)
	_ Topics = (*pubSocket)(nil)
)
