package main

import (
	"flag"

	"github.com/sluicehq/sluice/server/stream"
)

// Serve's options for tests: they make the server answer in a way no
// client asked for, so a test can drive an unmodified client down a path
// a small model would not take by itself (tests/agents).
type testFlags struct {
	forceToolCall string
}

func addTestFlags(fs *flag.FlagSet) *testFlags {
	f := &testFlags{}
	fs.StringVar(&f.forceToolCall, "force-tool-call", "", `for tests: a request that offers this tool, leaves tool_choice "auto" and has no tool turn yet `+
		`is answered with a call of it. NAME, or NAME={"arg":…} to pin the arguments too (the call is then known and harmless; the tool's schema in the prompt becomes them). Empty = off`)
	return f
}

// forcedCall is the option as the stream core applies it; nil when off.
func (f *testFlags) forcedCall() (*stream.ForcedCall, error) {
	if f.forceToolCall == "" {
		return nil, nil
	}
	return stream.ParseForcedCall(f.forceToolCall)
}
