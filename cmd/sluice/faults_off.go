//go:build !faultinject

package main

import (
	"flag"

	"github.com/sluicehq/sluice/loader"
)

// addFaultFlag adds nothing to a release build; see faults_on.go.
func addFaultFlag(*flag.FlagSet, *loader.Options) {}
