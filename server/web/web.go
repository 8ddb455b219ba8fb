package web

import (
	"embed"
	"io/fs"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice/engine"
)

//go:embed assets
var assets embed.FS

// Authorizer reports whether a request carries an accepted API key (true
// for every request when authentication is off) and the tenant whose
// sequences it may see: "" for all of them (no keys, or one), else its own
// key's (engine.Request.Tenant), so one key never sees another's requests,
// their lengths or their blocks on the status stream.
type Authorizer func(r *http.Request) (tenant string, ok bool)

// Web is the page and the status stream for one engine.
type Web struct {
	authorize Authorizer
	hub       hub
	static    http.Handler
	index     []byte
	quit      chan struct{} // closed by Close: status streams end
	closeOnce sync.Once
}

// New returns the page's handlers; authorize guards the status stream as
// the API guards /v1 (nil: no key). The page itself is public: it holds no
// data and asks for the key when the API answers 401.
func New(authorize Authorizer) *Web {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	if authorize == nil {
		authorize = func(*http.Request) (string, bool) { return "", true }
	}
	w := &Web{authorize: authorize, static: http.StripPrefix("/ui/", http.FileServerFS(sub)), index: index, quit: make(chan struct{})}
	w.hub.init()
	return w
}

// Routes lists the patterns and handlers to add to the server's mux.
func (w *Web) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /{$}":              http.HandlerFunc(w.servePage),
		"GET /ui/":              http.HandlerFunc(w.serveAsset),
		"GET /v1/engine/events": http.HandlerFunc(w.serveEvents),
	}
}

// Attach starts the status stream on e once the model has loaded; clients
// that connected before wait for it.
func (w *Web) Attach(e *engine.Engine) { w.hub.attach(e) }

// Close ends every status stream (they never end by themselves, so a
// graceful HTTP shutdown would otherwise wait its whole grace period for
// them) and stops the engine watcher, waiting for it.
func (w *Web) Close() {
	w.closeOnce.Do(func() { close(w.quit) })
	w.hub.close()
}

// securityHeaders keep model output, which the page renders as text, from
// ever running: no inline script, no foreign origin, no framing.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func (w *Web) servePage(rw http.ResponseWriter, _ *http.Request) {
	securityHeaders(rw.Header())
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-cache")
	_, _ = rw.Write(w.index)
}

func (w *Web) serveAsset(rw http.ResponseWriter, r *http.Request) {
	securityHeaders(rw.Header())
	rw.Header().Set("Cache-Control", "no-cache")
	w.static.ServeHTTP(rw, r)
}
