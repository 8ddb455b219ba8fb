//go:build unix

package server

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit: every open
// stream holds a descriptor, and the usual soft default of 1024 caps a
// server at about a thousand concurrent streams. It returns the new limit.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit NOFILE: %w", err)
	}
	if lim.Cur >= lim.Max {
		return lim.Cur, nil
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("setrlimit NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Cur, nil
}
