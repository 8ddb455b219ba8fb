// Copyright 2018 The go-zeromq Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package zmq4

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// NewRouter returns a new ROUTER ZeroMQ socket.
// The returned socket value is initially unbound.
func NewRouter(ctx context.Context, opts ...Option) Socket {
	router := &routerSocket{newSocket(ctx, Router, opts...)}
	router.sck.r = newRouterQReader(router.sck.ctx)
	router.sck.w = newRouterMWriter(router.sck.ctx, router.sck.writeTimeout)
	return router
}

// routerSocket is a ROUTER ZeroMQ socket.
type routerSocket struct {
	sck *socket
}

// Close closes the open Socket
func (router *routerSocket) Close() error {
	return router.sck.Close()
}

// Send puts the message on the outbound send queue.
// Send blocks until the message can be queued or the send deadline expires.
func (router *routerSocket) Send(msg Msg) error {
	ctx, cancel := context.WithTimeout(router.sck.ctx, router.sck.Timeout())
	defer cancel()
	return router.sck.w.write(ctx, msg)
}

// SendMulti puts the message on the outbound send queue.
// SendMulti blocks until the message can be queued or the send deadline expires.
// The message will be sent as a multipart message.
func (router *routerSocket) SendMulti(msg Msg) error {
	msg.multipart = true
	return router.Send(msg)
}

// Recv receives a complete message.
func (router *routerSocket) Recv() (Msg, error) {
	return router.sck.Recv()
}

// Listen connects a local endpoint to the Socket.
func (router *routerSocket) Listen(ep string) error {
	return router.sck.Listen(ep)
}

// Dial connects a remote endpoint to the Socket.
func (router *routerSocket) Dial(ep string) error {
	return router.sck.Dial(ep)
}

// Type returns the type of this Socket (PUB, SUB, ...)
func (router *routerSocket) Type() SocketType {
	return router.sck.Type()
}

// Addr returns the listener's address.
// Addr returns nil if the socket isn't a listener.
func (router *routerSocket) Addr() net.Addr {
	return router.sck.Addr()
}

// GetOption is used to retrieve an option for a socket.
func (router *routerSocket) GetOption(name string) (interface{}, error) {
	return router.sck.GetOption(name)
}

// SetOption is used to set an option for a socket.
func (router *routerSocket) SetOption(name string, value interface{}) error {
	return router.sck.SetOption(name, value)
}

// routerQReader is a queued-message reader.
type routerQReader struct {
	ctx context.Context

	mu sync.RWMutex
	rs []*Conn
	c  chan Msg

	sem *semaphore // ready when a connection is live.
}

func newRouterQReader(ctx context.Context) *routerQReader {
	const qrsize = 10
	return &routerQReader{
		ctx: ctx,
		c:   make(chan Msg, qrsize),
		sem: newSemaphore(),
	}
}

