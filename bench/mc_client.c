// SPDX-License-Identifier: MIT
/* mc_client HOST PORT THREADS REQUESTS KEYS VMIN VMAX SET_PCT [PIPELINE] [SEED] [CONNS]
 *
 * A small load client for memcached's text protocol, so the suite needs no
 * memaslap. First every key of KEYS ("key:N") is set once over one connection
 * (not timed). Then THREADS threads, CONNS connections each (default 1), send
 * REQUESTS requests in all: SET_PCT percent "set" with a value of VMIN..VMAX
 * bytes, the rest "get" of a random key. A thread writes a batch of PIPELINE
 * requests on each of its connections, then reads the replies of each, so
 * the server has THREADS x CONNS connections with requests in flight. A
 * request's latency runs from the write of its batch to the parsing of its
 * reply. Every value read back is checked (length as
 * stored, first and last byte as written). Reports requests/s and the
 * latency percentiles. */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define RBUF (1u << 20)

typedef struct {
    int fd;
    char *buf;
    size_t pos, len;
} conn_t;

typedef struct {
    _Alignas(64) uint64_t requests, sets, hits, misses;
    float *lat_us;
    uint64_t n_lat;
} worker_t;

static const char *host, *port;
static uint32_t n_threads, keys, vmin, vmax, set_pct, pipeline, conns;
static uint64_t requests, seed;
static worker_t *workers;

static void conn_open(conn_t *c)
{
    struct addrinfo hints = { 0 }, *res;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        bench_fail("getaddrinfo %s:%s: %s", host, port, gai_strerror(rc));
    c->fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, res->ai_addr, res->ai_addrlen) != 0)
        bench_fail("connect %s:%s: %s", host, port, strerror(errno));
    freeaddrinfo(res);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = { 10, 0 };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    c->buf = xmalloc(RBUF);
    c->pos = c->len = 0;
}

static void conn_close(conn_t *c)
{
    close(c->fd);
    free(c->buf);
}

