// Package llmd holds the test that puts llm-d's own router in front of two
// real Sluice replicas on this machine, as a cluster would: llm-d-router's
// endpoint picker (EPP, built from its public source by make llmd-check)
// picks a replica for each request, Envoy forwards the bytes (ext_proc to
// the picker, an ORIGINAL_DST cluster on the header the picker sets), and
// the picker's config is the one the Helm chart (deploy/k8s) renders, with
// file discovery in place of Kubernetes. The two replicas listen on
// 127.0.0.1 and 127.0.0.2 with the same ports, because the picker dials
// every endpoint's KV events and replay socket on one port, as on pods.
//
// The package has no code of its own: the test skips unless make
// llmd-check points it at the binaries (SLUICE_LLMD_EPP, ..._ENVOY,
// ..._SLUICE, ..._PICKERCONFIG).
package llmd
