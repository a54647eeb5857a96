#!/usr/bin/env python3
"""cut_proxy.py: TCP forwarders on 127.0.0.1 that a signal cuts, as a network partition would.

    cut_proxy.py LISTEN:TARGET [LISTEN:TARGET ...]

Each LISTEN port forwards to 127.0.0.1:TARGET. SIGUSR1 cuts: every forwarded connection is
reset at once, the bytes read but not yet written are dropped, and connections made during
the cut are reset on accept; SIGUSR2 heals. Prints "ready" once every port listens; runs
until SIGTERM. For scripts/patroni_cluster.sh: the standbys stream from their leader through
it, so that a cut leaves the leader's latest WAL on the leader alone, which freezing a standby
does not (the WAL sent waits in its socket buffer, and arrives when it thaws).
"""

import signal
import socket
import struct
import sys
import threading

lock = threading.Lock()
cut = False
live = set()


def reset(sock):
    """Closes with RST (SO_LINGER 0): nothing queued is sent."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def pump(src, dst, pair, done):
    """Forwards src to dst until src's end (passed on as a half-close), an error or a cut."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                dst.shutdown(socket.SHUT_WR)
                break
            with lock:
                if cut:
                    raise OSError("cut")
            dst.sendall(data)
    except OSError:
        with lock:
            live.discard(pair)
        for s in pair:
            reset(s)
        return
    with lock:
        done.append(src)
        last = len(done) == 2
        if last:
            live.discard(pair)
    if last:
        for s in pair:
            s.close()


def serve(listener, target):
    while True:
        conn, _ = listener.accept()
        with lock:
            refused = cut
        if refused:
            reset(conn)
            continue
        try:
            upstream = socket.create_connection(("127.0.0.1", target), timeout=2)
            upstream.settimeout(None)
        except OSError:
            reset(conn)
            continue
        pair = (conn, upstream)
        with lock:
            live.add(pair)
        done = []
        threading.Thread(target=pump, args=(conn, upstream, pair, done), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, conn, pair, done), daemon=True).start()


def on_cut(_sig, _frame):
    global cut
    with lock:
        cut = True
        pairs = list(live)
        live.clear()
    for pair in pairs:
        for s in pair:
            reset(s)


def on_heal(_sig, _frame):
    global cut
    with lock:
        cut = False


def main(args):
    if not args:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for arg in args:
        listen, target = (int(p) for p in arg.split(":"))
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", listen))
        listener.listen(64)
        threading.Thread(target=serve, args=(listener, target), daemon=True).start()
    signal.signal(signal.SIGUSR1, on_cut)
    signal.signal(signal.SIGUSR2, on_heal)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
