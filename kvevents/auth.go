package kvevents

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// DefaultUser is the PLAIN user name of a secret file that holds a password
// alone. libzmq refuses an empty ZMQ_PLAIN_USERNAME, so a subscriber needs
// a name all the same.
const DefaultUser = "sluice"

// Credentials are ZMTP PLAIN's user name and password (RFC 24): each 1 to
// 255 bytes. PLAIN authenticates subscribers; it does not encrypt: the
// password and the stream cross the network in clear (doc.go,
// "Authentication").
type Credentials struct {
	User, Password string
}

// ReadCredentials reads a secret file: one line, "user:password", or a
// password alone for DefaultUser. A final newline (LF or CRLF) is ignored.
func ReadCredentials(path string) (*Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kvevents: secret file: %w", err)
	}
	line := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.ContainsAny(line, "\r\n") {
		return nil, fmt.Errorf("kvevents: secret file %s: more than one line", path)
	}
	c := &Credentials{User: DefaultUser, Password: line}
	if user, pass, ok := strings.Cut(line, ":"); ok {
		c.User, c.Password = user, pass
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w (secret file %s)", err, path)
	}
	return c, nil
}

func (c *Credentials) validate() error {
	if len(c.User) == 0 || len(c.User) > 255 || len(c.Password) == 0 || len(c.Password) > 255 {
		return errors.New("kvevents: PLAIN credentials need a user name and a password of 1 to 255 bytes each")
	}
	return nil
}
