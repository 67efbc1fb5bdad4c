/*
 * prio_client.c — the load of the priority-classes benchmark (bench/prio_bench.py,
 * after SharedScheduler's figures 6 and 7).
 *
 *   prio_client --port P --impl NAME [--conns 64] [--classes 8] [--period-ms 50]
 *               [--seconds 5] [--warmup-ms 500] [--probe FMT] [--bulk N]
 *               [--bulk-path PATH] [--compute]
 *
 * Probe connections: conns keep-alive connections, connection i in class
 * i % classes; each sends GET <FMT with %d = its class> once every period
 * and times the response from the send to its last byte. The connections
 * go in groups of one per class (i / classes), the groups' sends evenly
 * over the period (group g's at g/groups of it): in every group each class
 * meets every other, so the server's order among classes decides who
 * waits; a group's requests are sent least urgent class first (a server
 * that serves in arrival order serves the most urgent last). A response still out when the next send
 * is due delays that send (counted as late); its latency still counts from
 * its own send. Bulk connections (background load): N connections that send
 * GET <PATH> back to back, each as soon as the previous response is in.
 * Samples of the first warmup-ms are dropped. Every response must be a 200
 * with the Content-Length's worth of body; with --compute, the body must be
 * the server's "compute <k> <hex>\n" for the path's /compute/<k> (computed
 * here once per k, the same function as examples/httpd).
 *
 * Prints, per class c: RESULT bench=priohttp impl=NAME param=classes=C,class=c
 * value=<p99 in ms> unit=ms p50_ms= p90_ms= max_ms= n= late= rps= and
 * cdf=<21 quantiles in ms, 0 %, 5 % .. 100 %, joined by ':'>; and for the
 * bulk connections one RESULT with param=classes=C,class=bulk, value = their
 * requests/s. Exit 1 with FAIL on stderr for a wrong response or a lost
 * connection. Loopback only (127.0.0.1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 1024
#define MAXSAMPLES (1 << 20)

struct conn {
    int fd;
    int cls;                 /* class, or -1 for a bulk connection */
    bool busy;               /* a request is out */
    uint64_t sent_at;        /* its send time */
    uint64_t due;            /* a probe's next send */
    char path[128];
    const char *expect;      /* --compute: the exact body, else NULL */
    char buf[65536];
    size_t have;             /* bytes in buf */
    long want;               /* body bytes still to come once the head is parsed, or -1 */
};

static struct conn conns[MAXCONN];
static int nconn;
static double *lat[16];      /* per class, ms */
static int nlat[16], late[16];
static long bulk_done;

