// Package kvevents publishes the prefix cache's changes in the wire format of
// vLLM's KV events (vllm/distributed/kv_events.py), which llm-d's KV-cache
// indexer (llm-d-kv-cache, pkg/kvevents) consumes to route each request to
// the replica that already holds its prefix.
//
// Wire format, as vLLM's ZmqEventPublisher sends it (its positional layout)
// and llm-d's vLLM adapter decodes it:
//
//	ZeroMQ PUB, one 3-frame message per batch:
//	  [0] topic    "kv@<pod>@<model>"        (llm-d splits it on '@')
//	  [1] sequence 8-byte big-endian, +1 per batch from 0
//	  [2] payload  msgpack EventBatch, positional (msgspec array_like):
//	      [ts float64, [event...], data_parallel_rank int]
//	  events, each a positional array led by its tag:
//	      ["BlockStored", [hash...], parent|nil, [token...], block_size, lora_id=nil, medium, lora_name=nil]
//	      ["BlockRemoved", [hash...], medium]
//	      ["AllBlocksCleared"]
//
// One BlockStored carries a chain: hash[i+1]'s parent is hash[i], the first
// one's parent is parent (nil for a sequence's first block), and token holds
// block_size ids per hash, in order.
//
// Sliding-window models (Gemma 2 and 3, a windowed Phi-3 or Mistral, served
// with their window layers in a store of their own: docs/sliding-window.md)
// have two block groups, indexed under the same hashes, and every event
// names its group with the fields vLLM gives a hybrid model's KV cache
// groups (vllm-project/vllm #40984), after the ones above:
//
//	["BlockStored", ..., lora_name=nil, extra_keys=nil, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]
//	    group 0: "full_attention", nil    the global group: every block of a prefix
//	    group 1: "sliding_window", W      the window group: a row reads the last W positions
//	["BlockRemoved", [hash...], medium, group_idx]
//
// A model without a window keeps the 8- and 3-field events above,
// unchanged. A window-group block leaves the window as its sequence
// advances; it stays indexed (and serves hits) until it is evicted, which
// BlockRemoved with group_idx 1 reports. A consumer that replays both
// groups predicts exactly the hit Sluice serves (kvcache.PredictHit, the
// rule of vLLM's SlidingWindowManager): the longest run of whole leading
// blocks, ending at most one token before the prompt's end, of L tokens
// such that group 0 holds all L/block_size of them and group 1 those that
// cover positions [L−W+1, L). One that reads group 0 alone (group_idx
// absent or 0, as Dynamo's indexer does) sees the blocks it always saw and
// may predict a longer hit than is served; one that ignores group_idx
// altogether (llm-d-kv-cache before its HMA support) merges the groups, so
// a window-group removal hides a block group 0 still holds: a shorter
// predicted hit, a worse route, never a wrong answer. A model whose
// every layer is a window layer (Phi-3) still reports group 0 as
// "full_attention": its blocks hold no KV there, but the hit needs its
// chain all the same, so the rule above stays exact.
//
// Differences from vLLM, all invisible to llm-d's indexer:
//   - Events are positional arrays, vLLM's layout before vllm-project/vllm
//     #42892; vLLM now sends each event as a map ("type" and field names).
//     llm-d-router's pkg/kvevents (v0.10.0) decodes both, normalizing maps
//     to the positional layout; llm-d-kv-cache's own adapter (its June 2026
//     source) decodes only arrays. Arrays reach both.
//   - Hashes are the prefix cache's own 64-bit chain (kvcache.BlockHash:
//     splitmix64 over the parent hash and token ids), not vLLM's sha256 over
//     CBOR. llm-d keeps engine hashes opaque: it maps them to its own request
//     keys, which it recomputes from the token ids in BlockStored (FNV-64a
//     over CBOR, kvblock/token_processor.go), so only consistency within
//     one pod's stream matters. Hashes are always msgpack uint64 (0xcf): llm-d
//     accepts uint64, int64 or bytes, not the narrower ints a compact
//     encoding would give a small value.
//   - medium is "GPU" for a CUDA replica and "CPU" for a CPU one (vLLM's
//     GPU cache is always "GPU"); llm-d lower-cases it into a device tier.
//   - AllBlocksCleared is sent once when the publisher starts (the pool is
//     empty then), so an indexer still subscribed from a previous process
//     under the same pod name drops what that one had stored (a subscriber
//     that connects later misses it, as ZeroMQ PUB drops what it sends
//     before a subscription arrives; it has nothing stale to drop either).
//     vLLM sends it on a prefix-cache reset, which Sluice does not have.
//   - The replay socket (Config.ReplayEndpoint, vLLM's replay_endpoint) is
//     vLLM's: a ROUTER taking [id, "", start] and answering
//     [id, "", topic, seq, payload] per kept batch from start on, then
//     [id, "", "", -1, ""], which is what llm-d's indexer
//     (pkg/kvevents/zmq_subscriber.go) asks for on connect, on a gap and on
//     a sequence reset. It keeps the last BufferSteps batches (vLLM's
//     buffer_steps, 10,000) and at most 64 MiB of them. vLLM lets the
//     oldest go, after which llm-d's proactive replay from 0 fails
//     ("expected sequence 0") and a picker that restarts drops that
//     replica's live stream until its cooldown ends and the same replay
//     fails again. Sluice instead starts the sequence over when the buffer
//     is full (reset.go): batches 0, 1, ... are AllBlocksCleared and every
//     block the pool holds, parents first, and the buffer holds only
//     those, so a replay from 0 rebuilds the whole index for the replica's
//     whole life; a live indexer sees the sequence go back (llm-d's drops
//     the pod's entries and replays) or, without replay, the full state
//     itself. A state too big for half the buffer falls back to vLLM's
//     window.
//   - A lost parent: when a running sequence's parent block was evicted
//     before its child was stored, BlockStored names a parent the indexer has
//     forgotten and llm-d skips that event; the next request that reuses the
//     prefix stores it again.
//
// Concurrency: BlockStored and BlockRemoved are called on the engine loop
// and never block: each event goes into a bounded channel or, when that is
// full, is counted in Dropped. One sender goroutine batches what it finds,
// encodes and hands each batch to the socket, which never blocks either: it
// puts the batch on each subscriber's own queue (1024 batches, 64 MiB) and
// drops it, silently, for a subscriber whose queue is full; a dropped
// BlockRemoved leaves the indexer believing in a block that is gone (a
// worse route, never a wrong answer).
//
// # Transport
//
// The socket is go-zeromq/zmq4 v0.17.0, pure Go, through the fork in
// third_party/zmq4 (go.mod's replace; third_party/zmq4/SLUICE.md lists the
// changes, each marked "sluice:" in the source). Upstream let anyone who
// reached the port end the process (one malformed READY: a slice past its
// end in the accept goroutine; a frame announcing 2^62 bytes: makeslice),
// stop every later subscriber (one silent connection held its only accept
// goroutine) or stall all of them (one subscriber that stopped reading).
// The fork bounds-checks what peers send, limits a message's size (64 KiB
// inbound here: a subscriber sends only subscriptions), runs each handshake
// in its own goroutine with a 5 s deadline under recover, gives each
// subscriber a bounded queue and a writer whose writes must finish in 10 s
// (or the subscriber is dropped), and holds at most 64 connections.
// The replay ROUTER has the same limits; each peer is answered by its own
// goroutine, its writes have the deadline, a second connection claiming a
// routing id in use is refused. TestHostilePeers, TestSlowSubscriber,
// FuzzListener, TestReplayHostileRequests and FuzzReplayListener hold it
// to that.
//
// libzmq through cgo was the alternative: the reference implementation
// (CURVE included) and what llm-d links, but a C library in the server
// binary and its build (Debian's libzmq3-dev, or a source build for the
// static binary and the CUDA image), for a socket that only publishes. The
// fork keeps the server pure Go outside kernels/cuda and the tokenizers; the
// libzmq tests (make kvevents-check: pyzmq's bundled libzmq 4.3 subscribes,
// with and without PLAIN) keep it honest against the implementation llm-d
// uses.
//
// # Exposure and authentication
//
// The stream carries every tenant's token ids (BlockStored), so who can
// reach it matters. DefaultEndpoint is loopback. An endpoint naming this
// machine is bound (Binds): in a pod, tcp://$(POD_IP):5557, the address
// llm-d's indexer dials, with a NetworkPolicy that admits only the
// indexer's pods. A wildcard (tcp://*:5557) still works; serve warns that it
// is reachable from every interface.
//
// Credentials (serve --kv-events-secret-file: one line "user:password", or
// a password alone for the user "sluice") turn on ZMTP PLAIN (RFC 24): a
// subscriber must present them (libzmq: ZMQ_PLAIN_USERNAME and
// ZMQ_PLAIN_PASSWORD; pebbe/zmq4: SetPlainUsername, SetPlainPassword) or its
// handshake is refused; without them the mechanism is NULL and anyone who
// connects reads the stream. PLAIN authenticates, it does not encrypt: the
// password and the events cross the network in clear, so it keeps
// neighbours out of a network that is itself trusted not to be sniffed
// (a pod network with a NetworkPolicy), nothing more. CURVE (RFC 26:
// Curve25519 keys, every frame encrypted) would also keep the stream
// secret; go-zeromq has no CURVE, and adding it (its four-command handshake
// with cookie, per-message nonces, over golang.org/x/crypto/nacl/box,
// checked against libzmq's) is a piece of work of its own, not done.
// llm-d's indexer must be configured with the same credentials; where it
// cannot be, leave them off and rely on the bind address and the
// NetworkPolicy.
package kvevents
