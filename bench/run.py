#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hakozuna benchmark runner (`make bench`, `make bench-instructions`).

Runs the programs built in BUILD/bench-bin once per allocator per run,
interleaved (A B C A B C ...), each allocator LD_PRELOADed ("glibc": none),
checks in every run that the intended shared object served malloc, and
writes BUILD/bench/<timestamp>/{report.md,results.json,*.png}.
Standard library only; the charts (bench/charts.py) need matplotlib and run
under whichever Python has it. See docs/benchmarks.md."""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import suite  # noqa: E402

# name: (Debian package, library file name)
PEERS = {
    "mimalloc": ("libmimalloc2.0", "libmimalloc.so.2"),
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    "jemalloc": ("libjemalloc2", "libjemalloc.so.2"),
}
DEFAULT_ALLOCS = ["hakozuna", "hakozuna-nocheck", "glibc", "mimalloc", "tcmalloc", "jemalloc"]
# Our own builds: never "peers". hakozuna-nocheck is the same library with the
# misuse checks compiled out (`make lib-nocheck`), run only to show their cost.
OURS = {"hakozuna": "libhakozuna.so", "hakozuna-nocheck": "libhakozuna-nocheck.so"}
# redis-server and redis-benchmark built from Debian's source package with
# libc malloc (bench/build-redis.sh), set by ensure_servers.
REDIS = {}
RUNS = {"quick": 1, "default": 3, "full": 5}


def say(msg=""):
    print(msg, flush=True)


def sh(cmd, **kw):
    """Output of a command, or "" when it fails."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              **kw).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def show_path(p):
    rel = os.path.relpath(p, os.getcwd())
    return p if rel.startswith("..") else rel


