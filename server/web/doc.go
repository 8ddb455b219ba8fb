// Package web serves Sluice's browser page and the engine's live status
// stream behind it.
//
//	GET /                 the page (chat + engine view), embedded in the binary
//	GET /ui/{file}        its script and style sheet
//	GET /v1/engine/events SSE: one JSON frame per engine step while anyone watches
//
// The page is hand-written HTML, CSS and JavaScript under assets/, embedded
// with go:embed: there is no build step, at run time or before. The chat
// talks to the OpenAI routes like any client (fetch + a stream reader, and
// GET /v1/streams/{id} with Last-Event-ID after a dropped connection); it
// never reaches into the engine.
//
// Concurrency: one hub per Web fans frames out. While at least one client
// is connected, one goroutine holds a single engine.StatusWatcher, encodes
// each frame to JSON once and publishes the bytes; every client's handler
// waits on the same frame chain and writes the newest frame it has not sent,
// so a slow client skips frames and never delays the engine or the others.
// With no client connected no watcher is open and the engine builds nothing.
package web
