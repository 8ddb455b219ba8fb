"""A replay client on libzmq (pyzmq): asks the replay socket for every batch
from START on, as llm-d's indexer does (a DEALER sends ["", start] with
start 8 bytes big-endian), and prints one JSON line per reply frame set as
libzmq delivered it, then exits after the end marker.

    python libzmq_replay.py tcp://127.0.0.1:PORT START [USER:PASSWORD]

Each line: {"frames": [hex of each frame], "batch_len": fields of the
msgpack batch or -1}. The client gives up after 10 s without a reply."""

import json
import sys

import msgpack
import zmq

ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.setsockopt(zmq.RCVTIMEO, 10000)
if len(sys.argv) > 3:
    user, password = sys.argv[3].split(":", 1)
    s.setsockopt(zmq.PLAIN_USERNAME, user.encode())
    s.setsockopt(zmq.PLAIN_PASSWORD, password.encode())
s.connect(sys.argv[1])
s.send_multipart([b"", int(sys.argv[2]).to_bytes(8, "big")])
while True:
    frames = s.recv_multipart()
    batch_len = -1
    if len(frames) == 4 and frames[3]:
        batch_len = len(msgpack.unpackb(frames[3], strict_map_key=False))
    print(json.dumps({"frames": [f.hex() for f in frames], "batch_len": batch_len}), flush=True)
    if len(frames) == 4 and frames[3] == b"":
        break