func (q *routerQReader) Close() error {
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

func (q *routerQReader) addConn(r *Conn) {
	q.mu.Lock()
	q.sem.enable()
	q.rs = append(q.rs, r)
	q.mu.Unlock()
	go q.listen(q.ctx, r)
}

func (q *routerQReader) rmConn(r *Conn) {
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

func (q *routerQReader) read(ctx context.Context, msg *Msg) error {
	q.sem.lock(ctx)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case *msg = <-q.c:
	}
	return msg.err
}

func (q *routerQReader) listen(ctx context.Context, r *Conn) {
	defer q.rmConn(r)
	defer r.Close()
	// sluice: nothing a peer sends may end the process.
	defer func() {
		if e := recover(); e != nil {
			r.SetClosed()
		}
	}()

	id := []byte(r.Peer.Meta[sysSockID])
	for {
		msg := r.read()
		if msg.err != nil {
			// sluice: one peer's failure (a size-limit error, a hang-up)
			// ends that peer, not the socket: v0.17.0 handed it to Recv,
			// which a server loop takes for its socket's end, as libzmq's
			// ROUTER never reports a peer's error.
			r.SetClosed()
			return
		}
		if msg.isCmd() {
			// sluice: a command (PING) is no message for Recv.
			continue
		}
		msg.Frames = append([][]byte{id}, msg.Frames...)
		// sluice: v0.17.0 checked ctx, then waited on q.c without it: a
		// socket closed while nobody read kept this goroutine forever.
		select {
		case <-ctx.Done():
			return
		case q.c <- msg:
		}
	}
}

// routerMWriter sends each message to the one peer its first frame names.
//
// sluice: v0.17.0 wrote under one lock, without a deadline, to every
// connection that claimed the identity: a peer that stopped reading stalled
// every send to every other peer, for good. Here a write holds only its
// peer's lock and has a deadline (writeTimeout); a peer that misses it is
// disconnected (a message cut off in the middle leaves its stream
// unreadable). socket.addConn refuses a second connection claiming an
// identity in use, as libzmq does, so one peer cannot read another's
// replies.
type routerMWriter struct {
	ctx     context.Context
	timeout time.Duration
	mu      sync.Mutex
	ws      []*Conn
	locks   map[*Conn]*sync.Mutex // one writer at a time per peer: frames of two messages must not interleave
	sem     *semaphore
}

func newRouterMWriter(ctx context.Context, timeout time.Duration) *routerMWriter {
	return &routerMWriter{
		ctx:     ctx,
		timeout: timeout,
		locks:   make(map[*Conn]*sync.Mutex),
		sem:     newSemaphore(),
	}
}

func (w *routerMWriter) Close() error {
	w.mu.Lock()
	var err error
	for _, ww := range w.ws {
		e := ww.Close()
		if e != nil && err == nil {
			err = e
		}
	}
	w.ws = nil
	clear(w.locks)
	w.mu.Unlock()
	return err
}

func (mw *routerMWriter) addConn(w *Conn) {
	mw.mu.Lock()
	mw.sem.enable()
	mw.ws = append(mw.ws, w)
	mw.locks[w] = new(sync.Mutex)
	mw.mu.Unlock()
}

func (mw *routerMWriter) rmConn(w *Conn) {
	mw.mu.Lock()
	defer mw.mu.Unlock()

	cur := -1
	for i := range mw.ws {
		if mw.ws[i] == w {
			cur = i
			break
		}
	}
	if cur >= 0 {
		mw.ws = append(mw.ws[:cur], mw.ws[cur+1:]...)
	}
	delete(mw.locks, w)
}

// ErrNoRoute is a ROUTER's answer to a message for an identity no
// connected peer holds (the peer has gone), libzmq's EHOSTUNREACH under
// ZMQ_ROUTER_MANDATORY.
// sluice: v0.17.0 dropped such a message silently, so a server streaming
// many replies to a peer that left could not tell.
var ErrNoRoute = errors.New("zmq4: no peer with that routing id")

func (w *routerMWriter) write(ctx context.Context, msg Msg) error {
	if len(msg.Frames) == 0 { // sluice: v0.17.0 indexed the first frame unchecked
		return ErrNoRoute
	}
	w.sem.lock(ctx)
	id := msg.Frames[0]
	dmsg := NewMsgFrom(msg.Frames[1:]...)
	dmsg.multipart = msg.multipart
	w.mu.Lock()
	var (
		peer *Conn
		lock *sync.Mutex
	)
	for _, ww := range w.ws {
		if bytes.Equal([]byte(ww.Peer.Meta[sysSockID]), id) {
			peer, lock = ww, w.locks[ww]
			break
		}
	}
	w.mu.Unlock()
	if peer == nil {
		return ErrNoRoute
	}
	lock.Lock()
	defer lock.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.timeout > 0 {
		_ = peer.rw.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	if err := peer.SendMsg(dmsg); err != nil {
		_ = peer.Close()
		peer.SetClosed()
		return err
	}
	return nil
}

var (
	_ rpool  = (*routerQReader)(nil)
	_ wpool  = (*routerMWriter)(nil)
	_ Socket = (*routerSocket)(nil)
)
