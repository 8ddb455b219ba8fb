// Command sluice is the Sluice inference server and its tools: serve, generate,
// chat, bench and inspect. It only parses flags, builds validated configs and
// wires the packages together.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

func commands() []command {
	return []command{
		{"serve", "serve a model over the OpenAI-compatible HTTP API", runServe},
		{"generate", "complete one prompt on the command line, streaming to stdout", runGenerate},
		{"chat", "chat with a running server in the terminal", runChat},
		{"bench", "load-test an OpenAI-compatible server: latency percentiles, throughput, goodput, scenarios", runBench},
		{"inspect", "print a model file's architecture, tensor types and sizes", runInspect},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: sluice <command> [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(os.Stderr, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'sluice <command> -h' for a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	for _, c := range commands() {
		if c.name == os.Args[1] {
			err := c.run(os.Args[2:])
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(0)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sluice %s: %v\n", c.name, err)
				os.Exit(1)
			}
			return
		}
	}
	usage()
	os.Exit(2)
}
