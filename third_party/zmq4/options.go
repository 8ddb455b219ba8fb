// Copyright 2018 The go-zeromq Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package zmq4

import (
	"log"
	"time"
)

// Option configures some aspect of a ZeroMQ socket.
// (e.g. SocketIdentity, Security, ...)
type Option func(s *socket)

// WithID configures a ZeroMQ socket identity.
func WithID(id SocketIdentity) Option {
	return func(s *socket) {
		s.id = id
	}
}

// WithSecurity configures a ZeroMQ socket to use the given security mechanism.
// If the security mechanims is nil, the NULL mechanism is used.
func WithSecurity(sec Security) Option {
	return func(s *socket) {
		s.sec = sec
	}
}

// WithDialerRetry configures the time to wait before two failed attempts
// at dialing an endpoint.
func WithDialerRetry(retry time.Duration) Option {
	return func(s *socket) {
		s.retry = retry
	}
}

// WithDialerTimeout sets the maximum amount of time a dial will wait
// for a connect to complete.
func WithDialerTimeout(timeout time.Duration) Option {
	return func(s *socket) {
		s.dialer.Timeout = timeout
	}
}

// WithTimeout sets the timeout value for socket operations
func WithTimeout(timeout time.Duration) Option {
	return func(s *socket) {
		s.timeout = timeout
	}
}

// WithLogger sets a dedicated log.Logger for the socket.
func WithLogger(msg *log.Logger) Option {
	return func(s *socket) {
		s.log = msg
	}
}

// WithDialerMaxRetries configures the maximum number of retries
// when dialing an endpoint (-1 means infinite retries).
func WithDialerMaxRetries(maxRetries int) Option {
	return func(s *socket) {
		s.maxRetries = maxRetries
	}
}

// WithAutomaticReconnect allows to configure a socket to automatically
// reconnect on connection loss.
func WithAutomaticReconnect(automaticReconnect bool) Option {
	return func(s *socket) {
		s.autoReconnect = automaticReconnect
	}
}

// WithHandshakeTimeout bounds a connection's ZMTP handshake (greeting,
// security mechanism, metadata); a peer that has not finished by then is
// dropped. 0 means no limit. The default is 10s.
// sluice: added with the per-connection handshake (socket.accept).
func WithHandshakeTimeout(timeout time.Duration) Option {
	return func(s *socket) {
		s.handshakeTimeout = timeout
	}
}

// WithWriteTimeout bounds the write of one message to one PUB subscriber; a
// subscriber that cannot take it in time is disconnected. 0 means no limit.
// The default is 10s.
// sluice: added with the per-subscriber queues (pubMWriter).
func WithWriteTimeout(timeout time.Duration) Option {
	return func(s *socket) {
		s.writeTimeout = timeout
	}
}

// WithMaxMsgSize is the largest message, all frames together, a peer may
// send; a peer that sends more is disconnected. 0 means no limit. The
// default is 64 MiB.
// sluice: v0.17.0 allocated any size a peer announced.
func WithMaxMsgSize(size int64) Option {
	return func(s *socket) {
		s.maxMsg = size
	}
}

// WithSendQueueBytes bounds what one PUB subscriber may have queued, in
// bytes (the HWM option bounds it in messages); past it, messages to that
// subscriber are dropped. 0 means no limit. The default is 64 MiB.
// sluice: added with the per-subscriber queues (pubMWriter).
func WithSendQueueBytes(size int64) Option {
	return func(s *socket) {
		s.sendQueueBytes = size
	}
}

// WithMaxConns bounds the connections a listening socket holds, in handshake
// or open; past it, new ones are closed at once. 0 means no limit (the
// default).
// sluice: every connection costs goroutines and a queue.
func WithMaxConns(n int) Option {
	return func(s *socket) {
		s.maxConns = n
	}
}

/*
// TODO(sbinet)

func WithIOThreads(threads int) Option {
	return nil
}

func WithSendBufferSize(size int) Option {
	return nil
}

func WithRecvBufferSize(size int) Option {
	return nil
}
*/

const (
	OptionSubscribe   = "SUBSCRIBE"
	OptionUnsubscribe = "UNSUBSCRIBE"
	OptionHWM         = "HWM"
)