def fmt_dur(s):
    s = int(max(0, s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# ---------------------------------------------------------------- packages

NEED = os.path.join(ROOT, "tests", "need.sh")


def need(*caps):
    """Makes capabilities work through tests/need.sh (the project's one list
    of what tests and benchmarks need; it installs Debian packages when root).
    True when all work; otherwise need.sh's SKIP lines are shown."""
    r = subprocess.run([NEED, *caps], capture_output=True, text=True)
    if r.returncode != 0:
        for line in (r.stdout + r.stderr).strip().splitlines():
            say(f"  {line}")
    return r.returncode == 0


def dpkg_version(path):
    """(package, version) owning path, by dpkg; (None, None) elsewhere."""
    if not path or not shutil.which("dpkg"):
        return None, None
    real = os.path.realpath(path)
    # With merged /usr, dpkg may know a library under /lib rather than /usr/lib.
    for p in (path, real, re.sub(r"^/usr/", "/", real)):
        out = sh(["dpkg", "-S", p])
        if out:
            pkg = out.splitlines()[-1].split(": ")[0].split(", ")[0]
            ver = sh(["dpkg-query", "-W", "-f=${Version}", pkg])
            return pkg, ver or None
    return None, None


# ---------------------------------------------------------------- allocators

def libc_path():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if re.search(r"/libc(\.so\.6|-[0-9.]+\.so)$", path):
                return os.path.realpath(path)
    return "libc.so.6"


def find_library(filename):
    out = sh(["/sbin/ldconfig", "-p"]) or sh(["ldconfig", "-p"])
    for line in out.splitlines():
        if line.strip().startswith(filename + " ") and "=>" in line:
            path = line.split("=>")[1].strip()
            if os.path.exists(path):
                return path
    libdir = os.path.dirname(libc_path())
    for d in (libdir, "/usr" + libdir if not libdir.startswith("/usr") else libdir,
              "/usr/lib", "/usr/local/lib"):
        p = os.path.join(d, filename)
        if os.path.exists(p):
            return p
    return None


class Alloc:
    def __init__(self, name, path, package=None, version=None, note=""):
        self.name, self.path = name, path
        self.package, self.version, self.note = package, version, note
        # What dladdr must name as the provider of malloc.
        self.expect = os.path.realpath(path) if path else libc_path()

    def preload(self, server=False):
        """The variables that make a program use this allocator."""
        if self.path:
            return {"LD_PRELOAD": self.path}
        if server:
            # A server may be linked with another allocator (Debian's redis with
            # jemalloc): preloading libc puts glibc's malloc first.
            return {"LD_PRELOAD": self.expect}
        return {}

    def env(self):
        return dict(CLEAN_ENV, **self.preload())

    def as_dict(self):
        return {"name": self.name, "path": self.path, "serves_malloc": self.expect,
                "package": self.package, "version": self.version, "note": self.note}


def hakozuna_version():
    try:
        with open(os.path.join(ROOT, "include", "hakozuna.h")) as f:
            h = f.read()
        parts = [re.search(rf"#define HZ_VERSION_{k} (\d+)", h).group(1)
                 for k in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(parts)
    except (OSError, AttributeError):
        return None


def resolve_allocs(names, build):
    """Alloc objects for the requested names/paths; missing ones are skipped
    with one line each (peers are installed first when root with apt)."""
    found, missing_peers = [], []
    def is_path(spec):
        return "/" in spec or spec.endswith(".so") or ".so." in spec
    for name in names:
        if name in PEERS and not find_library(PEERS[name][1]):
            missing_peers.append(name)
    if missing_peers:
        need(*missing_peers)
    for name in names:
        spec = name
        if "=" in name:
            name, spec = name.split("=", 1)
        if name == "glibc":
            pkg, ver = dpkg_version(libc_path())
            found.append(Alloc("glibc", None, pkg, ver or platform.libc_ver()[1],
                               "no preload"))
        elif name in OURS:
            path = os.path.join(build, OURS[name])
            if os.path.exists(path):
                commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
                found.append(Alloc(name, os.path.abspath(path), None,
                                   f"{hakozuna_version()} (git {commit})", "this tree"))
            else:
                say(f"skip {name}: {path} not built (run `make lib lib-nocheck`)")
        elif name in PEERS and not is_path(spec):
            pkg, lib = PEERS[name]
            path = find_library(lib)
            if path:
                found.append(Alloc(name, path, *dpkg_version(path)))
            else:
                say(f"skip {name}: {lib} not found (Debian package {pkg})")
        elif is_path(spec):
            if not os.path.exists(spec):
                say(f"skip {spec}: no such file")
                continue
            if name == spec:
                name = re.sub(r"^lib|\.so.*$", "", os.path.basename(spec))
            pkg, ver = dpkg_version(os.path.abspath(spec))
            found.append(Alloc(name, os.path.abspath(spec), pkg, ver, "added by path"))
        else:
            raise SystemExit(f"unknown allocator '{name}': use hakozuna, hakozuna-nocheck, glibc, "
                             f"{', '.join(PEERS)}, a path to a .so or NAME=PATH")
    return found


# ---------------------------------------------------------------- running

class Run:
    """One execution: ok, error, result (parsed RESULT dict), rss_kb, wall."""

    def __init__(self):
        self.ok, self.error, self.result, self.rss_kb, self.wall = False, None, {}, None, 0.0

    def as_dict(self):
        return {"ok": self.ok, "error": self.error, "rss_kb": self.rss_kb,
                "wall_s": round(self.wall, 3), "result": self.result}


CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("LD_PRELOAD", "LD_DEBUG", "LD_DEBUG_OUTPUT")}
RUNCHILD_RE = re.compile(r"\nRUNCHILD maxrss_kb=(\d+) status=(-?\d+)\n?")


def spawn(cfg, argv, extra_env, out, err, cwd=None):
    """Starts argv under bench/runchild, which adds extra_env (LD_PRELOAD) to
    the program's environment only and reports the program's peak RSS from
    wait4 (see runchild.c for why the runner cannot wait4 it itself)."""
    cmd = [os.path.join(cfg.bin, "runchild")]
    for k, v in extra_env.items():
        cmd += ["-e", f"{k}={v}"]
    return subprocess.Popen(cmd + [str(a) for a in argv], env=CLEAN_ENV, stdout=out,
                            stderr=err, cwd=cwd, start_new_session=True)


def wait_child(proc, timeout):
    """(exit code, timed out); kills the process group after timeout seconds."""
    try:
        proc.wait(timeout)
        return proc.returncode, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return proc.returncode, True


def child_rss(stderr):
    """(peak RSS KiB from runchild's report, stderr without that line)."""
    m = None
    for m in RUNCHILD_RE.finditer(stderr):
        pass
    if not m:
        return None, stderr
    return int(m.group(1)), stderr[:m.start()] + stderr[m.end():]


def parse_result(text):
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def tail(text, n=400):
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def same_object(a, b):
    return bool(a) and os.path.realpath(a) == os.path.realpath(b)


def run_prog(case, alloc, cfg, timeout):
    run = Run()
    argv = [os.path.join(cfg.bin, case.args[0])] + case.args[1:]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = spawn(cfg, argv, alloc.preload(), out, err)
        code, timed_out = wait_child(proc, timeout)
        run.wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        run.rss_kb, stderr = child_rss(err.read())
    res = parse_result(stdout)
    if timed_out:
        run.error = f"timed out after {timeout:.0f} s"
    elif code != 0:
        run.error = f"exit {code}: {tail(stderr or stdout)}"
    elif res is None:
        run.error = f"no RESULT line: {tail(stderr or stdout)}"
    elif not same_object(res.get("malloc_so"), alloc.expect):
        run.error = f"malloc served by {res.get('malloc_so')}, expected {alloc.expect}"
    else:
        run.ok, run.result = True, res
    return run


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, probe, expect, proc, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(probe)
                if expect in s.recv(256):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def malloc_binding(ld_dir, binary):
    """The object the server binary's `malloc` was bound to, from LD_DEBUG=bindings."""
    name = os.path.basename(binary)
    pat = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `malloc'")
    for fn in sorted(os.listdir(ld_dir)):
        with open(os.path.join(ld_dir, fn), errors="replace") as f:
            for line in f:
                m = pat.search(line)
                if m and os.path.basename(m.group(1)) == name:
                    return m.group(2)
    return None


def server_cmd(case, port):
    a = case.args
    if case.kind == "redis":
        # (before ensure_redis has built it, as for --list: where it will be)
        server = [REDIS.get("server", "build/redis-libc/redis-server"), "--port", port, "--bind", "127.0.0.1",
                  "--save", "", "--appendonly", "no", "--daemonize", "no",
                  "--protected-mode", "no", "--loglevel", "warning"]
        client = [REDIS.get("benchmark", "build/redis-libc/redis-benchmark"), "-h", "127.0.0.1", "-p", port,
                  "-n", a["requests"], "-c", a["clients"], "-P", a["pipeline"],
                  "-d", a["data"], "-r", a["keyspace"], "-t", a["tests"], "--csv"]
        return server, client, b"PING\r\n", b"PONG"
    server = [shutil.which("memcached") or "memcached", "-p", port, "-l", "127.0.0.1", "-U", "0",
              "-t", a["server_threads"], "-m", "1024", "-c", "1024"]
    if os.geteuid() == 0:
        server += ["-u", "root"]
    client = ["mc_client", "127.0.0.1", port, a["client_threads"], a["requests"], a["keys"],
              a["vmin"], a["vmax"], a["set_pct"], a["pipeline"], 1, a.get("conns", 1)]
    return server, client, b"version\r\n", b"VERSION"


def parse_redis_csv(text):
    res = {}
    for row in text.splitlines():
        cols = [c.strip('"') for c in row.split('","')]
        if len(cols) >= 7 and cols[0] != "test":
            t = cols[0].strip('"').lower()
            res[f"{t}_rps"] = float(cols[1])
            res[f"{t}_p99_ms"] = float(cols[6].strip('"'))
    return res


def run_server(case, alloc, cfg, timeout):
    """Starts the server with the allocator preloaded, runs the load client
    (not preloaded), stops the server; peak RSS is the server's."""
    run = Run()
    port = str(free_port())
    server, client, probe, expect = server_cmd(case, port)
    if case.kind == "memcached":
        client[0] = os.path.join(cfg.bin, client[0])
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as log:
        ld = os.path.join(tmp, "ld")
        os.mkdir(ld)
        env = dict(alloc.preload(server=True), LD_DEBUG="bindings",
                   LD_DEBUG_OUTPUT=os.path.join(ld, "bind"))
        t0 = time.monotonic()
        proc = spawn(cfg, server, env, log, log, cwd=tmp)
        try:
            if not wait_ready(int(port), probe, expect, proc):
                log.seek(0)
                run.error = f"server did not start: {tail(log.read())}"
                return run
            try:
                cl = subprocess.run([str(c) for c in client], capture_output=True, text=True,
                                    timeout=timeout, env=CLEAN_ENV)
            except subprocess.TimeoutExpired:
                run.error = f"client timed out after {timeout:.0f} s"
                return run
        finally:
            died = proc.poll() is not None
            if not died:
                os.killpg(proc.pid, signal.SIGTERM)
            wait_child(proc, 20)
            run.wall = time.monotonic() - t0
            log.seek(0)
            run.rss_kb, server_log = child_rss(log.read())
        served = malloc_binding(ld, server[0])
        if died:
            run.error = f"the server died during the run: {tail(server_log)}"
        elif cl.returncode != 0:
            run.error = f"client exit {cl.returncode}: {tail(cl.stderr or cl.stdout)}"
            return run
        res = parse_redis_csv(cl.stdout) if case.kind == "redis" else parse_result(cl.stdout)
        if not res or (case.kind == "redis" and len(res) < 2 * len(suite.REDIS_TESTS)):
            run.error = f"no results from the client: {tail(cl.stdout + cl.stderr)}"
        elif not same_object(served, alloc.expect):
            run.error = f"server's malloc bound to {served}, expected {alloc.expect}"
        else:
            res["malloc_so"] = served
            run.ok, run.result = True, res
    return run


def case_command(case, cfg):
    """The exact command line(s) of a case, for the report."""
    if case.kind == "prog":
        prog = os.path.relpath(os.path.join(cfg.bin, case.args[0]), ROOT)
        return "LD_PRELOAD=$ALLOC " + " ".join(str(a) for a in [prog] + case.args[1:])
    server, client, _, _ = server_cmd(case, "$PORT")
    if case.kind == "memcached":
        client[0] = os.path.relpath(os.path.join(cfg.bin, client[0]), ROOT)
    quote = lambda a: "''" if a == "" else str(a)  # noqa: E731
    return ("LD_PRELOAD=$ALLOC " + " ".join(quote(a) for a in server) + " &  "
            + " ".join(quote(a) for a in client))


# ---------------------------------------------------------------- statistics

def summarize(rows, allocs, metric, extras):
    """Adds median/min/max/ratio to every row's per-allocator results."""
    for row in rows:
        for a in allocs:
            r = row["results"].setdefault(a.name, {"runs": []})
            vals = [x["value"] for x in r["runs"] if x["ok"] and x["value"] is not None]
            rss = [x["rss_kb"] for x in r["runs"] if x["ok"] and x["rss_kb"]]
            r["ok_runs"] = len(vals)
            r["failed_runs"] = sum(1 for x in r["runs"] if not x["ok"])
            r["errors"] = sorted({x["error"] for x in r["runs"] if x["error"]})
            r["median"] = statistics.median(vals) if vals else None
            r["min"] = min(vals) if vals else None
            r["max"] = max(vals) if vals else None
            r["rss_kb_median"] = statistics.median(rss) if rss else None
            r["rss_kb_max"] = max(rss) if rss else None
            r["extras"] = {}
            for m in extras:
                ev = [x["metrics"].get(m.key) for x in r["runs"] if x["ok"]]
                ev = [v for v in ev if v is not None]
                r["extras"][m.key] = statistics.median(ev) if ev else None
        peers = [(a.name, row["results"][a.name]["median"]) for a in allocs
                 if a.name not in OURS and row["results"][a.name]["median"] is not None]
        best = None
        if peers:
            pick = max if metric.higher_better else min
            best = pick(peers, key=lambda p: p[1])
        row["best_peer"] = best[0] if best else None
        for a in allocs:
            r = row["results"][a.name]
            v = r["median"]
            if best is None or v is None or v == 0 or best[1] == 0:
                r["ratio"] = None
            else:
                r["ratio"] = v / best[1] if metric.higher_better else best[1] / v


# ---------------------------------------------------------------- report

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1048576:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    commit = sh(["git", "-C", ROOT, "rev-parse", "HEAD"]) or "unknown"
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
    return {
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu,
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory": mem,
        "compiler": sh(["cc", "--version"]).split("\n")[0],
        "python": platform.python_version(),
        "redis": (sh([REDIS["server"], "--version"]) + " (Debian source "
                  + REDIS["version"] + ", MALLOC=libc)") if REDIS else "",
        "memcached": sh(["memcached", "-V"]),
        "valgrind": sh(["valgrind", "--version"]),
    }


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def write_header(lines, data, title, mode_line):
    m = data["meta"]
    lines += [f"# {title}", "",
              f"- commit: `{m['commit']}`",
              f"- date: {m['date']}",
              f"- CPU: {m['cpu']}; {m['cores']} cores ({m['cores_usable']} usable); "
              f"memory {m['memory']}",
              f"- kernel: {m['kernel']}",
              f"- compiler: {m['compiler']}; Python {m['python']}",
              f"- mode: {data['config']['mode']}; {mode_line}",
              f"- command: `{data['config']['command']}`", "",
              "| allocator | version | package | path (serves malloc) |",
              "|---|---|---|---|"]
    for a in data["allocators"]:
        lines.append(f"| {a['name']} | {a['version'] or '–'} | {a['package'] or '–'} | "
                     f"`{a['path'] or 'no preload'}` (`{a['serves_malloc']}`) |")
    lines.append("")


def checks_cost_section(data):
    """hakozuna against hakozuna-nocheck, row by row: what the default misuse
    checks cost (target: at most 3% on single-thread and remote-free rows)."""
    rows = []
    for b in data["benchmarks"]:
        hib = b["metric"]["higher_better"]
        for row in b["rows"]:
            res = row["results"]
            a, n = res.get("hakozuna"), res.get("hakozuna-nocheck")
            if not a or not n or not a["median"] or not n["median"]:
                continue
            cost = (n["median"] / a["median"] - 1) if hib else (a["median"] / n["median"] - 1)
            rows.append([b["title"], row["label"], f"{cost * 100:+.1f}%"])
    if not rows:
        return []
    return ["## Cost of the misuse checks", "",
            "hakozuna (default build, checks on) against the same library with the checks "
            "compiled out (`hakozuna-nocheck`, built by `make lib-nocheck`): the extra time "
            "the checks take, from the medians above (negative: within noise).", "",
            md_table(["benchmark", "case", "cost of checks"], rows), ""]


def write_report(data, out_dir, charts):
    lines = []
    c = data["config"]
    write_header(lines, data, "hakozuna benchmark report",
                 f"{c['runs']} run(s) per allocator, interleaved; threads {c['threads']}; "
                 f"took {fmt_dur(c.get('elapsed_s', 0))}")
    m = data["meta"]
    if m.get("redis") or m.get("memcached"):
        lines += [f"Servers: {m.get('redis') or 'redis not found'}; "
                  f"{m.get('memcached') or 'memcached not found'}.", ""]
    lines += ["Every table: the median of the runs, their min and max, and `vs best peer`: "
              "the median relative to the best peer's (glibc, mimalloc, tcmalloc, "
              "jemalloc and any added library; not hakozuna's own builds), above 1.00 "
              "meaning better than the best peer, for "
              "lower-is-better metrics too. Peak RSS is the child's ru_maxrss (wait4), "
              "median over runs. Each run checks, by dladdr on `malloc`, that the "
              "intended allocator served malloc (servers: by LD_DEBUG=bindings).", ""]
    if "summary.png" in charts.get("summary", []):
        lines += ["![summary](summary.png)", ""]
    for b in data["benchmarks"]:
        met = suite.Metric(**{k: b["metric"][k] for k in ("key", "label", "scale", "higher_better")})
        met.fmt = b["metric"]["fmt"]
        extras = []
        for e in b["extras"]:
            x = suite.Metric(**{k: e[k] for k in ("key", "label", "scale", "higher_better")})
            x.fmt = e["fmt"]
            extras.append(x)
        arrow = "higher is better" if met.higher_better else "lower is better"
        lines += [f"## {b['title']}", "", b["about"], "",
                  f"Metric: {met.label} ({arrow}).{' RSS: ' + b['rss_note'] + '.' if b['rss_note'] else ''}",
                  ""]
        head = ["case", "allocator", f"{met.label} median", "min", "max", "vs best peer",
                "peak RSS MiB"] + [e.label for e in extras] + ["runs ok"]
        rows = []
        for row in b["rows"]:
            for name, r in row["results"].items():
                n = r["ok_runs"] + r["failed_runs"]
                best = " (best peer)" if name == row["best_peer"] else ""
                if not r["ok_runs"]:
                    rows.append([row["label"], name, "FAILED", "", "", "", ""] + [""] * len(extras)
                                + [f"0/{n}: {'; '.join(r['errors'])[:200]}"])
                    continue
                rss = r["rss_kb_median"]
                rows.append([row["label"], name + best, met.show(r["median"]), met.show(r["min"]),
                             met.show(r["max"]),
                             f"{r['ratio']:.2f}" if r["ratio"] is not None else "–",
                             f"{rss / 1024:.1f}" if rss else "–"]
                            + [e.show(r["extras"].get(e.key)) for e in extras]
                            + [f"{r['ok_runs']}/{n}"])
        lines += [md_table(head, rows), ""]
        for c in charts.get(b["name"], []):
            lines += [f"![{c}]({c})", ""]
    lines += checks_cost_section(data)
    lines += ["## Command lines", "",
              "`$ALLOC` is the allocator's path (empty for glibc; for the servers glibc "
              "preloads libc.so.6). Every run uses seed 1, so each allocator gets the same "
              "work.", "", "```"]
    for b in data["benchmarks"]:
        for cmd in b["commands"]:
            lines.append(cmd)
    lines += ["```", ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))


def find_chart_python():
    """An interpreter that can import matplotlib, installing Debian's when root."""
    def has_mpl(py):
        return py and os.path.exists(py) and subprocess.run(
            [py, "-c", "import matplotlib"], capture_output=True).returncode == 0
    for py in (sys.executable, "/usr/bin/python3"):
        if has_mpl(py):
            return py
    if need("matplotlib") and has_mpl("/usr/bin/python3"):
        return "/usr/bin/python3"
    return None


def make_charts(out_dir):
    """{benchmark name or "summary": [png names]} from bench/charts.py."""
    py = find_chart_python()
    if not py:
        say("charts skipped: matplotlib is not importable (install python3-matplotlib)")
        return {}
    r = subprocess.run([py, os.path.join(HERE, "charts.py"), os.path.join(out_dir, "results.json"),
                        out_dir], capture_output=True, text=True)
    if r.returncode != 0:
        say(f"charts failed: {tail(r.stderr, 600)}")
        return {}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


# ---------------------------------------------------------------- main flows

def metric_dict(m):
    d = m.as_dict()
    d["fmt"] = m.fmt
    return d


def ensure_redis(build, quick):
    """Builds (once, cached in BUILD/redis-libc) redis with libc malloc; False if it can't.
    A quick run does not build it (minutes on two cores) but uses a cached one."""
    out = os.path.join(build, "redis-libc")
    if not os.path.exists(os.path.join(out, "redis-server")):
        if quick:
            say("skip redis_server: a quick run does not build redis (`make bench` builds it once "
                "into build/redis-libc, later quick runs use it)")
            return False
        say("building redis-server from Debian's source package with MALLOC=libc "
            "(bench/build-redis.sh, once) ...")
    r = subprocess.run([os.path.join(HERE, "build-redis.sh"), out], capture_output=True, text=True)
    if r.returncode != 0:
        say(f"skip redis_server: {(r.stderr or r.stdout).strip()[-300:]}")
        return False
    REDIS.update(server=os.path.join(out, "redis-server"),
                 benchmark=os.path.join(out, "redis-benchmark"),
                 version=open(os.path.join(out, "version")).read().strip())
    return True


def ensure_servers(benches, build, quick=False):
    """Drops the server benchmarks whose programs are missing (installing them when possible)."""
    keep = []
    for b in benches:
        kind = {"redis_server": "redis", "memcached": "memcached"}.get(b.name)
        if kind == "redis":
            if not ensure_redis(build, quick):
                continue
        elif kind:
            if not need(kind):
                say(f"skip {b.name}: {kind} is not available")
                continue
        keep.append(b)
    return keep


def run_suite(cfg, allocs, benches):
    cases = [(b, c) for b in benches for c in b.make_cases(cfg)]
    total = len(cases) * cfg.runs * len(allocs)
    est_total = sum(c.est for _, c in cases) * cfg.runs * len(allocs)
    say(f"{len(cases)} cases x {len(allocs)} allocators x {cfg.runs} runs = {total} runs; "
        f"first estimate {fmt_dur(est_total)}")
    rows = {}     # (bench, row label) -> row dict
    order = {b.name: [] for b in benches}
    observed = {}  # case id -> [seconds]
    t_start = time.monotonic()
    done = failed = 0
    spent_est = spent = 0.0
    interrupted = False
    try:
        for ci, (b, case) in enumerate(cases):
            timeout = max(120.0, 30 * case.est)
            for i in range(cfg.runs):
                for a in allocs:
                    if case.kind == "prog":
                        run = run_prog(case, a, cfg, timeout)
                    else:
                        run = run_server(case, a, cfg, timeout)
                    done += 1
                    failed += not run.ok
                    observed.setdefault(ci, []).append(run.wall)
                    spent += run.wall
                    spent_est += case.est
                    rowsets = case.rows(run.result) if run.ok else case.rows({})
                    shown = None
                    for label, params, metrics in rowsets:
                        key = (b.name, label)
                        if key not in rows:
                            rows[key] = {"label": label, "params": params, "results": {}}
                            order[b.name].append(key)
                        value = metrics.get(b.metric.key) if run.ok else None
                        if run.ok and value is None:
                            run_ok, err = False, f"result lacks {b.metric.key}"
                        else:
                            run_ok, err = run.ok, run.error
                        rows[key]["results"].setdefault(a.name, {"runs": []})["runs"].append(
                            dict(run.as_dict(), ok=run_ok, error=err, value=value,
                                 metrics={m.key: metrics.get(m.key) for m in b.extras}))
                        if shown is None:
                            shown = b.metric.show(value) + " " + b.metric.label if run_ok else \
                                f"FAILED: {err}"
                    # Time left: observed seconds for this case where known,
                    # else its estimate scaled by how estimates have fared.
                    scale = spent / spent_est if spent_est > 0 else 1.0
                    left = 0.0
                    for cj in range(ci, len(cases)):
                        n_left = cfg.runs * len(allocs) - (len(observed.get(cj, [])))
                        per = (statistics.mean(observed[cj]) if cj in observed
                               else cases[cj][1].est * scale)
                        left += n_left * per
                    say(f"[{done:>{len(str(total))}}/{total}] {b.name} {case.label} | {a.name} "
                        f"run {i + 1}/{cfg.runs} | {shown} | "
                        f"{fmt_dur(time.monotonic() - t_start)} elapsed, ~{fmt_dur(left)} left")
    except KeyboardInterrupt:
        interrupted = True
        say("interrupted: writing the report of what has run")
    out = []
    for b in benches:
        brows = [rows[k] for k in order[b.name]]
        if not brows:
            continue
        summarize(brows, allocs, b.metric, b.extras)
        out.append({"name": b.name, "title": b.title, "about": b.about,
                    "metric": metric_dict(b.metric), "extras": [metric_dict(e) for e in b.extras],
                    "rss_note": b.rss_note, "rows": brows,
                    "commands": sorted({case_command(c, cfg) for bb, c in cases if bb is b},
                                       key=lambda s: [c for bb, c in cases if bb is b and
                                                      case_command(c, cfg) == s][0].label)})
    return out, time.monotonic() - t_start, failed, interrupted


def callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    return None


def run_instructions(cfg, allocs):
    """Instructions per malloc+free pair under callgrind, minus the baseline."""
    if not need("valgrind"):
        raise SystemExit("bench-instructions needs valgrind (Debian package valgrind)")
    iters = cfg.iterations
    base_alloc = Alloc("baseline", None, None, None, "random_mixed-bump: LIFO chunk list")
    variants = [(base_alloc, "random_mixed-bump")] + [(a, "random_mixed") for a in allocs]
    rows, commands = [], []
    say(f"callgrind: {len(suite.INSTRUCTION_CASES)} size ranges x {len(variants)} variants, "
        f"{iters} iterations each")
    for label, lo, hi in suite.INSTRUCTION_CASES:
        row = {"label": label, "results": {}}
        for a, prog in variants:
            with tempfile.TemporaryDirectory() as tmp:
                cg = os.path.join(tmp, "cg.out")
                argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                        "--toggle-collect=bench_loop", os.path.join(cfg.bin, prog),
                        iters, 400, lo, hi, 1]
                cmd = " ".join(str(x) for x in argv).replace(cg, "cg.out").replace(
                    cfg.bin + "/", os.path.relpath(cfg.bin, ROOT) + "/")
                commands.append(("LD_PRELOAD=$ALLOC " if a is not base_alloc else "") + cmd)
                t0 = time.monotonic()
                r = subprocess.run([str(x) for x in argv], capture_output=True, text=True,
                                   env=a.env())
                res = parse_result(r.stdout)
                ir = callgrind_total(cg) if os.path.exists(cg) else None
            entry = {"ir": ir, "pairs": res.get("frees") if res else None, "error": None}
            if r.returncode != 0 or not res or ir is None:
                entry["error"] = f"exit {r.returncode}: {tail(r.stderr, 300)}"
            elif a is not base_alloc and not same_object(res.get("malloc_so"), a.expect):
                entry["error"] = f"malloc served by {res.get('malloc_so')}, expected {a.expect}"
            row["results"][a.name] = entry
            shown = entry["error"] or f"{ir} Ir"
            say(f"  {label:>9} {a.name:<10} {shown}  ({time.monotonic() - t0:.1f} s)")
        b = row["results"]["baseline"]
        for name, e in row["results"].items():
            e["per_pair"] = None
            if name != "baseline" and not e["error"] and not b["error"] and e["pairs"]:
                e["per_pair"] = (e["ir"] - b["ir"]) / e["pairs"]
        rows.append(row)
    seen = []
    commands = [c for c in commands if not (c in seen or seen.append(c))]
    return rows, commands


