//go:build !unix

package web

import "time"

func processCPU() time.Duration { return 0 }
