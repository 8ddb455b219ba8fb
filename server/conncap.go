package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// capListener caps the open connections, all together (max) and per
// client address (perIP), so that one client — 500 connections that never
// finish their headers, each held until ReadHeaderTimeout — cannot take
// every slot. A connection beyond either cap is answered at once with a
// bare HTTP/1.1 503 and closed, before net/http sees it; what it holds
// counts from Accept to Close, idle keep-alive time included.
//
// An IPv6 client counts by its /64: one host usually holds the whole
// prefix, and could otherwise open each connection from a new address.
//
// The default share (an eighth: 128 of the default 1024, so one remote client
// holding 256 half-sent requests gets 503 for the other 128 while the rest of
// the world keeps 896 slots) leaves out clients on this machine: they are all
// one address, so a local proxy or benchmark would lose most of the server,
// and anyone on the machine has easier ways to load it. They count
// toward max. An explicit --max-conns-per-ip applies to them too.
type capListener struct {
	net.Listener
	max, perIP int  // 0: no cap of that kind
	shareLocal bool // perIP applies to loopback clients too
	log        *slog.Logger
	full       []byte // the 503 beyond max
	fullIP     []byte // the 503 beyond perIP

	mu   sync.Mutex
	open int
	byIP map[netip.Prefix]int

	// refusing bounds the goroutines that write a 503 and wait for the
	// client to close: a flood beyond it is closed without one.
	refusing chan struct{}
	refused  atomic.Int64 // since the last log line
	logged   atomic.Int64 // unix nanoseconds of the last log line
}

// capConns wraps ln in the caps of cfg.MaxConns and cfg.MaxConnsPerIP (0:
// an eighth of MaxConns, at least 1); ln itself when both are 0.
func (s *Server) capConns(ln net.Listener) net.Listener {
	maxConns, perIP := s.cfg.MaxConns, s.cfg.MaxConnsPerIP
	if perIP == 0 && maxConns > 0 {
		perIP = max(maxConns/8, 1)
	}
	if maxConns == 0 && perIP == 0 {
		return ln
	}
	return &capListener{
		Listener: ln, max: maxConns, perIP: perIP, shareLocal: s.cfg.MaxConnsPerIP > 0, log: s.log,
		full:     refusal(fmt.Sprintf("too many open connections (--max-conns %d); retry shortly", maxConns)),
		fullIP:   refusal(fmt.Sprintf("too many open connections from this address (--max-conns-per-ip %d); retry shortly", perIP)),
		byIP:     map[netip.Prefix]int{},
		refusing: make(chan struct{}, 64),
	}
}

// refusal is a whole HTTP/1.1 503 response with an OpenAI error body.
func refusal(msg string) []byte {
	code := "too_many_connections"
	body, _ := json.Marshal(&APIError{Message: msg, Type: "server_error", Code: &code}) // always marshals
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// Accept returns the next connection within the caps; the others are
// refused here and never returned.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, local := peerOf(c.RemoteAddr())
		resp := l.take(peer, local)
		if resp == nil {
			return &cappedConn{Conn: c, release: func() { l.release(peer) }}, nil
		}
		l.refuse(c, resp)
	}
}

// take holds a slot for peer (local: a loopback address), or returns the
// 503 to send instead.
func (l *capListener) take(peer netip.Prefix, local bool) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.open >= l.max {
		return l.full
	}
	if l.perIP > 0 && (l.shareLocal || !local) && l.byIP[peer] >= l.perIP {
		return l.fullIP
	}
	l.open++
	l.byIP[peer]++
	return nil
}

func (l *capListener) release(peer netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byIP[peer]--; l.byIP[peer] <= 0 {
		delete(l.byIP, peer)
	}
}

// refuse writes resp and closes c without waiting in Accept. The client's
// request may be unread: closing over it would send a reset that can
// destroy the 503 before the client reads it, so the write side is shut
// first and the rest read away, within a second.
func (l *capListener) refuse(c net.Conn, resp []byte) {
	l.note()
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(resp); err == nil {
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
				_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
			}
		}
		_ = c.Close()
	}()
}

// note counts a refusal and logs the count at most every ten seconds.
func (l *capListener) note() {
	n := l.refused.Add(1)
	now, last := time.Now().UnixNano(), l.logged.Load()
	if now-last < int64(10*time.Second) || !l.logged.CompareAndSwap(last, now) {
		return
	}
	l.refused.Add(-n)
	l.log.Warn("connections refused: at the connection cap", "refused", n, "max_conns", l.max, "max_conns_per_ip", l.perIP)
}

// peerOf is the address a client counts under, its IPv4 address or its
// IPv6 /64, and whether it is a loopback address.
func peerOf(a net.Addr) (netip.Prefix, bool) {
	var ip netip.Addr
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip = tcp.AddrPort().Addr()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits) // the zero prefix for an address of no IP: one bucket
	return p, ip.IsLoopback()
}

// cappedConn gives its slot back once, on the first Close.
type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CloseWrite passes through to the TCP connection: net/http shuts the
// write side before closing (closeWriteAndWait), which spares the client a
// reset over its unread request.
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