def write_instructions_report(data, out_dir, charts):
    lines = []
    write_header(lines, data, "hakozuna instruction counts (callgrind)",
                 f"random_mixed, {data['config']['iterations']} iterations, WS 400, 1 thread")
    lines += [data["meta"]["valgrind"] + ": `valgrind --tool=callgrind --toggle-collect=bench_loop`"
              " counts the instructions (Ir) of random_mixed's measured loop, which ends "
              "by freeing what is left, so it makes exactly as many mallocs as frees. "
              "The same loop built with a minimal LIFO chunk list in place of malloc/free "
              "(random_mixed-bump, inlined) is the baseline: instructions per pair = (Ir - "
              "Ir baseline) / pairs. That is the allocator's own instructions, the calls "
              "included, less the few that the baseline's list operations take. The "
              "counts are deterministic; lower is better.", ""]
    names = [n for n in data["rows"][0]["results"] if n != "baseline"]
    head = ["allocator"] + [f"{r['label']} instr/pair" for r in data["rows"]] + \
           [f"{r['label']} Ir" for r in data["rows"]]
    rows = [["baseline"] + ["–"] * len(data["rows"]) +
            [str(r["results"]["baseline"]["ir"]) for r in data["rows"]]]
    for n in names:
        cells = [n]
        for r in data["rows"]:
            e = r["results"][n]
            cells.append(f"{e['per_pair']:.1f}" if e["per_pair"] is not None else
                         f"FAILED: {(e['error'] or '')[:120]}")
        cells += [str(r["results"][n]["ir"]) for r in data["rows"]]
        rows.append(cells)
    pairs = data["rows"][0]["results"]["baseline"]["pairs"]
    lines += [md_table(head, rows), "", f"Pairs per run: {pairs}.", ""]
    for c in charts.get("instructions", []):
        lines += [f"![{c}]({c})", ""]
    lines += ["## Command lines", "", "```"] + data["commands"] + ["```", ""]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))


