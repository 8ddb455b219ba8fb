// Copyright 2018 The go-zeromq Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package plain provides the ZeroMQ PLAIN security mechanism as specified by:
// https://rfc.zeromq.org/spec:24/ZMTP-PLAIN/
package plain

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"

	"github.com/go-zeromq/zmq4"
)

// security implements the PLAIN security mechanism.
type security struct {
	user []byte
	pass []byte
}

// Security returns a value that implements the PLAIN security mechanism
func Security(user, pass string) zmq4.Security {
	return &security{[]byte(user), []byte(pass)}
}

// Type returns the security mechanism type.
func (security) Type() zmq4.SecurityType {
	return zmq4.PlainSecurity
}

// Handshake implements the ZMTP security handshake according to
// this security mechanism.
// see:
//
//	https://rfc.zeromq.org/spec:23/ZMTP/
//	https://rfc.zeromq.org/spec:24/ZMTP-PLAIN/
//	https://rfc.zeromq.org/spec:25/ZMTP-CURVE/
func (sec *security) Handshake(conn *zmq4.Conn, server bool) error {
	switch {
	case server:
		cmd, err := conn.RecvCmd()
		if err != nil {
			return fmt.Errorf("security/plain: could not receive HELLO from client: %w", err)
		}

		if cmd.Name != zmq4.CmdHello {
			return fmt.Errorf("security/plain: expected HELLO command")
		}

		// sluice: v0.17.0 accepted any HELLO (validateHello was a stub), so
		// a PLAIN server authenticated nobody.
		err = sec.validateHello(cmd.Body)
		if err != nil {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("invalid credentials"))
			return fmt.Errorf("security/plain: could not authenticate client: %w", err)
		}

		err = conn.SendCmd(zmq4.CmdWelcome, nil)
		if err != nil {
			return fmt.Errorf("security/plain: could not send WELCOME to client: %w", err)
		}

		cmd, err = conn.RecvCmd()
		if err != nil {
			return fmt.Errorf("security/plain: could not receive INITIATE from client: %w", err)
		}
		if cmd.Name != zmq4.CmdInitiate { // sluice: v0.17.0 took any command for INITIATE
			return fmt.Errorf("security/plain: expected INITIATE command, got %q", cmd.Name)
		}

		err = conn.Peer.Meta.UnmarshalZMTP(cmd.Body)
		if err != nil {
			return fmt.Errorf("security/plain: could not unmarshal peer metadata: %w", err)
		}

		raw, err := conn.Meta.MarshalZMTP()
		if err != nil {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("internal error"))
			return fmt.Errorf("security/plain: could not serialize metadata: %w", err)
		}

		err = conn.SendCmd(zmq4.CmdReady, raw)
		if err != nil {
			return fmt.Errorf("security/plain: could not send READY to client: %w", err)
		}

	case !server:
		hello := make([]byte, 0, len(sec.user)+len(sec.pass)+2)
		hello = append(hello, byte(len(sec.user)))
		hello = append(hello, sec.user...)
		hello = append(hello, byte(len(sec.pass)))
		hello = append(hello, sec.pass...)

		err := conn.SendCmd(zmq4.CmdHello, hello)
		if err != nil {
			return fmt.Errorf("security/plain: could not send HELLO to server: %w", err)
		}

		cmd, err := conn.RecvCmd()
		if err != nil {
			return fmt.Errorf("security/plain: could not receive WELCOME from server: %w", err)
		}
		if cmd.Name != zmq4.CmdWelcome {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("invalid command"))
			return fmt.Errorf("security/plain: expected a WELCOME command from server: %w", err)
		}

		raw, err := conn.Meta.MarshalZMTP()
		if err != nil {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("internal error"))
			return fmt.Errorf("security/plain: could not serialize metadata: %w", err)
		}

		err = conn.SendCmd(zmq4.CmdInitiate, raw)
		if err != nil {
			return fmt.Errorf("security/plain: could not send INITIATE to server: %w", err)
		}

		cmd, err = conn.RecvCmd()
		if err != nil {
			return fmt.Errorf("security/plain: could not receive READY from server: %w", err)
		}
		if cmd.Name != zmq4.CmdReady {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("invalid command"))
			return fmt.Errorf("security/plain: expected a READY command from server: %w", err)
		}

		err = conn.Peer.Meta.UnmarshalZMTP(cmd.Body)
		if err != nil {
			return fmt.Errorf("security/plain: could not unmarshal peer metadata: %w", err)
		}
		// sluice: v0.17.0 cleared the credentials here, so a socket's second
		// connection (a reconnect) sent empty ones, and two dials at once
		// raced on them.
	}
	return nil
}

// Encrypt writes the encrypted form of data to w.
func (security) Encrypt(w io.Writer, data []byte) (int, error) {
	return w.Write(data)
}

// Decrypt writes the decrypted form of data to w.
func (security) Decrypt(w io.Writer, data []byte) (int, error) {
	return w.Write(data)
}

// validateHello validates the user/passwd credentials.
// errHello is a HELLO that is malformed or names other credentials; the
// client is not told which.
var errHello = errors.New("security/plain: invalid HELLO")

// validateHello checks a client's HELLO body (username length, username,
// password length, password; ZMTP-PLAIN) against the server's credentials.
// sluice: the lengths are the peer's, so each is checked against what
// remains; both fields are compared through their SHA-256 digests, in
// constant time whatever their lengths.
func (sec *security) validateHello(body []byte) error {
	user, rest, ok := field(body)
	if !ok {
		return errHello
	}
	pass, rest, ok := field(rest)
	if !ok || len(rest) != 0 {
		return errHello
	}
	gotUser, wantUser := sha256.Sum256(user), sha256.Sum256(sec.user)
	gotPass, wantPass := sha256.Sum256(pass), sha256.Sum256(sec.pass)
	if subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 {
		return errHello
	}
	return nil
}

// field splits a length-prefixed field (one length byte) off b.
func field(b []byte) (f, rest []byte, ok bool) {
	if len(b) == 0 || int(b[0]) > len(b)-1 {
		return nil, nil, false
	}
	n := int(b[0])
	return b[1 : 1+n], b[1+n:], true
}

// errorBody is an ERROR command's body: the reason's length, then the reason.
// sluice: v0.17.0 sent the reason without its length, which libzmq reads as
// a malformed command.
func errorBody(reason string) []byte {
	return append([]byte{byte(len(reason))}, reason...)
}

var (
	_ zmq4.Security = (*security)(nil)
)
