# SPDX-License-Identifier: MIT
"""tests/programs/mc_load.py HOST PORT: load and verify a memcached server.

Four connections in threads, each with its own keys: set (values of 1 byte
to 400 KB whose bytes derive from the key and a version), get and multi-get
to read them back, overwrite, delete (then a miss is required), incr. At
the end every live key is read again and the server's stats must show no
evictions and exactly the expected number of items. Exits 1 on any
mismatch, printing the first ones."""
import socket
import sys
import threading

HOST, PORT = sys.argv[1], int(sys.argv[2])
CONNS, KEYS, ROUNDS = 4, 3000, 3
errors = []


def value(key, version):
    n = (hash_key(key) * 7 + version * 131) % 4096
    if hash_key(key) % 97 == 0:
        n = 100_000 + (hash_key(key) % 300_000)  # some large values
    unit = ("%s:%d;" % (key, version)).encode()
    return (unit * (n // len(unit) + 1))[:n]


def hash_key(key):
    h = 2166136261
    for c in key.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


class Conn:
    def __init__(self):
        self.s = socket.create_connection((HOST, PORT), timeout=30)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise IOError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n + 2:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise IOError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def set(self, key, data):
        self.s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(data), data))
        return self.line()

    def get(self, *keys):
        self.s.sendall(b"get %s\r\n" % " ".join(keys).encode())
        got = {}
        while True:
            line = self.line()
            if line == b"END":
                return got
            _, k, _, n = line.split()
            got[k.decode()] = self.exactly(int(n))

    def cmd(self, text):
        self.s.sendall(text.encode() + b"\r\n")
        return self.line()


def fail(msg):
    errors.append(msg)


def worker(c):
    try:
        work(c)
    except Exception as e:  # a dropped connection or a malformed reply
        fail("connection %d: %r" % (c, e))


def work(c):
    conn = Conn()
    keys = ["c%d-key-%d" % (c, i) for i in range(KEYS)]
    version = {}
    for rnd in range(ROUNDS):
        for i, k in enumerate(keys):
            if rnd == 0 or i % (rnd + 2) == 0:
                version[k] = rnd
                r = conn.set(k, value(k, rnd))
                if r != b"STORED":
                    fail("set %s: %r" % (k, r))
        for i in range(0, KEYS, 50):  # multi-get of 50 keys
            batch = [k for k in keys[i:i + 50] if k in version]
            got = conn.get(*batch)
            for k in batch:
                if got.get(k) != value(k, version[k]):
                    fail("get %s (round %d): wrong or missing value" % (k, rnd))
        for k in keys[rnd::11]:  # delete some, then they must miss
            if k in version:
                if conn.cmd("delete " + k) != b"DELETED":
                    fail("delete " + k)
                del version[k]
                if conn.get(k):
                    fail("deleted key %s still there" % k)
        if len(errors) > 20:
            return
    counter = "c%d-counter" % c
    conn.cmd("set %s 0 0 1\r\n0" % counter)
    for _ in range(1000):
        conn.cmd("incr %s 3" % counter)
    if conn.get(counter).get(counter) != b"3000":
        fail("incr: %r" % conn.get(counter))
    for k, v in version.items():  # everything once more, one by one
        if conn.get(k).get(k) != value(k, v):
            fail("final get %s" % k)
    results[c] = len(version) + 1


results = [0] * CONNS
threads = [threading.Thread(target=worker, args=(c,)) for c in range(CONNS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
stats = {}
conn = Conn()
conn.s.sendall(b"stats\r\n")
while True:
    line = conn.line()
    if line == b"END":
        break
    _, name, val = line.decode().split(" ", 2)
    stats[name] = val
if stats.get("evictions") != "0":
    fail("evictions: %s (the data did not fit: test setup)" % stats.get("evictions"))
if int(stats.get("curr_items", -1)) != sum(results):
    fail("curr_items %s, expected %d" % (stats.get("curr_items"), sum(results)))
if errors:
    print("\n".join(errors[:20]))
    print("memcached: %d errors" % len(errors))
    sys.exit(1)
print("memcached: %d items verified, %s bytes, %s get hits" % (sum(results), stats["bytes"], stats["get_hits"]))