def parse_list(s):
    return [x.strip() for x in s.split(",") if x.strip()] if s else []


def main(argv=None):
    ap = argparse.ArgumentParser(description="hakozuna benchmark suite (docs/benchmarks.md)")
    ap.add_argument("--bench", help="comma-separated benchmarks (default: all): "
                    + ", ".join(b.name for b in suite.BENCHES))
    ap.add_argument("--alloc", help="comma-separated allocators: hakozuna, glibc, mimalloc, "
                    "tcmalloc, jemalloc, a path to a .so, or NAME=PATH (default: all five)")
    ap.add_argument("--threads", help="comma-separated thread counts for the threaded "
                    "benchmarks (default: 1,2,4,8,16 up to the usable cores)")
    ap.add_argument("--runs", type=int, help="runs per allocator (default 3; quick 1; full 5)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="smoke run (under 2 minutes)")
    g.add_argument("--full", action="store_true", help="bigger cases, 5 runs")
    ap.add_argument("--out", help="output directory (default BUILD/bench/<timestamp>)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions per malloc+free under callgrind instead")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args(argv)

    cfg = argparse.Namespace()
    cfg.mode = "quick" if args.quick else "full" if args.full else "default"
    cfg.runs = args.runs or (1 if args.instructions else RUNS[cfg.mode])
    cfg.ncpu = len(os.sched_getaffinity(0))
    if args.threads:
        cfg.threads = sorted({int(t) for t in parse_list(args.threads)})
        if any(t < 1 for t in cfg.threads):
            raise SystemExit("--threads: counts must be at least 1")
    else:
        cfg.threads = [t for t in (1, 2, 4, 8, 16) if t <= cfg.ncpu] or [1]
    build = os.path.abspath(args.build)
    cfg.bin = os.path.join(build, "bench-bin")
    names = parse_list(args.bench) or ["all"]
    if "all" in names:
        benches = list(suite.BENCHES)
    else:
        unknown = [n for n in names if n not in suite.BY_NAME]
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; choose from "
                             + ", ".join(b.name for b in suite.BENCHES))
        benches = [suite.BY_NAME[n] for n in names]

    if args.list:
        for b in benches:
            for c in b.make_cases(cfg):
                say(f"{b.name:<17} {c.label:<32} {case_command(c, cfg)}")
        return 0
    if not os.path.exists(os.path.join(cfg.bin, "random_mixed")):
        raise SystemExit(f"{cfg.bin} has no benchmark programs: run `make bench-progs` first")

    allocs = resolve_allocs(parse_list(args.alloc) or DEFAULT_ALLOCS, build)
    if not allocs:
        raise SystemExit("no allocator to measure")
    if not args.instructions:
        benches = ensure_servers(benches, build, cfg.mode == "quick")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = os.path.abspath(args.out or os.path.join(
        build, "bench", stamp + ("-instructions" if args.instructions else "")))
    os.makedirs(out_dir, exist_ok=True)
    beyond = [t for t in cfg.threads if t > cfg.ncpu]
    say(f"hakozuna bench ({cfg.mode}): allocators {', '.join(a.name for a in allocs)}; "
        f"threads {cfg.threads}{' (beyond the ' + str(cfg.ncpu) + ' usable cores: ' + str(beyond) + ')' if beyond else ''}; "
        f"{cfg.runs} run(s); output {show_path(out_dir)}")

    data = {"meta": machine_info(),
            "config": {"mode": cfg.mode, "runs": cfg.runs, "threads": cfg.threads,
                       "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
                       "instructions": args.instructions},
            "allocators": [a.as_dict() for a in allocs]}
    if args.instructions:
        cfg.iterations = data["config"]["iterations"] = \
            {"quick": 200_000, "default": 2_000_000, "full": 5_000_000}[cfg.mode]
        data["rows"], data["commands"] = run_instructions(cfg, allocs)
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(data, f, indent=1)
        write_instructions_report(data, out_dir, make_charts(out_dir))
        say(f"report: {show_path(os.path.join(out_dir, 'report.md'))}")
        return 0

    data["benchmarks"], elapsed, failed, interrupted = run_suite(cfg, allocs, benches)
    data["config"]["elapsed_s"] = round(elapsed, 1)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_report(data, out_dir, make_charts(out_dir))
    latest = os.path.join(os.path.dirname(out_dir), "latest")
    if not args.out:
        try:
            if os.path.islink(latest):
                os.unlink(latest)
            if not os.path.exists(latest):
                os.symlink(os.path.basename(out_dir), latest)
        except OSError:
            pass
    say(f"done in {fmt_dur(elapsed)}; report: {show_path(os.path.join(out_dir, 'report.md'))}"
        + (f"; {failed} run(s) FAILED (see the report)" if failed else ""))
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
