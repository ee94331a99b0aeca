# SPDX-License-Identifier: MIT
"""The benchmark suite's contents: every benchmark, its cases in each mode,
and how its results are read. Used by bench/run.py; docs/benchmarks.md
describes the same benchmarks for people.

A benchmark is a Bench: a name, a description, the metric its table and
charts rank by, extra columns, and a function that turns the run
configuration into Cases. A Case is one command line (or one server setup)
that is run once per allocator per run; one execution may yield several table
rows (redis_like reports five patterns at once)."""

MODES = ("quick", "default", "full")


def pick(cfg, quick, default, full):
    """The value for the configuration's mode."""
    return {"quick": quick, "default": default, "full": full}[cfg.mode]


class Metric:
    def __init__(self, key, label, scale=1.0, higher_better=True, fmt="{:.3g}"):
        self.key, self.label, self.scale = key, label, scale
        self.higher_better, self.fmt = higher_better, fmt

    def show(self, v):
        if v is None:
            return "–"
        return self.fmt.format(v * self.scale)

    def as_dict(self):
        return {"key": self.key, "label": self.label, "scale": self.scale,
                "higher_better": self.higher_better}


class Case:
    """kind: "prog" (a program in the bench bin dir), "redis" or "memcached".
    args: the program and its arguments, or the server/client settings.
    est: rough seconds per run with glibc, for the time-left estimate."""

    def __init__(self, bench, label, args, params, est, kind="prog", split=None):
        self.bench, self.label, self.args = bench, label, args
        self.params, self.est, self.kind = params, est, kind
        self.split = split

    def rows(self, result):
        """[(row label, row params, metrics)] from one execution's result."""
        if self.split:
            return self.split(self, result)
        return [(self.label, self.params, result)]


class Bench:
    def __init__(self, name, title, about, metric, extras, cases, rss_note=""):
        self.name, self.title, self.about = name, title, about
        self.metric, self.extras, self.make_cases = metric, extras, cases
        self.rss_note = rss_note


OPS = Metric("ops_per_sec", "Mops/s", 1e-6)
ROUNDS = Metric("ops_per_sec", "Krounds/s", 1e-3)
PCT = "{:.1f}%"


def _range_label(lo, hi):
    return f"{lo}-{hi}"


def random_mixed_cases(cfg):
    iters = pick(cfg, 1_000_000, 10_000_000, 20_000_000)
    out = []
    for name, lo, hi, est in (("small", 16, 2048, 0.06), ("medium", 4096, 32768, 0.12),
                              ("mixed", 16, 32768, 0.1)):
        out.append(Case("random_mixed", f"{name} {lo}-{hi}",
                        ["random_mixed", iters, 400, lo, hi, 1],
                        {"range": _range_label(lo, hi)}, est * iters / 1e6))
    return out


def random_mixed_app_cases(cfg):
    iters = pick(cfg, 1_000_000, 10_000_000, 20_000_000)
    return [Case("random_mixed_app", "app mix", ["random_mixed", iters, 400, "app", 0, 1],
                 {"range": "app"}, 0.05 * iters / 1e6)]


def random_mixed_live_cases(cfg):
    iters = pick(cfg, 2_000_000, 10_000_000, 20_000_000)
    out = []
    for label, lo, hi, est in (("16-4096", 16, 4096, 0.3), ("app mix", "app", 0, 0.15)):
        out.append(Case("random_mixed_live", f"live set {label}",
                        ["random_mixed", iters, 200_000, lo, hi, 1],
                        {"range": "app" if lo == "app" else _range_label(lo, hi)}, est * iters / 1e6))
    return out


def mt_remote_cases(cfg):
    iters = pick(cfg, 100_000, 400_000, 1_000_000)
    out = []
    for lo, hi in ((16, 2048), (16, 32768), (16, 131072)):
        for remote in (0, 50, 90):
            for t in cfg.threads:
                load = t / min(t, cfg.ncpu)
                out.append(Case("mt_remote", f"{lo}-{hi} remote {remote}% t={t}",
                                ["mt_remote", t, iters, 400, lo, hi, remote, 1024, 1],
                                {"range": _range_label(lo, hi), "remote_pct": remote,
                                 "threads": t}, 0.25 * load * iters / 1e6 * (1 + hi / 65536)))
    return out


