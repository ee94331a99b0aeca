# SPDX-License-Identifier: MIT
"""tests/programs/work.py: real work for the interpreter under hakozuna.

Dicts, lists, strings, json, sets, big integers, threads; prints results
that must be the same with and without the allocator preloaded."""
import hashlib
import json
import threading
from collections import Counter, defaultdict


def build(seed, n):
    d = {}
    x = seed
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        d["k%d-%x" % (i, x & 0xFFFF)] = {"i": i, "x": x, "s": "v" * (x % 50),
                                         "l": list(range(x % 20))}
    return d


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def main():
    results = {}
    d = build(1, 20000)
    text = json.dumps(d, sort_keys=True)
    back = json.loads(text)
    assert back == d
    results["json"] = digest(back)
    for k in list(d)[::3]:
        del d[k]
    results["after_delete"] = len(d)
    words = text.replace('"', " ").replace(",", " ").split()
    results["counter"] = Counter(words).most_common(5)
    groups = defaultdict(list)
    for w in words[:100000]:
        groups[len(w)].append(w)
    results["groups"] = sorted((k, len(v)) for k, v in groups.items())
    results["bigint"] = str(3 ** 20000 % (10 ** 40))
    results["set"] = len({w[:4] for w in words})

    out = [None] * 8

    def worker(t):
        local = build(t + 100, 5000)
        s = json.dumps(local, sort_keys=True)
        out[t] = (len(s), digest(json.loads(s)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    results["threads"] = out
    print(json.dumps(results, sort_keys=True, indent=1))


main()
