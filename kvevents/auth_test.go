package kvevents

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/plain"

	"github.com/sluicehq/sluice/kvcache"
)

// TestPlainCredentials: with Credentials set, a subscriber that presents
// them receives batches; one with a wrong password, another user name, or
// no mechanism (NULL) is refused in its handshake.
func TestPlainCredentials(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{Credentials: &Credentials{User: "indexer", Password: "s3cret"}})
	ep := fmt.Sprintf("tcp://127.0.0.1:%d", addrPort(t, pub))
	for _, tc := range []struct {
		name string
		opts []zmq4.Option
	}{
		{"wrong password", []zmq4.Option{zmq4.WithSecurity(plain.Security("indexer", "s3cre"))}},
		{"wrong user", []zmq4.Option{zmq4.WithSecurity(plain.Security("sluice", "s3cret"))}},
		{"no credentials", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := zmq4.NewSub(t.Context(), append(tc.opts, zmq4.WithDialerMaxRetries(0))...)
			defer sub.Close()
			if err := sub.Dial(ep); err == nil {
				t.Fatal("handshake succeeded")
			}
		})
	}
	msgs := subscribeWithin(t, pub, "kv@", 5*time.Second, zmq4.WithSecurity(plain.Security("indexer", "s3cret")))
	pub.BlockStored(kvcache.Group{Groups: 1}, 1, 0, make([]int32, testBS))
	select {
	case m := <-msgs:
		if len(m.Frames) != 3 || string(m.Frames[0]) != pub.Topic() {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no batch for the authenticated subscriber")
	}
}

func TestReadCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file       string
		user, pass string // "" user: an error
	}{
		{"indexer:s3cret\n", "indexer", "s3cret"},
		{"indexer:s3:cret\r\n", "indexer", "s3:cret"},
		{"s3cret", DefaultUser, "s3cret"},
		{"", "", ""},
		{"\n", "", ""},
		{":s3cret", "", ""},
		{"indexer:", "", ""},
		{"a\nb\n", "", ""},
		{fmt.Sprintf("u:%0256d", 0), "", ""},
	} {
		path := filepath.Join(dir, "secret")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := ReadCredentials(path)
		switch {
		case tc.user == "" && err == nil:
			t.Errorf("%q: read as %+v", tc.file, c)
		case tc.user != "" && (err != nil || c.User != tc.user || c.Password != tc.pass):
			t.Errorf("%q: %+v, %v; want %s:%s", tc.file, c, err, tc.user, tc.pass)
		}
	}
}

func TestBinds(t *testing.T) {
	for ep, want := range map[string][2]bool{ // Binds, AllInterfaces
		"tcp://*:5557":         {true, true},
		"tcp://0.0.0.0:5557":   {true, true},
		"tcp://[::]:5557":      {true, true},
		"tcp://127.0.0.1:5557": {true, false},
		"tcp://[::1]:5557":     {true, false},
		"tcp://localhost:5557": {true, false},
		"ipc:///tmp/kv.sock":   {true, false},
		"tcp://192.0.2.7:5557": {false, false}, // TEST-NET-1: no interface of ours
		"tcp://indexer:5557":   {false, false},
		"tcp://127.0.0.1":      {false, false}, // no port: zmq4 refuses it
		"inproc://kv":          {false, false},
		"tcp://[fd00::1]:5557": {false, false},
	} {
		if got := [2]bool{Binds(ep), AllInterfaces(ep)}; got != want {
			t.Errorf("%s: binds, all interfaces = %v, want %v", ep, got, want)
		}
	}
}