static _Noreturn void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL prio_client: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* compute_mix() is examples/httpd's /compute/<k> (keep the two the same). */
static uint64_t compute_mix(unsigned long k)
{
    uint64_t h = k;
    for (unsigned long i = 0; i < k * 1000; i++) {
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

/* expected_body() is the body the server must answer path with under
 * --compute (computed once per distinct path). */
static const char *expected_body(const char *path)
{
    static struct { char path[128]; char body[64]; } memo[32];
    static int nmemo;
    for (int i = 0; i < nmemo; i++)
        if (strcmp(memo[i].path, path) == 0)
            return memo[i].body;
    const char *s = strstr(path, "/compute/");
    if (!s || nmemo == 32)
        fail("--compute: %s is not a /compute/<k> path", path);
    unsigned long k = strtoul(s + 9, NULL, 10);
    snprintf(memo[nmemo].path, sizeof memo[nmemo].path, "%s", path);
    snprintf(memo[nmemo].body, sizeof memo[nmemo].body, "compute %lu %016llx\n", k,
             (unsigned long long)compute_mix(k));
    return memo[nmemo++].body;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        fail("connect to 127.0.0.1:%d: %s", port, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void send_request(struct conn *c, uint64_t now)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", c->path);
    ssize_t k = send(c->fd, req, (size_t)n, MSG_NOSIGNAL);
    if (k != n) /* a fresh, idle keep-alive socket takes 60 bytes at once */
        fail("send on connection %d: %zd of %d bytes (%s)", (int)(c - conns), k, n,
             k < 0 ? strerror(errno) : "short");
    c->busy = true;
    c->sent_at = now;
    c->have = 0;
    c->want = -1;
}

/* on_readable() reads what is there; true when a whole response has come. */
static bool on_readable(struct conn *c)
{
    for (;;) {
        if (c->have == sizeof c->buf) { /* a big body: keep only what is needed */
            if (c->want < 0)
                fail("a response head over %zu bytes", sizeof c->buf);
            c->have = 0;
        }
        ssize_t k = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
        if (k == 0)
            fail("connection %d closed by the server (%s)", (int)(c - conns), c->path);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return false;
            fail("recv: %s", strerror(errno));
        }
        if (!c->busy)
            fail("%zd bytes nobody asked for on connection %d", k, (int)(c - conns));
        if (c->want >= 0) {
            c->want -= k;
            c->have += (size_t)k;
        } else {
            c->have += (size_t)k;
            char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
            if (!end)
                continue;
            size_t head = (size_t)(end - c->buf) + 4;
            int status = 0;
            if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1 || status != 200)
                fail("%s: status %d", c->path, status);
            char *cl = memmem(c->buf, head, "Content-Length:", 15);
            if (!cl)
                cl = memmem(c->buf, head, "content-length:", 15);
            if (!cl)
                fail("%s: no Content-Length", c->path);
            long len = strtol(cl + 15, NULL, 10);
            if (c->expect && len != (long)strlen(c->expect))
                fail("%s: %ld-byte body, want %zu", c->path, len, strlen(c->expect));
            /* keep the body at the front of buf */
            memmove(c->buf, c->buf + head, c->have - head);
            c->have -= head;
            c->want = len - (long)c->have;
        }
        if (c->want < 0)
            fail("%s: %ld bytes beyond the response", c->path, -c->want);
        if (c->want == 0) {
            if (c->expect && (c->have != strlen(c->expect) ||
                              memcmp(c->buf, c->expect, c->have) != 0))
                fail("%s: body %.*s, want %s", c->path, (int)c->have, c->buf, c->expect);
            c->busy = false;
            return true;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *v, int n, double q)
{
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static long arg_long(const char *name, const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "prio_client: bad %s %s (%ld..%ld)\n", name, v, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    int port = 0, nprobe = 64, classes = 8, bulk = 0;
    long period_ms = 50, seconds = 5, warmup_ms = 500;
    const char *impl = NULL, *probe = "/class/%d/compute/500", *bulk_path = "/class/7/compute/5000";
    bool check_compute = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--compute")) {
            check_compute = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "prio_client: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--port")) port = (int)arg_long(a, v, 1, 65535);
        else if (!strcmp(a, "--impl")) impl = v;
        else if (!strcmp(a, "--conns")) nprobe = (int)arg_long(a, v, 1, 512);
        else if (!strcmp(a, "--classes")) classes = (int)arg_long(a, v, 1, 8);
        else if (!strcmp(a, "--period-ms")) period_ms = arg_long(a, v, 1, 10000);
        else if (!strcmp(a, "--seconds")) seconds = arg_long(a, v, 1, 600);
        else if (!strcmp(a, "--warmup-ms")) warmup_ms = arg_long(a, v, 0, 60000);
        else if (!strcmp(a, "--probe")) probe = v;
        else if (!strcmp(a, "--bulk")) bulk = (int)arg_long(a, v, 0, 256);
        else if (!strcmp(a, "--bulk-path")) bulk_path = v;
        else {
            fprintf(stderr, "prio_client: unknown option %s\n", a);
            return 2;
        }
    }
    if (!port || !impl) {
        fprintf(stderr, "usage: prio_client --port P --impl NAME [--conns N] [--classes C] "
                        "[--period-ms MS] [--seconds S] [--warmup-ms MS] [--probe FMT] "
                        "[--bulk N] [--bulk-path PATH] [--compute]\n");
        return 2;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    uint64_t period = (uint64_t)period_ms * 1000000u;
    for (int i = 0; i < nprobe + bulk; i++) {
        struct conn *c = &conns[nconn++];
        c->fd = connect_to(port);
        c->cls = i < nprobe ? i % classes : -1;
        if (c->cls >= 0)
            snprintf(c->path, sizeof c->path, probe, c->cls);
        else
            snprintf(c->path, sizeof c->path, "%s", bulk_path);
        c->expect = check_compute ? expected_body(c->path) : NULL;
        struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
    }
    for (int k = 0; k < classes; k++)
        lat[k] = malloc(sizeof(double) * MAXSAMPLES);
    /* order: the probe connections group by group, each group's least urgent
     * class first (a higher class number is less urgent); then the bulk ones. */
    int ngroups = (nprobe + classes - 1) / classes, *order = malloc(sizeof(int) * (size_t)nconn), no = 0;
    for (int g = 0; g < ngroups; g++)
        for (int k = classes - 1; k >= 0; k--)
            if (g * classes + k < nprobe)
                order[no++] = g * classes + k;
    for (int i = nprobe; i < nconn; i++)
        order[no++] = i;
    uint64_t start = now_ns(), keep_from = start + (uint64_t)warmup_ms * 1000000u;
    uint64_t stop = keep_from + (uint64_t)seconds * 1000000000u;
    for (int i = 0; i < nconn; i++) {
        struct conn *c = &conns[i];
        if (c->cls >= 0)
            c->due = start + period * (uint64_t)(i / classes) / (uint64_t)ngroups;
        else
            send_request(c, start);
    }
    long bulk_kept = 0;
    for (;;) {
        uint64_t now = now_ns();
        bool sending = now < stop;
        uint64_t next = UINT64_MAX;
        int out = 0;
        for (int j = 0; j < nconn; j++) {
            struct conn *c = &conns[order[j]];
            out += c->busy;
            if (c->cls < 0 || c->busy || !sending)
                continue;
            if (c->due <= now) {
                if (now - c->due > period / 10 && c->due >= keep_from)
                    late[c->cls]++; /* the previous response held it up */
                send_request(c, now);
                while (c->due <= now)
                    c->due += period;
                out++;
            }
            if (c->due < next)
                next = c->due;
        }
        if (!sending && out == 0)
            break;
        if (!sending && now > stop + 5000000000ull)
            fail("%d responses still out 5 s after the end", out);
        int wait_ms = next == UINT64_MAX ? 100 : (int)((next - now + 999999) / 1000000);
        struct epoll_event ev[64];
        int n = epoll_wait(ep, ev, 64, wait_ms);
        if (n < 0 && errno != EINTR)
            fail("epoll_wait: %s", strerror(errno));
        now = now_ns();
        for (int j = 0; j < n; j++) {
            struct conn *c = &conns[ev[j].data.u32];
            if (!on_readable(c))
                continue;
            if (c->cls >= 0) {
                if (c->sent_at >= keep_from && c->sent_at < stop && nlat[c->cls] < MAXSAMPLES)
                    lat[c->cls][nlat[c->cls]++] = (double)(now - c->sent_at) / 1e6;
            } else {
                bulk_done++;
                if (c->sent_at >= keep_from && c->sent_at < stop)
                    bulk_kept++;
                if (now < stop)
                    send_request(c, now);
            }
        }
    }
    double secs = (double)(stop - keep_from) / 1e9;
    for (int k = 0; k < classes; k++) {
        int n = nlat[k];
        if (n == 0)
            fail("class %d: no response in the measured span", k);
        qsort(lat[k], (size_t)n, sizeof(double), cmp_double);
        char cdf[21 * 16] = "", *p = cdf;
        for (int q = 0; q <= 20; q++)
            p += sprintf(p, "%s%.4f", q ? ":" : "", quantile(lat[k], n, q / 20.0));
        printf("RESULT bench=priohttp impl=%s param=classes=%d,class=%d value=%.4f unit=ms "
               "p50_ms=%.4f p90_ms=%.4f max_ms=%.4f n=%d late=%d rps=%.1f cdf=%s\n",
               impl, classes, k, quantile(lat[k], n, 0.99), quantile(lat[k], n, 0.5),
               quantile(lat[k], n, 0.9), lat[k][n - 1], n, late[k], n / secs, cdf);
    }
    if (bulk)
        printf("RESULT bench=priohttp impl=%s param=classes=%d,class=bulk value=%.1f "
               "unit=requests/s n=%ld\n", impl, classes, bulk_kept / secs, bulk_kept);
    printf("NOTE impl=%s %d probe connections in %d classes, one request each %ld ms, %ld s "
           "kept after %ld ms; %d bulk connections (%s), %ld bulk responses in all\n",
           impl, nprobe, classes, period_ms, seconds, warmup_ms, bulk, bulk_path, bulk_done);
    return 0;
}
