package main

import (
	"flag"
	"strings"
	"testing"
)

func TestForceToolCallFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	tf := addTestFlags(fs)
	if c, err := tf.forcedCall(); c != nil || err != nil {
		t.Fatalf("off by default: %+v %v", c, err)
	}
	if err := fs.Parse([]string{"--force-tool-call", `Bash={"command":"printf ok"}`}); err != nil {
		t.Fatal(err)
	}
	c, err := tf.forcedCall()
	if err != nil || c.Name != "Bash" || string(c.Args) != `{"command":"printf ok"}` {
		t.Fatalf("%+v %v", c, err)
	}
	tf.forceToolCall = "Bash=[1]"
	if _, err := tf.forcedCall(); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Fatalf("bad arguments: %v", err)
	}
}
