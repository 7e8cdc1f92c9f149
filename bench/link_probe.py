#!/usr/bin/python3
"""What TCP actually gets through a shaped link: BYTES each way at once between two hosts.

  link_probe.py serve PORT BYTES          (on one host; answers one connection)
  link_probe.py send HOST PORT BYTES      (on the other; prints the seconds and Mbit/s)
Both ends send BYTES and read BYTES at the same time (full duplex, as an allreduce between
two host leaders does). Used by bench/hosts.sh for the measured link bound."""
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def pump(sock, n):
    buf = b"\0" * CHUNK
    while n > 0:
        k = sock.send(buf[:min(CHUNK, n)])
        n -= k


def drain(sock, n):
    while n > 0:
        b = sock.recv(min(CHUNK, n))
        if not b:
            raise SystemExit("link_probe: connection closed with %d bytes to go" % n)
        n -= len(b)


def both(sock, n):
    t = threading.Thread(target=pump, args=(sock, n))
    t.start()
    drain(sock, n)
    t.join()


def main():
    if sys.argv[1] == "serve":
        port, n = int(sys.argv[2]), int(sys.argv[3])
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(1)
        conn, _ = srv.accept()
        both(conn, n)
        conn.recv(1)  # the sender's "done", so neither side closes early
        return 0
    host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for _ in range(100):
        try:
            sock = socket.create_connection((host, port))
            break
        except OSError:
            time.sleep(0.05)
    t0 = time.monotonic()
    both(sock, n)
    dt = time.monotonic() - t0
    sock.send(b"x")
    print("link probe: %d bytes each way at once in %.2f s = %.1f Mbit/s each way" % (n, dt, n * 8 / dt / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