static void send_all(conn_t *c, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            bench_fail("send: %s", w < 0 ? strerror(errno) : "connection closed");
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Makes at least n unread bytes available. */
static void conn_need(conn_t *c, size_t n)
{
    if (n > RBUF)
        bench_fail("reply larger than the read buffer");
    while (c->len - c->pos < n) {
        if (c->pos && c->len + (n - (c->len - c->pos)) > RBUF) {
            memmove(c->buf, c->buf + c->pos, c->len - c->pos);
            c->len -= c->pos;
            c->pos = 0;
        }
        ssize_t r = recv(c->fd, c->buf + c->len, RBUF - c->len, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            bench_fail("recv: %s", r < 0 ? strerror(errno) : "connection closed");
        }
        c->len += (size_t)r;
    }
}

/* The next line without its \r\n (NUL-terminated in the buffer). */
static char *conn_line(conn_t *c)
{
    size_t scanned = 0;
    for (;;) {
        char *start = c->buf + c->pos;
        char *nl = memchr(start + scanned, '\n', c->len - c->pos - scanned);
        if (nl) {
            if (nl == start || nl[-1] != '\r')
                bench_fail("malformed reply line");
            nl[-1] = 0;
            c->pos = (size_t)(nl + 1 - c->buf);
            return start;
        }
        scanned = c->len - c->pos;
        conn_need(c, scanned + 1);
    }
}

static unsigned char value_byte(uint32_t key, uint32_t len)
{
    return (unsigned char)('A' + (key * 7 + len) % 26);
}

/* Appends a set or a get of key to out; returns the new length. */
static size_t put_request(char *out, size_t len, int is_set, uint32_t key, uint32_t vlen)
{
    if (!is_set)
        return len + (size_t)sprintf(out + len, "get key:%u\r\n", key);
    len += (size_t)sprintf(out + len, "set key:%u 0 0 %u\r\n", key, vlen);
    memset(out + len, value_byte(key, vlen), vlen);
    len += vlen;
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}

/* Reads one reply; 1 for a hit or a stored value, 0 for a miss. */
static int read_reply(conn_t *c, int is_set)
{
    char *line = conn_line(c);
    if (is_set) {
        if (strcmp(line, "STORED") != 0)
            bench_fail("set answered '%s'", line);
        return 1;
    }
    if (strcmp(line, "END") == 0)
        return 0;
    uint32_t key, flags, vlen;
    if (sscanf(line, "VALUE key:%u %u %u", &key, &flags, &vlen) != 3)
        bench_fail("get answered '%s'", line);
    conn_need(c, (size_t)vlen + 2);
    const unsigned char *v = (const unsigned char *)c->buf + c->pos;
    unsigned char want = value_byte(key, vlen);
    if (vlen && (v[0] != want || v[vlen - 1] != want))
        bench_fail("value of key:%u does not hold what was stored", key);
    c->pos += (size_t)vlen + 2;
    line = conn_line(c);
    if (strcmp(line, "END") != 0)
        bench_fail("get ended with '%s'", line);
    return 1;
}

static void prefill(void)
{
    conn_t c;
    conn_open(&c);
    char *out = xmalloc((size_t)pipeline * (vmax + 64));
    size_dist_t d = { DIST_UNIFORM, vmin, vmax };
    rng_t rng;
    rng_seed(&rng, seed, 0);
    for (uint32_t k = 0; k < keys;) {
        size_t len = 0;
        uint32_t batch = 0;
        for (; batch < pipeline && k < keys; batch++, k++)
            len = put_request(out, len, 1, k, dist_size(&d, (uint32_t)rng_next(&rng)));
        send_all(&c, out, len);
        for (uint32_t i = 0; i < batch; i++)
            read_reply(&c, 1);
    }
    free(out);
    conn_close(&c);
}

/* One connection's batch: its requests' kinds and when it was written. */
typedef struct {
    conn_t c;
    char *out;
    int *is_set;
    uint32_t batch;
    double t0;
} link_t;

static void worker(uint32_t id)
{
    worker_t *w = &workers[id];
    link_t *l = xmalloc(sizeof *l * conns);
    for (uint32_t k = 0; k < conns; k++) {
        conn_open(&l[k].c);
        l[k].out = xmalloc((size_t)pipeline * (vmax + 64));
        l[k].is_set = xmalloc(sizeof *l[k].is_set * pipeline);
    }
    rng_t rng;
    rng_seed(&rng, seed, (uint64_t)id + 1);
    size_dist_t d = { DIST_UNIFORM, vmin, vmax };
    w->lat_us = xmalloc(sizeof *w->lat_us * (w->requests ? w->requests : 1));
    phase_begin();
    for (uint64_t done = 0; done < w->requests;) {
        for (uint32_t k = 0; k < conns; k++) {
            size_t len = 0;
            uint32_t batch = 0;
            for (; batch < pipeline && done + batch < w->requests; batch++) {
                uint64_t x = rng_next(&rng);
                uint32_t key = scale32((uint32_t)x, keys);
                l[k].is_set[batch] = scale32((uint32_t)(x >> 32), 100) < set_pct;
                len = put_request(l[k].out, len, l[k].is_set[batch], key,
                                  l[k].is_set[batch] ? dist_size(&d, (uint32_t)rng_next(&rng)) : 0);
            }
            l[k].batch = batch;
            l[k].t0 = now_sec();
            if (len)
                send_all(&l[k].c, l[k].out, len);
            done += batch;
        }
        for (uint32_t k = 0; k < conns; k++)
            for (uint32_t i = 0; i < l[k].batch; i++) {
                int hit = read_reply(&l[k].c, l[k].is_set[i]);
                w->lat_us[w->n_lat++] = (float)((now_sec() - l[k].t0) * 1e6);
                if (l[k].is_set[i])
                    w->sets++;
                else if (hit)
                    w->hits++;
                else
                    w->misses++;
            }
    }
    phase_end();
    for (uint32_t k = 0; k < conns; k++) {
        free(l[k].out);
        free(l[k].is_set);
        conn_close(&l[k].c);
    }
    free(l);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    bench_usage(argc, argv, 8, "HOST PORT THREADS REQUESTS KEYS VMIN VMAX SET_PCT [PIPELINE] [SEED] [CONNS]");
    host = argv[1];
    port = argv[2];
    n_threads = (uint32_t)arg_u64(argc, argv, 3, 2);
    requests = arg_u64(argc, argv, 4, 200000);
    keys = (uint32_t)arg_u64(argc, argv, 5, 10000);
    vmin = (uint32_t)arg_u64(argc, argv, 6, 16);
    vmax = (uint32_t)arg_u64(argc, argv, 7, 4096);
    set_pct = (uint32_t)arg_u64(argc, argv, 8, 10);
    pipeline = (uint32_t)arg_u64(argc, argv, 9, 16);
    seed = arg_u64(argc, argv, 10, 1);
    conns = (uint32_t)arg_u64(argc, argv, 11, 1);
    if (n_threads < 1 || keys < 1 || vmax < vmin || set_pct > 100 || pipeline < 1 || conns < 1)
        bench_fail("need THREADS, KEYS, PIPELINE, CONNS >= 1, VMIN <= VMAX, SET_PCT <= 100");

    prefill();
    worker_t *w = workers = xzalloc64(n_threads, sizeof *w);
    for (uint32_t i = 0; i < n_threads; i++)
        w[i].requests = requests / n_threads + (i < requests % n_threads);
    double secs = run_parallel(n_threads, worker, NULL);

    float *lat = xmalloc(sizeof *lat * (requests ? requests : 1));
    uint64_t n = 0, sets = 0, hits = 0, misses = 0;
    for (uint32_t i = 0; i < n_threads; i++) {
        memcpy(lat + n, w[i].lat_us, sizeof *lat * w[i].n_lat);
        n += w[i].n_lat;
        sets += w[i].sets;
        hits += w[i].hits;
        misses += w[i].misses;
        free(w[i].lat_us);
    }
    qsort(lat, n, sizeof *lat, cmp_float);

    res_begin("memcached_client");
    res_u64("threads", n_threads);
    res_u64("requests", n);
    res_u64("keys", keys);
    res_u64("vmin", vmin);
    res_u64("vmax", vmax);
    res_u64("set_pct", set_pct);
    res_u64("pipeline", pipeline);
    res_u64("connections", (uint64_t)n_threads * conns);
    res_f64("secs", secs);
    res_f64("rps", (double)n / secs);
    res_f64("p50_us", n ? lat[n / 2] : 0);
    res_f64("p99_us", n ? lat[(size_t)((double)n * 0.99)] : 0);
    res_f64("max_us", n ? lat[n - 1] : 0);
    res_u64("sets", sets);
    res_u64("hits", hits);
    res_u64("misses", misses);
    res_end();
    free(lat);
    free(w);
    return 0;
}