def larson_cases(cfg):
    rounds = pick(cfg, 10, 30, 100)
    ops = pick(cfg, 5000, 20000, 50000)
    return [Case("larson", f"t={t}", ["larson", t, rounds, ops, 1000, 8, 1024, 1],
                 {"threads": t}, 0.07 * t / min(t, cfg.ncpu) * rounds * ops / 1e6)
            for t in cfg.threads]


def prodcons_cases(cfg):
    iters = pick(cfg, 100_000, 1_000_000, 4_000_000)
    counts = sorted({max(2, t) for t in cfg.threads})
    return [Case("prodcons", f"t={t} ({t // 2}P/{t - t // 2}C)",
                 ["prodcons", t, iters, 16, 2048, 256, 1], {"threads": t},
                 0.25 * (t // 2) / max(1, min(t, cfg.ncpu) / 2) * iters / 1e6)
            for t in counts]


def handoff_cases(cfg):
    iters = pick(cfg, 20_000, 200_000, 400_000)
    return [Case("handoff", f"{p} pair{'s' if p > 1 else ''}",
                 ["handoff", p, iters, 2000, 50, 300000, 1], {"threads": 2 * p},
                 0.4 * p / max(1, min(2 * p, cfg.ncpu) / 2) * iters / 1e6)
            for p in (1, 8)]


def channel_cases(cfg):
    iters = pick(cfg, 10_000, 50_000, 200_000)
    return [Case("channel", f"{lo}-{hi} t=8", ["channel", 8, iters, lo, hi, 1024, 1], {"threads": 8},
                 0.6 * iters / 1e5 * hi / 35000)
            for lo, hi in ((1024, 32768), (32768, 70000))]


def cache_cases(mode):
    def make(cfg):
        iters = pick(cfg, 200, 1000, 2000)
        writes = pick(cfg, 50000, 100000, 200000)
        return [Case(f"cache_{mode}", f"t={t}", ["cache", mode, t, iters, 8, writes],
                     {"threads": t}, 2e-9 * iters * writes * t / min(t, cfg.ncpu))
                for t in cfg.threads]
    return make


def large_cases(cfg):
    iters = pick(cfg, 200, 1000, 5000)
    return [Case("large", "64KiB-10MiB ws=8", ["large", iters, 8, 65536, 10 << 20, 1],
                 {}, 0.5e-3 * iters)]


def calloc_cases(cfg):
    iters = pick(cfg, 20, 100, 200)
    return [Case("calloc", f"{mib} MiB, {'every page' if every == 1 else f'1 page in {every}'}",
                 ["calloc", iters, mib, every], {"mib": mib, "every": every}, 0.5e-3 * mib * iters)
            for mib in (8, 64) for every in (1, 256)]


def rounds_cases(cfg):
    rounds = pick(cfg, 5, 20, 40)
    return [Case("rounds", label, ["rounds", rounds, 100000, lo, hi, 1], {}, est * rounds)
            for label, lo, hi, est in (("4000 B", 4000, 4000, 0.04), ("16 B-8 KiB", 16, 8192, 0.05))]


def realloc_cases(cfg):
    iters = pick(cfg, 200_000, 2_000_000, 5_000_000)
    return [Case("realloc", f"{mode} to <=16KiB", ["realloc_growth", mode, iters, 64, 16384, 1],
                 {"mode": mode}, est * iters / 1e6)
            for mode, est in (("append", 0.14), ("double", 0.03))]


PATTERNS = ("set", "get", "lpush", "lpop", "random")


def _split_patterns(case, res):
    return [(f"{case.label} {p.upper()}", dict(case.params, pattern=p),
             dict(res, mops=res.get(f"{p}_mops"))) for p in PATTERNS]


def redis_like_cases(cfg):
    cycles = pick(cfg, 5, 20, 50)
    return [Case("redis_like", f"t={t}", ["redis_like", t, cycles, 10000, 16, 512, 1],
                 {"threads": t}, 0.03 * cycles * t / min(t, cfg.ncpu), split=_split_patterns)
            for t in cfg.threads]


REDIS_TESTS = ("set", "get", "lpush", "lpop")


def _split_redis(case, res):
    return [(f"{t.upper()} P=16", dict(case.params, test=t),
             dict(res, rps=res.get(f"{t}_rps"), p99_ms=res.get(f"{t}_p99_ms")))
            for t in REDIS_TESTS]


def redis_server_cases(cfg):
    n = pick(cfg, 20000, 100000, 500000)
    return [Case("redis_server", "redis-benchmark",
                 {"requests": n, "clients": 50, "pipeline": 16, "data": 128,
                  "keyspace": 100000, "tests": ",".join(REDIS_TESTS)},
                 {}, 0.4 + n * 4 / 250000, kind="redis", split=_split_redis)]


def memcached_cases(cfg):
    n = pick(cfg, 20000, 200000, 1_000_000)
    keys = pick(cfg, 5000, 20000, 100000)
    args = {"server_threads": 2, "client_threads": 2, "requests": n, "keys": keys,
            "vmin": 16, "vmax": 4096, "set_pct": 10, "pipeline": 16}
    # (many connections: memcached's per-connection buffers come and go
    # through the allocator, from both server threads)
    return [Case("memcached", "get/set 90/10 P=16", args, {}, 0.4 + (n + keys) / 150000, kind="memcached"),
            Case("memcached", "get/set 90/10 P=4, 256 conns", {**args, "pipeline": 4, "conns": 128},
                 {}, 0.4 + (n + keys) / 100000, kind="memcached")]


def mem_return_cases(cfg):
    mb = pick(cfg, 128, 1024, 1024)
    idle = pick(cfg, (0.2, 1.0), (1.0, 5.0), (1.0, 5.0))
    return [Case("mem_return", f"{mb} MiB, free 90%",
                 ["mem_return", mb, 90, idle[0], idle[1], 1], {"total_mb": mb},
                 idle[1] + 0.002 * mb)]


def thread_flood_cases(cfg):
    allocs = pick(cfg, 100, 1000, 2000)
    return [Case("thread_flood", f"{t} threads", ["thread_flood", t, allocs, 16, 4096, 1],
                 {"threads": t}, 0.05 + t * allocs * 1e-6) for t in (100, 1000)]


def thread_churn_cases(cfg):
    threads = pick(cfg, 200, 1000, 2000)
    return [Case("thread_churn", f"{label}, {threads} threads",
                 ["thread_churn", threads, blocks, lo, hi, 1, keep], {}, est * threads)
            for label, blocks, lo, hi, keep, est in (("8 x 64 KiB-1 MiB", 8, 65536, 1 << 20, 0, 2e-3),
                                                     ("32 x 16 B-32 KiB, 1 in 8 left", 32, 16, 32768, 8, 3e-4))]


def server_bench(name, title, about, p99, cases):
    """A real server under load: requests/s, a p99 latency, the server's RSS."""
    return Bench(name, title, about, Metric("rps", "Kreq/s", 1e-3), [p99], cases,
                 rss_note="peak RSS of the server")


BENCHES = [
    Bench("random_mixed", "random_mixed: uniform sizes",
          "One thread, a table of 400 slots; each iteration draws one random number that "
          "picks a slot and a size: an occupied slot is freed, an empty one allocated. "
          "One op per iteration.", OPS, [], random_mixed_cases),
    Bench("random_mixed_app", "random_mixed: application size mix",
          "As random_mixed, with 80% of sizes in 16-256, 15% in 257-2048, 5% in 2049-32768.",
          OPS, [], random_mixed_app_cases),
    Bench("random_mixed_live", "random_mixed: a large live set",
          "As random_mixed with a table of 200,000 slots: about 100,000 blocks live "
          "(200 MB for 16-4096 bytes), so the blocks malloc hands out and free takes back "
          "are mostly out of the CPU's caches, as in a cache server or a database.",
          OPS, [], random_mixed_live_cases),
    Bench("mt_remote", "mt_remote: cross-thread frees",
          "Each thread keeps 400 slots and pushes a share (REMOTE_PCT) of its frees to the "
          "next thread through a single-producer ring of 1024 slots; the receiver frees "
          "them (remote frees). A full ring means the block is freed locally (fallback). "
          "Ops: mallocs, local and remote frees.",
          OPS, [Metric("remote_ratio", "remote", 100, fmt=PCT),
                Metric("fallback_rate", "fallback", 100, fmt=PCT)], mt_remote_cases),
    Bench("larson", "larson: server threads that come and go",
          "Each chain owns 1000 blocks of 8-1024 bytes and replaces random ones; after each "
          "round the array is handed to a newly created thread, so blocks are freed by "
          "threads other than their allocator. Op: one replacement (free + malloc).",
          OPS, [Metric("threads_created", "threads created", fmt="{:.0f}")], larson_cases),
    Bench("prodcons", "prodcons: producers allocate, consumers free",
          "xmalloc-style: half the threads only allocate (16-2048 bytes) and pass blocks in "
          "batches of 256 through a queue, the other half only free. Op: a malloc or a free.",
          OPS, [], prodcons_cases),
    Bench("handoff", "handoff: messages passed between threads",
          "Senders each pass messages to a receiver thread of their own through a queue of "
          "128; the receiver frees them. A message is a buffer of 1-2000 bytes (one in 50: "
          "up to 300 KB), a 10-110-byte string and a 64-byte record, as a Rust program "
          "sends (Vec<u8>, String, Box) over a channel. Op: a malloc or a free. Watch the "
          "peak RSS: the senders' blocks come back to them from other threads.",
          OPS, [], handoff_cases),
    Bench("channel", "channel: workers that take turns",
          "8 threads share one channel of 1024 blocks, as the goroutines of a Go program "
          "calling C, or a thread pool's tasks: each makes a block and writes all of it, "
          "puts it in the channel (or frees it when full), and every third time takes the "
          "oldest block out, reads it and frees it, so most frees are of another thread's "
          "block. Op: a malloc or a free. Watch the peak RSS: the channel holds about 17 MB "
          "(1-32 KB) or 52 MB (32-70 KB).",
          OPS, [], channel_cases),
    Bench("cache_scratch", "cache-scratch: passive false sharing",
          "The main thread allocates one 8-byte object per thread; each thread frees it, then "
          "repeatedly allocates an 8-byte object, writes it many times and frees it. "
          "'shared lines' counts cache lines that held objects of two threads. Op: one "
          "allocate-write-free round.",
          ROUNDS, [Metric("shared_line_pairs", "shared lines", fmt="{:.0f}")], cache_cases("scratch")),
    Bench("cache_thrash", "cache-thrash: active false sharing",
          "Each thread repeatedly allocates an 8-byte object, writes it many times and frees "
          "it; objects of different threads in one cache line slow every write. Op: one "
          "allocate-write-free round.",
          ROUNDS, [Metric("shared_line_pairs", "shared lines", fmt="{:.0f}")], cache_cases("thrash")),
    Bench("large", "large: 64 KiB - 10 MiB blocks",
          "Eight slots of random sizes in 64 KiB-10 MiB; each op frees one and allocates a "
          "new one, writing a byte in every page. Minor page faults per op show an "
          "mmap/munmap storm.",
          Metric("ops_per_sec", "Kops/s", 1e-3),
          [Metric("faults_per_op", "faults/op", fmt="{:.0f}")], large_cases),
    Bench("calloc", "calloc: a zeroed buffer reused",
          "Each op callocs 8 or 64 MiB, writes a byte in every page or in one page of "
          "256, and frees it. Clearing reused memory by writing zeros costs time and RSS "
          "where the program leaves the pages alone; handing out fresh pages costs page "
          "faults where it writes them all.",
          Metric("ops_per_sec", "ops/s"),
          [Metric("faults_per_op", "faults/op", fmt="{:.0f}")], calloc_cases),
    Bench("rounds", "rounds: a batch program's working set built and freed",
          "One thread allocates 100,000 blocks (4000 bytes, or random in 16 B-8 KiB), writes "
          "a byte in each of their pages, frees them all, and starts again. Memory given "
          "back at each round is faulted in again at the next (faults/round). Op: one "
          "malloc and its free.",
          OPS, [Metric("faults_per_round", "faults/round", fmt="{:.0f}")], rounds_cases),
    Bench("realloc", "realloc growth",
          "64 live strings grown by appends of 1-32 bytes up to a random length <= 16 KiB, "
          "then freed: 'append' reallocs to the exact length each time, 'double' doubles "
          "the capacity. Op: one append.",
          OPS, [Metric("moved_ratio", "moved", 100, fmt=PCT)], realloc_cases),
    Bench("redis_like", "redis-like workload",
          "Per-thread pools of \"key-N\" strings (16-512 bytes) half pre-filled; patterns "
          "SET (allocate, format, free), GET (read a random entry), LPUSH (append or "
          "replace), LPOP (free a random entry, move the last into its place), RANDOM "
          "(70/20/5/5 of those). 10000 ops per cycle.",
          Metric("mops", "Mops/s"), [], redis_like_cases),
    server_bench("redis_server", "redis-server under redis-benchmark",
          "redis-server built from Debian's source package with MALLOC=libc "
          "(bench/build-redis.sh; Debian's own binary links jemalloc), the allocator "
          "preloaded into the server; redis-benchmark sends "
          "SET/GET/LPUSH/LPOP with 50 clients, pipeline 16, 128-byte values, 100000 keys.",
          Metric("p99_ms", "p99 ms", higher_better=False, fmt="{:.3g}"), redis_server_cases),
    server_bench("memcached", "memcached under bench/mc_client",
          "memcached (2 threads) with the allocator preloaded; bench/mc_client sends 90% get "
          "/ 10% set of 16-4096-byte values over 2 connections with pipeline 16, and over "
          "256 connections (2 client threads x 128) with pipeline 4.",
          Metric("p99_us", "p99 us", higher_better=False, fmt="{:.0f}"), memcached_cases),
    Bench("mem_return", "memory return after frees",
          "Builds a working set of mixed sizes (every byte written), frees 90% of the blocks "
          "at random, idles; RSS (/proc/self/statm) right after the frees, after the first "
          "and second idle time and after malloc_trim(0) where the allocator has it. "
          "Ranked by RSS after the second idle time (lower is better).",
          Metric("rss_idle2_mb", "RSS idle2 MiB", higher_better=False, fmt="{:.1f}"),
          [Metric("rss_peak_mb", "peak MiB", fmt="{:.1f}"),
           Metric("rss_after_free_mb", "after free MiB", fmt="{:.1f}"),
           Metric("rss_idle1_mb", "idle1 MiB", fmt="{:.1f}"),
           Metric("rss_trim_mb", "after trim MiB", fmt="{:.1f}"),
           Metric("live_mb", "live MiB", fmt="{:.1f}"),
           Metric("live_pages_mb", "live pages MiB", fmt="{:.1f}")], mem_return_cases),
    Bench("thread_flood", "thread flood",
          "100 or 1000 threads released at once by a barrier, each allocating and writing "
          "1000 blocks of 16-4096 bytes, then freeing them. Op: a malloc or a free.",
          OPS, [Metric("create_secs", "create s", higher_better=False, fmt="{:.3f}")],
          thread_flood_cases),
    Bench("thread_churn", "thread churn: a thread per task",
          "Threads run one after another, each created when the last was joined; each "
          "allocates and writes 8 blocks of 64 KiB-1 MiB (or 32 of 16 B-32 KiB), frees them, "
          "four times, and exits; in the second case every 8th block of its last round "
          "outlives it (freed at the end). What a thread freed is for the next one; "
          "faults/thread show memory faulted in again. Op: one malloc and its free.",
          Metric("ops_per_sec", "Kops/s", 1e-3), [Metric("faults_per_thread", "faults/thread", fmt="{:.0f}")],
          thread_churn_cases),
]

BY_NAME = {b.name: b for b in BENCHES}

# Single-thread cases for `make bench-instructions`: (label, MIN, MAX).
INSTRUCTION_CASES = (("16-1024", 16, 1024), ("16-32768", 16, 32768), ("app mix", "app", 0),
                     ("32769-131072", 32769, 131072))
