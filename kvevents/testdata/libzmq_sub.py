"""A KV-event subscriber on libzmq (pyzmq), the ZeroMQ llm-d's indexer and
vLLM link: prints one JSON line per batch, "ready" once connected.

    python libzmq_sub.py tcp://127.0.0.1:PORT

Hashes are printed as decimal strings (JSON numbers would lose bits)."""

import json
import sys

import msgpack
import zmq

sock = zmq.Context.instance().socket(zmq.SUB)
sock.connect(sys.argv[1])
sock.setsockopt_string(zmq.SUBSCRIBE, "kv@")
print("ready", flush=True)


def h(x):
    return None if x is None else str(x)


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
    print(json.dumps(out), flush=True)
