package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
)

// loadKeys builds the one key set HTTP, gRPC and the web page share: the
// --api-key flag plus the keys in --api-key-file. The log line says how
// many keys are in force, never which.
func loadKeys(apiKey, file string, log *slog.Logger) (*auth.Keys, error) {
	keys, err := auth.New([]string{apiKey}, file)
	if err != nil {
		return nil, err
	}
	if file != "" {
		log.Info("api keys", "file", file, "keys", keys.Count())
	}
	return keys, nil
}

// reloadKeysOnHUP rereads the key file on every SIGHUP until ctx ends. A
// file that fails to read or holds no key leaves the keys in force as they
// were (auth.Keys.Reload). Without a key file SIGHUP keeps its default
// action: nothing here would use it. reloaded, when not nil, sees the
// outcome of each reload (tests wait on it).
func reloadKeysOnHUP(ctx context.Context, keys *auth.Keys, file string, log *slog.Logger, reloaded func(error)) {
	if file == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				err := reloadKeys(keys, log)
				if reloaded != nil {
					reloaded(err)
				}
			}
		}
	}()
}

// reloadKeys is what one SIGHUP does.
func reloadKeys(keys *auth.Keys, log *slog.Logger) error {
	if err := keys.Reload(); err != nil {
		log.Warn("api keys not reloaded; the previous keys stay in force", "err", err)
		return err
	}
	log.Info("api keys reloaded", "keys", keys.Count())
	return nil
}

// warnExposed warns at start when the server listens beyond this machine
// with no key: anyone who can reach the port may then use the model.
func warnExposed(addr string, keys *auth.Keys, log *slog.Logger) {
	if server.Loopback(addr) || keys.Enabled() {
		return
	}
	log.Warn("listening beyond this machine without an API key: anyone who can reach the port can use it; set --api-key or --api-key-file, or listen on 127.0.0.1",
		"addr", addr)
}
