// Package e2e holds Sluice's end-to-end tests: the real server on loopback,
// the default model on the CPU, and real clients (Go's net/http, curl -N, the
// official OpenAI Node SDK). They skip when the model file is absent (run
// `make model`). The package has no code of its own.
package e2e
