"""A KV-event subscriber on libzmq (pyzmq), the ZeroMQ llm-d's indexer and
vLLM link: prints one JSON line per batch, "ready" once connected.

    python libzmq_sub.py tcp://127.0.0.1:PORT [USER:PASSWORD]

With USER:PASSWORD it is a ZMTP PLAIN client (ZMQ_PLAIN_USERNAME and
ZMQ_PLAIN_PASSWORD, what a libzmq-based indexer sets).

Each batch is decoded twice: by msgpack into positional arrays ("events"),
and by msgspec into structs laid out as vLLM declares its KV events
(vllm/distributed/kv_events.py: array_like, tagged, trailing fields
optional), as vLLM's own consumers decode them ("vllm"): a field of the
wrong type or place fails there. Hashes are printed as decimal strings
(JSON numbers would lose bits)."""

import json
import sys

import msgpack
import msgspec
import zmq


class Event(msgspec.Struct, array_like=True, omit_defaults=True, tag=True):
    pass


class BlockStored(Event):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class BlockRemoved(Event):
    block_hashes: list[int]
    medium: str | None
    group_idx: int | None = None


class AllBlocksCleared(Event):
    pass


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True):
    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


vllm_batch = msgspec.msgpack.Decoder(KVEventBatch)


def h(x):
    return None if x is None else str(x)


def as_vllm(ev):
    out = {"type": type(ev).__name__}
    for name in ev.__struct_fields__:
        v = getattr(ev, name)
        if name == "block_hashes":
            v = [h(x) for x in v]
        elif name == "parent_block_hash":
            v = h(v)
        out[name] = v
    return out


sock = zmq.Context.instance().socket(zmq.SUB)
if len(sys.argv) > 2:
    user, password = sys.argv[2].split(":", 1)
    sock.plain_username = user.encode()
    sock.plain_password = password.encode()
sock.connect(sys.argv[1])
sock.setsockopt_string(zmq.SUBSCRIBE, "kv@")
print("ready", flush=True)

while True:
    frames = sock.recv_multipart()
    out = {"frames": len(frames)}
    if len(frames) == 3:
        topic, seq, payload = frames
        batch = msgpack.unpackb(payload, raw=False)
        events = []
        for ev in batch[1]:
            if ev[0] in ("BlockStored", "BlockRemoved"):
                ev = [ev[0], [h(x) for x in ev[1]]] + [h(ev[2]) if ev[0] == "BlockStored" else ev[2]] + ev[3:]
            events.append(ev)
        out.update(topic=topic.decode(), seq=int.from_bytes(seq, "big"), seq_len=len(seq),
                   batch_len=len(batch), ts=batch[0], events=events)
        try:
            out["vllm"] = [as_vllm(ev) for ev in vllm_batch.decode(payload).events]
        except msgspec.DecodeError as e:
            out["vllm_error"] = str(e)
    print(json.dumps(out), flush=True)
