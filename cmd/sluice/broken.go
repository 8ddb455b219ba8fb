package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
)

// watchBroken turns a backend that cannot recover (engine.Broken: a sticky
// CUDA error, a lost device) into a clean exit a supervisor restarts: /ready
// goes 503 and open streams end (srv.Drain), the server shuts down (stop),
// and the error it returns makes the process exit non-zero. A server that
// kept answering with a dead device would fail every request forever; one
// that hung would never be restarted.
//
// The returned channel yields the engine's error once it broke, or closes
// when ctx ends first.
func watchBroken(ctx context.Context, eng *engine.Engine, srv *server.Server, stop func(), log *slog.Logger) <-chan error {
	out := make(chan error, 1)
	go func() {
		defer close(out)
		select {
		case <-eng.Broken():
		case <-ctx.Done():
			return
		}
		err := eng.BrokenErr()
		log.Error("backend cannot recover: draining and exiting", "err", err)
		srv.Drain()
		stop()
		out <- fmt.Errorf("serve: %w", err)
	}()
	return out
}
