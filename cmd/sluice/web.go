package main

import (
	"context"
	"flag"
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/web"
)

func addWebFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("web", true, "serve the browser page on / and the engine's status stream on /v1/engine/events")
}

// startWeb adds the page's routes to srv (before it serves). The status
// stream takes the same key as the API; the page asks for it. Its streams
// end when ctx does (SIGTERM), so they do not hold up the graceful shutdown.
func startWeb(ctx context.Context, on bool, srv *server.Server, keys *auth.Keys) (*web.Web, error) {
	if !on {
		return nil, nil
	}
	w := web.New(func(r *http.Request) (string, bool) {
		tenant, ok := keys.IdentifyHeader(r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		if !keys.Partitioned() {
			tenant = "" // one key or none: the one tenant sees everything
		}
		return tenant, ok
	})
	for pattern, h := range w.Routes() {
		srv.Handle(pattern, h)
	}
	context.AfterFunc(ctx, w.Close)
	return w, nil
}

// attachWeb starts the status stream once the engine runs.
func attachWeb(w *web.Web, e *engine.Engine) {
	if w != nil {
		w.Attach(e)
	}
}
