/*
 * client_test.c — black-box test of an httpd binary over TCP.
 *
 *   client_test <path to httpd or httpd-pthread>
 *
 * Builds a document root in a temporary directory (small files of every
 * content type, a 4 MiB binary file larger than the socket buffers, a
 * subdirectory with an index.html, one without, a FIFO, symbolic links that
 * point inside and outside the root, and a secret file next to the root that
 * must never be served), starts the server on it with -p 0, reads the port
 * from its stdout, and checks over plain blocking sockets: every status the
 * server can give, keep-alive, 50 pipelined requests in one write (and a
 * pipeline trickled in small pieces), HEAD, 304 with If-Modified-Since, the
 * 4 MiB body byte for byte (also while another client is served), headers,
 * escape attempts, the idle and header timeouts, many concurrent clients,
 * clients that vanish mid-response (SIGPIPE), and finally that the server is
 * still alive and exits 0 on SIGTERM. Bad command lines must exit 2.
 *
 * Kernel threads are used for concurrency; every socket has a receive
 * timeout, and a watchdog kills the server and fails the test if it hangs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#define WATCHDOG_S 560
#define IO_TIMEOUT_S 120
#define SANITIZED_SLACK 1.0
#else
#define WATCHDOG_S 110
#define IO_TIMEOUT_S 30
#define SANITIZED_SLACK 0.0
#endif

#define BIG_SIZE (4u << 20)
#define HUGE_SIZE (256 << 20)
#define SLOW_T_MS 1000 /* -t for the slow-reader server */
#define SLOW_T_ARG "1000"
#define ROOT_MTIME 1577836800 /* Wed, 01 Jan 2020 00:00:00 GMT, set on index.html */

static atomic_int failures;
static const char *_Atomic phase = "start";
static const char *server_bin;
static const char *server_flag; /* an extra flag for every server start (argv[2]), or NULL */
static pid_t server_pid;
static int port;
static char tmpdir[256], rootdir[300];
static unsigned char *big;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            atomic_fetch_add(&failures, 1);                                              \
            fprintf(stderr, "%s:%d: [%s] FAIL (%s): ", __FILE__, __LINE__, atomic_load(&phase), \
                    #cond);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

static void remove_tree(void);

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "client_test: [%s] ", atomic_load(&phase));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (server_pid > 0)
        kill(server_pid, SIGKILL);
    remove_tree();
    _exit(1);
}

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "client_test: watchdog: the test hung; phase: ";
    const char *p = atomic_load(&phase);
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, p, strlen(p));
    (void)!write(2, "\n", 1);
    if (server_pid > 0)
        kill(server_pid, SIGKILL);
    _exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the document root ------------------------------------------------------- */

struct file {
    const char *name;    /* relative to the root */
    const char *content;
    const char *ctype;
};

static const struct file files[] = {
    { "index.html", "<html><body>root index</body></html>\n", "text/html; charset=utf-8" },
    { "hello.txt", "hello, world\n", "text/plain; charset=utf-8" },
    { "style.css", "body { color: red }\n", "text/css; charset=utf-8" },
    { "app.js", "console.log('hi');\n", "text/javascript; charset=utf-8" },
    { "data.json", "{\"a\": 1}\n", "application/json" },
    { "img.png", "\x89PNG fake", "image/png" },
    { "photo.jpg", "\xff\xd8\xff fake jpeg", "image/jpeg" },
    { "anim.gif", "GIF89a fake", "image/gif" },
    { "logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n", "image/svg+xml" },
    { "favicon.ico", "fake icon", "image/x-icon" },
    { "mod.wasm", "\0asm fake", "application/wasm" },
    { "blob", "no extension", "application/octet-stream" },
    { "archive.tar.gz", "fake archive", "application/octet-stream" },
    { "UPPER.HTML", "<p>upper</p>\n", "text/html; charset=utf-8" },
    { "a b.txt", "space in the name\n", "text/plain; charset=utf-8" },
    { "empty.txt", "", "text/plain; charset=utf-8" },
    { "sub/index.html", "<html><body>sub index</body></html>\n", "text/html; charset=utf-8" },
    { "sub/page.html", "<p>sub page</p>\n", "text/html; charset=utf-8" },
};
#define NFILES (sizeof files / sizeof files[0])

static const char secret[] = "TOP-SECRET: outside the root\n";

static const struct file *file_named(const char *name)
{
    for (size_t i = 0; i < NFILES; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    die("no file %s in the table", name);
    return NULL;
}

static size_t content_len(const struct file *f)
{
    /* mod.wasm starts with a NUL on purpose */
    return strcmp(f->name, "mod.wasm") == 0 ? 9 : strlen(f->content);
}

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd) != 0)
        die("writing %s: %s", path, strerror(errno));
}

static void make_tree(void)
{
    char path[512];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/httpd-test-XXXXXX");
    if (!mkdtemp(tmpdir))
        die("mkdtemp: %s", strerror(errno));
    snprintf(rootdir, sizeof rootdir, "%s/root", tmpdir);
    snprintf(path, sizeof path, "%s/secret.txt", tmpdir);
    write_file(path, secret, strlen(secret));
    if (mkdir(rootdir, 0755) != 0)
        die("mkdir: %s", strerror(errno));
    static const char *const dirs[] = { "sub", "empty", "index.html.d" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", rootdir, dirs[i]);
        if (mkdir(path, 0755) != 0)
            die("mkdir %s: %s", path, strerror(errno));
    }
    for (size_t i = 0; i < NFILES; i++) {
        snprintf(path, sizeof path, "%s/%s", rootdir, files[i].name);
        write_file(path, files[i].content, content_len(&files[i]));
    }
    /* 4 MiB of xorshift bytes */
    big = malloc(BIG_SIZE);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < BIG_SIZE; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        big[i] = (unsigned char)x;
    }
    snprintf(path, sizeof path, "%s/big.bin", rootdir);
    write_file(path, big, BIG_SIZE);

    /* 256 MiB, sparse: more than any socket buffers hold */
    snprintf(path, sizeof path, "%s/huge.bin", rootdir);
    int hf = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (hf < 0 || ftruncate(hf, HUGE_SIZE) != 0)
        die("%s: %s", path, strerror(errno));
    close(hf);

    snprintf(path, sizeof path, "%s/link-out", rootdir);
    if (symlink("../secret.txt", path) != 0)
        die("symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/link-dir", rootdir);
    if (symlink(tmpdir, path) != 0)
        die("symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/link-in.txt", rootdir);
    if (symlink("hello.txt", path) != 0)
        die("symlink: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/fifo", rootdir);
    if (mkfifo(path, 0644) != 0)
        die("mkfifo: %s", strerror(errno));

    /* a known mtime for the 304 tests */
    struct timespec ts[2] = { { ROOT_MTIME, 0 }, { ROOT_MTIME, 0 } };
    snprintf(path, sizeof path, "%s/index.html", rootdir);
    if (utimensat(AT_FDCWD, path, ts, 0) != 0)
        die("utimensat: %s", strerror(errno));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void remove_tree(void)
{
    if (tmpdir[0])
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the server process ---------------------------------------------------------- */

static void start_server_args(const char *const *extra);
static void start_server(void)
{
    start_server_args(NULL);
}

/* spawn_server() forks the server with "-p 0 -r root" and up to four more
 * arguments (NULL-terminated list, or NULL), its stdout on out_fd and, if
 * err_fd >= 0, its stderr on err_fd; nofile > 0 sets its RLIMIT_NOFILE. */
static pid_t spawn_server(const char *const *extra, int out_fd, int err_fd, int nofile)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(out_fd, 1);
        if (err_fd >= 0)
            dup2(err_fd, 2);
        struct rlimit rl = { (rlim_t)nofile, (rlim_t)nofile };
        if (nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(126);
        const char *argv[10] = { server_bin, "-p", "0", "-r", rootdir };
        int k = 5;
        for (int i = 0; extra && extra[i] && i < 4; i++)
            argv[k++] = extra[i];
        if (server_flag)
            argv[k++] = server_flag;
        execv(server_bin, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", server_bin, strerror(errno));
        _exit(127);
    }
    return pid;
}

/* start_server_args() starts the server (spawn_server's extra arguments)
 * and reads its port from the "listening on" line. */
static void start_server_args(const char *const *extra)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        die("pipe: %s", strerror(errno));
    pid_t pid = spawn_server(extra, p[1], -1, 0);
    server_pid = pid;
    close(p[1]);

    char line[256];
    size_t n = 0;
    double until = now_s() + IO_TIMEOUT_S;
    while (n < sizeof line - 1 && (n == 0 || line[n - 1] != '\n')) {
        struct pollfd pf = { .fd = p[0], .events = POLLIN };
        int left = (int)((until - now_s()) * 1000);
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            die("no 'listening on' line from %s", server_bin);
        ssize_t k = read(p[0], line + n, sizeof line - 1 - n);
        if (k <= 0)
            die("%s exited before listening", server_bin);
        n += (size_t)k;
    }
    line[n] = '\0';
    close(p[0]);
    if (sscanf(line, "listening on 127.0.0.1:%d", &port) != 1 || port <= 0)
        die("bad first line from the server: '%s'", line);
}

static bool server_alive(void)
{
    int st;
    return waitpid(server_pid, &st, WNOHANG) == 0;
}

/* ---- client connections ------------------------------------------------------------- */

struct conn {
    int fd;
    size_t start, end;
    char buf[1 << 16];
};

static void set_timeouts(int fd, int secs)
{
    struct timeval tv = { .tv_sec = secs };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* rcvbuf > 0 fixes the receive buffer (before connect, so the window is
 * small from the start and the server's sends really block). */
static struct conn *conn_open_rcvbuf(int rcvbuf)
{
    struct conn *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect to port %d: %s", port, strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_timeouts(c->fd, IO_TIMEOUT_S);
    return c;
}

static struct conn *conn_open(void)
{
    return conn_open_rcvbuf(0);
}

static void conn_close(struct conn *c)
{
    close(c->fd);
    free(c);
}

static bool send_all(struct conn *c, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t k = send(c->fd, s, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

static bool send_str(struct conn *c, const char *s)
{
    return send_all(c, s, strlen(s));
}

/* Reads more bytes into the buffer: > 0 bytes, 0 EOF, -1 error or timeout. */
static ssize_t conn_fill(struct conn *c)
{
    if (c->start > 0) {
        memmove(c->buf, c->buf + c->start, c->end - c->start);
        c->end -= c->start;
        c->start = 0;
    }
    if (c->end == sizeof c->buf)
        return -1;
    ssize_t k;
    do
        k = read(c->fd, c->buf + c->end, sizeof c->buf - c->end);
    while (k < 0 && errno == EINTR);
    if (k > 0)
        c->end += (size_t)k;
    return k;
}

static bool conn_line(struct conn *c, char *out, size_t cap)
{
    for (;;) {
        char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->start)), m = n;
            if (m && c->buf[c->start + m - 1] == '\r')
                m--;
            if (m >= cap)
                return false;
            memcpy(out, c->buf + c->start, m);
            out[m] = '\0';
            c->start += n + 1;
            return true;
        }
        if (conn_fill(c) <= 0)
            return false;
    }
}

static bool conn_read(struct conn *c, void *out, size_t n)
{
    char *o = out;
    while (n > 0) {
        if (c->start == c->end && conn_fill(c) <= 0)
            return false;
        size_t k = c->end - c->start < n ? c->end - c->start : n;
        memcpy(o, c->buf + c->start, k);
        c->start += k;
        o += k;
        n -= k;
    }
    return true;
}

/* The server closed the connection: EOF (or a reset) and no extra bytes. */
static bool conn_eof(struct conn *c)
{
    if (c->start != c->end)
        return false;
    ssize_t k = conn_fill(c);
    return k == 0 || (k < 0 && errno == ECONNRESET);
}

/* The connection is still open: nothing arrives within 100 ms. */
static bool conn_open_still(struct conn *c)
{
    struct pollfd pf = { .fd = c->fd, .events = POLLIN };
    return c->start == c->end && poll(&pf, 1, 100) == 0;
}

struct resp {
    int status;
    int nh;
    struct {
        char name[64];
        char value[512];
    } h[48];
    char *body;
    size_t body_len;
};

static const char *hdr(const struct resp *r, const char *name)
{
    for (int i = 0; i < r->nh; i++)
        if (strcasecmp(r->h[i].name, name) == 0)
            return r->h[i].value;
    return NULL;
}

static void resp_free(struct resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* Reads one response; a body only when it may have one (not HEAD, not 304).
 * Returns false (and says why) on EOF, timeout or a malformed response. */
static bool read_resp(struct conn *c, bool head, struct resp *r)
{
    char line[1024];
    memset(r, 0, sizeof *r);
    if (!conn_line(c, line, sizeof line)) {
        CHECK(0, "no status line (%s)", errno ? strerror(errno) : "EOF");
        return false;
    }
    if (sscanf(line, "HTTP/1.1 %3d ", &r->status) != 1) {
        CHECK(0, "bad status line '%s'", line);
        return false;
    }
    for (;;) {
        if (!conn_line(c, line, sizeof line)) {
            CHECK(0, "headers cut short");
            return false;
        }
        if (line[0] == '\0')
            break;
        char *colon = strchr(line, ':');
        if (!colon || r->nh == 48 || colon - line >= 64) {
            CHECK(0, "bad header line '%s'", line);
            return false;
        }
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        size_t vn = strlen(v) < sizeof r->h[0].value ? strlen(v) : sizeof r->h[0].value - 1;
        memcpy(r->h[r->nh].name, line, (size_t)(colon - line) + 1);
        memcpy(r->h[r->nh].value, v, vn);
        r->h[r->nh].value[vn] = '\0';
        r->nh++;
    }
    if (head || r->status == 304)
        return true;
    const char *cl = hdr(r, "Content-Length");
    if (!cl) {
        CHECK(0, "status %d without Content-Length", r->status);
        return false;
    }
    r->body_len = strtoull(cl, NULL, 10);
    r->body = malloc(r->body_len + 1);
    if (!conn_read(c, r->body, r->body_len)) {
        CHECK(0, "body cut short (%zu bytes announced)", r->body_len);
        resp_free(r);
        r->body_len = 0;
        return false;
    }
    r->body[r->body_len] = '\0';
    return true;
}

/* One request on its own connection; returns the status (-1 on failure).
 * If eof is given, *eof tells whether the server closed the connection
 * after the response (waiting up to the I/O timeout for it). */
static int one_shot(const char *raw, bool head, struct resp *r, bool *eof)
{
    struct conn *c = conn_open();
    int st = -1;
    if (send_str(c, raw) && read_resp(c, head, r))
        st = r->status;
    if (eof)
        *eof = st >= 0 && conn_eof(c);
    conn_close(c);
    return st;
}

static char *get_req(const char *method, const char *target, const char *extra)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nHost: test\r\n%s\r\n", method, target,
             extra ? extra : "");
    return buf;
}

/* GET target on its own connection: want status, and the body of `f` (if given). */
static void expect_get(const char *target, int want, const struct file *f)
{
    struct resp r;
    int st = one_shot(get_req("GET", target, NULL), false, &r, NULL);
    CHECK(st == want, "GET %s: status %d, want %d", target, st, want);
    if (st == want && f) {
        CHECK(r.body_len == content_len(f) && memcmp(r.body, f->content, r.body_len) == 0,
              "GET %s: body '%s'", target, r.body);
        const char *ct = hdr(&r, "Content-Type");
        CHECK(ct && strcmp(ct, f->ctype) == 0, "GET %s: Content-Type '%s', want '%s'", target,
              ct ? ct : "(none)", f->ctype);
    }
    resp_free(&r);
}

static void format_http_date(time_t t, char out[64])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm); /* C locale: no setlocale() here */
}

/* ---- the tests ------------------------------------------------------------------------ */

static void test_command_line(void)
{
    atomic_store(&phase, "command line");
    static const char *const bad[][4] = {
        { "-p", "abc", NULL }, { "-p", "70000", NULL }, { "-p", "-1", NULL }, { "-x", NULL },
        { "-v", "abc", NULL }, { "-v", "-2", NULL }, { "extra", NULL }, { "-p", NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            const char *argv[6] = { server_bin };
            for (int k = 0; bad[i][k]; k++)
                argv[k + 1] = bad[i][k];
            execv(server_bin, (char *const *)argv);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s %s' exit status %d, want 2", bad[i][0],
              bad[i][1] ? bad[i][1] : "", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

static void test_basic(void)
{
    atomic_store(&phase, "basic GET and headers");
    struct resp r;
    struct conn *c = conn_open();
    int st = send_str(c, get_req("GET", "/index.html", NULL)) && read_resp(c, false, &r) ? r.status : -1;
    CHECK(st == 200, "status %d", st);
    const struct file *f = file_named("index.html");
    CHECK(st == 200 && r.body_len == strlen(f->content) && strcmp(r.body, f->content) == 0,
          "body '%s'", st == 200 ? r.body : "");
    const char *v = hdr(&r, "Content-Length");
    CHECK(v && strtoul(v, NULL, 10) == strlen(f->content), "Content-Length %s", v ? v : "(none)");
    v = hdr(&r, "Content-Type");
    CHECK(v && strcmp(v, "text/html; charset=utf-8") == 0, "Content-Type %s", v ? v : "(none)");
    v = hdr(&r, "Server");
    CHECK(v && strstr(v, "weft-httpd"), "Server %s", v ? v : "(none)");
    CHECK(hdr(&r, "Connection") == NULL, "HTTP/1.1 keep-alive needs no Connection header");
    v = hdr(&r, "Date");
    CHECK(v && strlen(v) == 29 && v[3] == ',' && strcmp(v + 25, " GMT") == 0, "Date '%s'", v ? v : "");
    if (v) {
        struct tm tm = { 0 };
        char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        CHECK(end && *end == '\0', "Date '%s' is not an IMF-fixdate", v);
        time_t t = timegm(&tm), now = time(NULL);
        CHECK(t > now - 60 && t < now + 60, "Date '%s' is not now", v);
    }
    char lm[64];
    format_http_date(ROOT_MTIME, lm);
    v = hdr(&r, "Last-Modified");
    CHECK(v && strcmp(v, lm) == 0, "Last-Modified '%s', want '%s'", v ? v : "(none)", lm);
    CHECK(conn_open_still(c), "the connection should stay open");
    conn_close(c);
    resp_free(&r);
}

static void test_paths(void)
{
    atomic_store(&phase, "paths");
    expect_get("/", 200, file_named("index.html"));
    expect_get("/sub/", 200, file_named("sub/index.html"));
    expect_get("/sub", 200, file_named("sub/index.html"));
    expect_get("/sub/page.html", 200, file_named("sub/page.html"));
    expect_get("/sub/./page.html", 200, file_named("sub/page.html"));
    expect_get("/sub/../hello.txt", 200, file_named("hello.txt"));
    expect_get("//sub//page.html", 200, file_named("sub/page.html"));
    expect_get("/hello.txt?query=1&x=%zz", 200, file_named("hello.txt"));
    expect_get("/a%20b.txt", 200, file_named("a b.txt"));
    expect_get("/%68%65%6c%6c%6f.txt", 200, file_named("hello.txt"));
    expect_get("/sub%2Fpage.html", 200, file_named("sub/page.html"));
    expect_get("http://test/hello.txt", 200, file_named("hello.txt"));
    expect_get("/empty.txt", 200, file_named("empty.txt"));
    expect_get("/empty/", 404, NULL);     /* a directory without index.html */
    expect_get("/nope.html", 404, NULL);
    expect_get("/nope/deeper.html", 404, NULL);
    expect_get("/hello.txt/", 404, NULL); /* a file is not a directory */
    expect_get("/hello.txt/x", 404, NULL);
    expect_get("/fifo", 403, NULL);        /* not a regular file, and must not hang */
    expect_get("/index.html.d/", 404, NULL);
    char longname[400];
    memset(longname, 'n', sizeof longname);
    memcpy(longname, "/", 1);
    longname[sizeof longname - 1] = '\0';
    expect_get(longname, 404, NULL); /* a name longer than NAME_MAX */
}

static void test_types(void)
{
    atomic_store(&phase, "content types");
    for (size_t i = 0; i < NFILES; i++) {
        char target[256];
        snprintf(target, sizeof target, "/%s", files[i].name);
        if (strchr(target, ' '))
            continue; /* needs encoding; checked in test_paths */
        expect_get(target, 200, &files[i]);
    }
}

static void test_escapes(void)
{
    atomic_store(&phase, "escape attempts");
    static const char *const targets[] = {
        "/../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E/secret.txt", "/sub/../../secret.txt",
        "/%2e%2e%2fsecret.txt", "/..%2fsecret.txt", "/sub/%2e%2e/%2e%2e/secret.txt",
        "/./../secret.txt", "/sub/..%2F..%2Fsecret.txt", "http://test/../secret.txt",
        "/link-out", "/link-dir/secret.txt", "/link-dir/root/hello.txt", "/link-in.txt",
        "/../root/hello.txt",
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        struct resp r;
        int st = one_shot(get_req("GET", targets[i], NULL), false, &r, NULL);
        CHECK(st == 403 || st == 404, "GET %s: status %d, want 403 or 404", targets[i], st);
        CHECK(!r.body || !strstr(r.body, "TOP-SECRET"), "GET %s leaked the secret", targets[i]);
        resp_free(&r);
    }
}

struct bad_case {
    const char *what;
    const char *raw; /* NULL: built by the test */
    int status;
};

static void test_errors(void)
{
    atomic_store(&phase, "error statuses");
    static const struct bad_case cases[] = {
        { "garbage", "GARBAGE\r\n\r\n", 400 },
        { "no version", "GET /\r\n\r\n", 400 },
        { "bad version syntax", "GET / HTTP/x.y\r\nHost: t\r\n\r\n", 400 },
        { "bad escape", "GET /%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400 },
        { "truncated escape", "GET /index.html% HTTP/1.1\r\nHost: t\r\n\r\n", 400 },
        { "NUL escape", "GET /index.html%00.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400 },
        { "no Host", "GET / HTTP/1.1\r\n\r\n", 400 },
        { "two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
        { "folding", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400 },
        { "space before colon", "GET / HTTP/1.1\r\nHost : t\r\n\r\n", 400 },
        { "no colon", "GET / HTTP/1.1\r\nHost: t\r\nnocolon\r\n\r\n", 400 },
        { "bad Content-Length", "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", 400 },
        { "POST", "POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc", 405 },
        { "DELETE", "DELETE /index.html HTTP/1.1\r\nHost: t\r\n\r\n", 405 },
        { "lower-case get", "get / HTTP/1.1\r\nHost: t\r\n\r\n", 405 },
        { "body", "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 413 },
        { "chunked", "GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413 },
        { "HTTP/2.0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505 },
        { "HTTP/1.2", "GET / HTTP/1.2\r\nHost: t\r\n\r\n", 505 },
        { "HTTP/0.9", "GET / HTTP/0.9\r\n\r\n", 505 },
        { "long URI", NULL, 414 },
        { "65 headers", NULL, 431 },
        { "9 KiB head", NULL, 413 },
        { "64 KiB head", NULL, 413 },
    };
    char *buf = malloc(80 * 1024);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bad_case *bc = &cases[i];
        const char *raw = bc->raw;
        if (!raw) {
            size_t n;
            if (bc->status == 414) {
                n = (size_t)sprintf(buf, "GET /");
                memset(buf + n, 'u', 3000);
                n += 3000;
                sprintf(buf + n, " HTTP/1.1\r\nHost: t\r\n\r\n");
            } else if (bc->status == 431) {
                n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: t\r\n");
                for (int k = 0; k < 64; k++)
                    n += (size_t)sprintf(buf + n, "X-%d: v\r\n", k);
                sprintf(buf + n, "\r\n");
            } else {
                size_t pad = strstr(bc->what, "64") ? 64 * 1024 : 9 * 1024;
                n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: t\r\nX-Pad: ");
                memset(buf + n, 'p', pad);
                n += pad;
                sprintf(buf + n, "\r\n\r\n");
            }
            raw = buf;
        }
        struct resp r;
        bool eof;
        int st = one_shot(raw, false, &r, &eof);
        CHECK(st == bc->status, "%s: status %d, want %d", bc->what, st, bc->status);
        CHECK(eof, "%s: the server should close after %d", bc->what, bc->status);
        if (st == bc->status) {
            const char *conn = hdr(&r, "Connection");
            CHECK(conn && strcasecmp(conn, "close") == 0, "%s: no 'Connection: close'", bc->what);
        }
        if (st == 405) {
            const char *allow = hdr(&r, "Allow");
            CHECK(allow && strcmp(allow, "GET, HEAD") == 0, "%s: Allow '%s'", bc->what,
                  allow ? allow : "(none)");
        }
        resp_free(&r);
    }

    /* the limits from the good side: 64 header lines, a 2048-byte target */
    size_t n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int k = 0; k < 63; k++)
        n += (size_t)sprintf(buf + n, "X-%d: v\r\n", k);
    sprintf(buf + n, "\r\n");
    struct resp r;
    int st = one_shot(buf, false, &r, NULL);
    CHECK(st == 200, "64 header lines: status %d", st);
    resp_free(&r);
    n = (size_t)sprintf(buf, "GET /index.html?");
    memset(buf + n, 'q', 2048 - 12);
    sprintf(buf + n + 2048 - 12, " HTTP/1.1\r\nHost: t\r\n\r\n");
    st = one_shot(buf, false, &r, NULL);
    CHECK(st == 200, "2048-byte target: status %d", st);
    resp_free(&r);
    free(buf);

    /* an error for HEAD has no body: the next response parses */
    struct conn *c = conn_open();
    CHECK(send_str(c, "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n"),
          "send");
    CHECK(read_resp(c, true, &r) && r.status == 404, "HEAD 404: %d", r.status);
    CHECK(hdr(&r, "Content-Length") != NULL, "HEAD 404 has a Content-Length");
    resp_free(&r);
    CHECK(read_resp(c, false, &r) && r.status == 200 && strcmp(r.body, "hello, world\n") == 0,
          "GET after HEAD 404: %d", r.status);
    resp_free(&r);
    conn_close(c);
}

static void test_keepalive(void)
{
    atomic_store(&phase, "keep-alive");
    static const char *const names[] = { "index.html", "hello.txt", "sub/page.html", "data.json" };
    struct conn *c = conn_open();
    struct resp r;
    for (int i = 0; i < 20; i++) {
        const struct file *f = file_named(names[i % 4]);
        char target[128];
        snprintf(target, sizeof target, "/%s", f->name);
        CHECK(send_str(c, get_req("GET", target, NULL)), "send %d", i);
        bool ok = read_resp(c, false, &r);
        CHECK(ok && r.status == 200 && strcmp(r.body, f->content) == 0, "request %d on one connection", i);
        CHECK(!ok || hdr(&r, "Connection") == NULL, "request %d: Connection header", i);
        resp_free(&r);
        if (i == 10) { /* a 404 keeps the connection */
            CHECK(send_str(c, get_req("GET", "/missing", NULL)), "send");
            CHECK(read_resp(c, false, &r) && r.status == 404, "404 on keep-alive");
            resp_free(&r);
        }
    }
    /* Connection: close ends it after the response */
    CHECK(send_str(c, get_req("GET", "/hello.txt", "Connection: close\r\n")), "send");
    CHECK(read_resp(c, false, &r) && r.status == 200, "close request");
    const char *v = hdr(&r, "Connection");
    CHECK(v && strcasecmp(v, "close") == 0, "Connection: %s", v ? v : "(none)");
    CHECK(conn_eof(c), "server closes after Connection: close");
    resp_free(&r);
    conn_close(c);

    /* HTTP/1.0: closes by default, stays with keep-alive */
    c = conn_open();
    CHECK(send_str(c, "GET /hello.txt HTTP/1.0\r\n\r\n"), "send");
    CHECK(read_resp(c, false, &r) && r.status == 200, "HTTP/1.0");
    v = hdr(&r, "Connection");
    CHECK(v && strcasecmp(v, "close") == 0, "HTTP/1.0 Connection: %s", v ? v : "(none)");
    CHECK(conn_eof(c), "HTTP/1.0 closes");
    resp_free(&r);
    conn_close(c);

    c = conn_open();
    for (int i = 0; i < 3; i++) {
        CHECK(send_str(c, "GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), "send");
        CHECK(read_resp(c, false, &r) && r.status == 200, "HTTP/1.0 keep-alive %d", i);
        v = hdr(&r, "Connection");
        CHECK(v && strcasecmp(v, "keep-alive") == 0, "HTTP/1.0 keep-alive: Connection %s",
              v ? v : "(none)");
        resp_free(&r);
    }
    conn_close(c);
}

/* server_has_open(): does the server hold a descriptor of path? (-1: /proc
 * cannot say) */
static int server_has_open(const char *path)
{
    char dir[64], link[600], target[600];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)server_pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strcmp(target, path) == 0;
        }
    }
    closedir(d);
    return found;
}

/* test_kept_file(): one keep-alive connection asks for the same file while
 * it changes under the server, which keeps the file it served last open
 * (httpd.c, "the kept file"): each answer must be the file as it is now. */
static void test_kept_file(void)
{
    atomic_store(&phase, "a kept file that changes");
    char path[512], tmp[512];
    snprintf(path, sizeof path, "%s/kept.txt", rootdir);
    snprintf(tmp, sizeof tmp, "%s/kept.tmp", tmpdir);
    write_file(path, "one\n", 4);
    struct conn *c = conn_open();
    struct resp r;
    const char *const want[] = { "one\n", "one\n", "second version\n", "second version, longer\n" };
    for (int i = 0; i < 4; i++) {
        if (i == 2) { /* a new file renamed over it: another inode */
            write_file(tmp, want[2], strlen(want[2]));
            CHECK(rename(tmp, path) == 0, "rename: %s", strerror(errno));
        } else if (i == 3) { /* rewritten in place, longer */
            write_file(path, want[3], strlen(want[3]));
        }
        CHECK(send_str(c, get_req("GET", "/kept.txt", NULL)), "send %d", i);
        bool ok = read_resp(c, false, &r);
        CHECK(ok && r.status == 200 && strcmp(r.body, want[i]) == 0,
              "kept file, step %d: status %d, body %s", i, ok ? r.status : -1,
              ok && r.body ? r.body : "(none)");
        resp_free(&r);
    }
    /* idle: the connection gives its kept file back after 100 ms (the
     * server then holds no descriptor of it), and serves it afresh after */
    char real[PATH_MAX];
    CHECK(realpath(path, real) != NULL, "realpath: %s", strerror(errno));
    int held = 1;
    for (int i = 0; i < 500 && held == 1; i++) { /* 5 s: slow builds; idle timeout 10 s */
        struct timespec nap = { 0, 10 * 1000000L };
        nanosleep(&nap, NULL);
        held = server_has_open(real);
    }
    CHECK(held != 1, "the server still holds kept.txt open after 5 s idle");
    CHECK(send_str(c, get_req("GET", "/kept.txt", NULL)), "send");
    CHECK(read_resp(c, false, &r) && r.status == 200 && strcmp(r.body, want[3]) == 0,
          "kept file after an idle moment");
    resp_free(&r);
    /* replaced by a symbolic link (to a file inside the root): refused, as
     * a link always is; then gone: 404 */
    CHECK(unlink(path) == 0 && symlink("hello.txt", path) == 0, "symlink: %s", strerror(errno));
    CHECK(send_str(c, get_req("GET", "/kept.txt", NULL)), "send");
    CHECK(read_resp(c, false, &r) && r.status == 403, "kept file replaced by a link: %d", r.status);
    resp_free(&r);
    CHECK(unlink(path) == 0, "unlink: %s", strerror(errno));
    CHECK(send_str(c, get_req("GET", "/kept.txt", NULL)), "send");
    CHECK(read_resp(c, false, &r) && r.status == 404, "kept file removed: %d", r.status);
    resp_free(&r);
    conn_close(c);
}

struct pipe_item {
    const char *method, *target;
    int status;
    const char *body; /* NULL: no body check */
};

static const struct pipe_item pipe_items[] = {
    { "GET", "/index.html", 200, "<html><body>root index</body></html>\n" },
    { "GET", "/hello.txt", 200, "hello, world\n" },
    { "HEAD", "/hello.txt", 200, NULL },
    { "GET", "/nope", 404, NULL },
    { "GET", "/sub/", 200, "<html><body>sub index</body></html>\n" },
    { "GET", "/empty.txt", 200, "" },
    { "GET", "/data.json", 200, "{\"a\": 1}\n" },
};
#define NPIPE_ITEMS (sizeof pipe_items / sizeof pipe_items[0])

static void check_pipeline(struct conn *c, int count, const char *what)
{
    for (int i = 0; i < count; i++) {
        const struct pipe_item *it = &pipe_items[i % NPIPE_ITEMS];
        struct resp r;
        bool head = strcmp(it->method, "HEAD") == 0;
        if (!read_resp(c, head, &r)) {
            CHECK(0, "%s: response %d missing", what, i);
            return;
        }
        CHECK(r.status == it->status, "%s: response %d (%s %s): status %d", what, i, it->method,
              it->target, r.status);
        if (it->body)
            CHECK(r.body && strcmp(r.body, it->body) == 0, "%s: response %d: body", what, i);
        resp_free(&r);
    }
}

static size_t build_pipeline(char *buf, int count, bool close_last)
{
    size_t n = 0;
    for (int i = 0; i < count; i++) {
        const struct pipe_item *it = &pipe_items[i % NPIPE_ITEMS];
        n += (size_t)sprintf(buf + n, "%s %s HTTP/1.1\r\nHost: test\r\n%s\r\n", it->method, it->target,
                             close_last && i == count - 1 ? "Connection: close\r\n" : "");
    }
    return n;
}

static void test_pipelining(void)
{
    atomic_store(&phase, "pipelining");
    char *buf = malloc(64 * 1024);

    /* 50 requests in one write */
    struct conn *c = conn_open();
    size_t n = build_pipeline(buf, 50, false);
    CHECK(send_all(c, buf, n), "send 50");
    check_pipeline(c, 50, "50 in one write");
    /* the connection is still usable */
    CHECK(send_str(c, get_req("GET", "/hello.txt", NULL)), "send");
    struct resp r;
    CHECK(read_resp(c, false, &r) && r.status == 200, "after the pipeline");
    resp_free(&r);
    conn_close(c);

    /* 50 again, the last with Connection: close: the server closes after it */
    c = conn_open();
    n = build_pipeline(buf, 50, true);
    CHECK(send_all(c, buf, n), "send 50+close");
    check_pipeline(c, 50, "50 ending in close");
    CHECK(conn_eof(c), "closed after the last pipelined request");
    conn_close(c);

    /* a pipeline trickled in 7-byte pieces: heads cut anywhere */
    c = conn_open();
    n = build_pipeline(buf, 14, false);
    for (size_t off = 0; off < n; off += 7) {
        CHECK(send_all(c, buf + off, n - off < 7 ? n - off : 7), "trickle");
        usleep(500);
    }
    check_pipeline(c, 14, "trickled");
    conn_close(c);

    /* a malformed request after good ones: the good ones are answered first */
    c = conn_open();
    n = build_pipeline(buf, 3, false);
    n += (size_t)sprintf(buf + n, "GET /%%zz HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK(send_all(c, buf, n), "send");
    check_pipeline(c, 3, "before the bad one");
    CHECK(read_resp(c, false, &r) && r.status == 400, "the bad one: %d", r.status);
    resp_free(&r);
    CHECK(conn_eof(c), "closed after the bad one");
    conn_close(c);
    free(buf);
}

static void test_head(void)
{
    atomic_store(&phase, "HEAD");
    struct conn *c = conn_open();
    struct resp r;
    /* HEAD then GET on one connection: a body after HEAD would break the GET */
    CHECK(send_str(c, get_req("HEAD", "/index.html", NULL)), "send");
    CHECK(read_resp(c, true, &r) && r.status == 200, "HEAD status %d", r.status);
    const char *v = hdr(&r, "Content-Length");
    CHECK(v && strtoul(v, NULL, 10) == strlen(file_named("index.html")->content), "HEAD Content-Length %s",
          v ? v : "(none)");
    v = hdr(&r, "Content-Type");
    CHECK(v && strcmp(v, "text/html; charset=utf-8") == 0, "HEAD Content-Type");
    CHECK(hdr(&r, "Last-Modified") && hdr(&r, "Date"), "HEAD Last-Modified and Date");
    resp_free(&r);
    CHECK(send_str(c, get_req("HEAD", "/big.bin", NULL)), "send");
    CHECK(read_resp(c, true, &r) && r.status == 200, "HEAD big");
    v = hdr(&r, "Content-Length");
    CHECK(v && strtoul(v, NULL, 10) == BIG_SIZE, "HEAD big Content-Length %s", v ? v : "(none)");
    resp_free(&r);
    CHECK(send_str(c, get_req("GET", "/hello.txt", NULL)), "send");
    CHECK(read_resp(c, false, &r) && r.status == 200 && strcmp(r.body, "hello, world\n") == 0,
          "GET after HEAD");
    resp_free(&r);
    CHECK(conn_open_still(c), "stray bytes after HEAD");
    conn_close(c);
}

static void test_conditional(void)
{
    atomic_store(&phase, "If-Modified-Since");
    static const struct {
        const char *ims;
        int status;
    } cases[] = {
        { "Wed, 01 Jan 2020 00:00:00 GMT", 304 },     /* == mtime */
        { "Wed, 01 Jan 2020 00:00:01 GMT", 304 },     /* later */
        { "Sat, 01 Jan 2050 00:00:00 GMT", 304 },
        { "Tue, 31 Dec 2019 23:59:59 GMT", 200 },     /* a second earlier */
        { "Wednesday, 01-Jan-20 00:00:00 GMT", 304 }, /* RFC 850 */
        { "Wed Jan  1 00:00:00 2020", 304 },          /* asctime */
        { "Sun, 06 Nov 1994 08:49:37 GMT", 200 },
        { "not a date", 200 },
    };
    struct conn *c = conn_open();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char extra[128];
        snprintf(extra, sizeof extra, "If-Modified-Since: %s\r\n", cases[i].ims);
        CHECK(send_str(c, get_req("GET", "/index.html", extra)), "send");
        struct resp r;
        bool ok = read_resp(c, false, &r);
        CHECK(ok && r.status == cases[i].status, "IMS '%s': status %d, want %d", cases[i].ims,
              r.status, cases[i].status);
        if (ok && r.status == 304) {
            CHECK(hdr(&r, "Last-Modified") != NULL, "304 has Last-Modified");
            CHECK(hdr(&r, "Date") != NULL, "304 has Date");
        }
        resp_free(&r);
    }
    /* HEAD is conditional too; and the connection is still fine */
    CHECK(send_str(c, get_req("HEAD", "/", "If-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT\r\n")),
          "send");
    struct resp r;
    CHECK(read_resp(c, true, &r) && r.status == 304, "HEAD IMS: %d", r.status);
    resp_free(&r);
    CHECK(send_str(c, get_req("GET", "/hello.txt", NULL)), "send");
    CHECK(read_resp(c, false, &r) && r.status == 200, "after 304s");
    resp_free(&r);
    conn_close(c);
}

static void check_big(struct conn *c, const char *what)
{
    struct resp r;
    if (!read_resp(c, false, &r)) {
        CHECK(0, "%s: no response", what);
        return;
    }
    CHECK(r.status == 200, "%s: status %d", what, r.status);
    const char *v = hdr(&r, "Content-Type");
    CHECK(v && strcmp(v, "application/octet-stream") == 0, "%s: Content-Type %s", what, v ? v : "");
    CHECK(r.body_len == BIG_SIZE, "%s: %zu bytes", what, r.body_len);
    if (r.body_len == BIG_SIZE) {
        size_t i = 0;
        while (i < BIG_SIZE && (unsigned char)r.body[i] == big[i])
            i++;
        CHECK(i == BIG_SIZE, "%s: first difference at byte %zu", what, i);
    }
    resp_free(&r);
}

static void test_big(void)
{
    atomic_store(&phase, "4 MiB body");
    struct conn *c = conn_open();
    /* twice on one connection, then a small one behind it */
    CHECK(send_str(c, get_req("GET", "/big.bin", NULL)), "send");
    check_big(c, "big #1");
    CHECK(send_str(c, get_req("GET", "/big.bin", NULL)), "send");
    check_big(c, "big #2");
    conn_close(c);

    /* A client that does not read: the server's send blocks. Another client
     * must still be served promptly (with one vcore too). */
    atomic_store(&phase, "4 MiB body, stalled reader");
    struct conn *slow = conn_open_rcvbuf(64 * 1024);
    CHECK(send_str(slow, get_req("GET", "/big.bin", NULL)), "send");
    usleep(200 * 1000);
    double t0 = now_s();
    for (int i = 0; i < 5; i++)
        expect_get("/hello.txt", 200, file_named("hello.txt"));
    double dt = now_s() - t0;
    CHECK(dt < 5.0, "5 requests took %.2f s while another connection was stalled", dt);
    check_big(slow, "big, read late");
    conn_close(slow);

    /* pipelined: big, small, big */
    c = conn_open();
    char req[512] = "";
    strcat(req, get_req("GET", "/big.bin", NULL));
    strcat(req, get_req("GET", "/hello.txt", NULL));
    strcat(req, get_req("GET", "/big.bin", NULL));
    CHECK(send_str(c, req), "send");
    check_big(c, "pipelined big #1");
    struct resp r;
    CHECK(read_resp(c, false, &r) && r.status == 200 && strcmp(r.body, "hello, world\n") == 0,
          "small between bigs");
    resp_free(&r);
    check_big(c, "pipelined big #2");
    conn_close(c);
}

/* Clients that send a request and vanish: the server must not die of
 * SIGPIPE or a reset, and must keep serving. */
static void test_vanishing_clients(void)
{
    atomic_store(&phase, "vanishing clients");
    for (int i = 0; i < 20; i++) {
        struct conn *c = conn_open();
        send_str(c, get_req("GET", "/big.bin", NULL));
        if (i % 2) { /* read a little first */
            char tmp[1024];
            (void)!read(c->fd, tmp, sizeof tmp);
        }
        struct linger lg = { .l_onoff = 1, .l_linger = 0 }; /* close with a reset */
        if (i % 3 == 0)
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        conn_close(c);
    }
    /* half a request, then gone */
    for (int i = 0; i < 10; i++) {
        struct conn *c = conn_open();
        send_str(c, "GET /index.html HTT");
        conn_close(c);
    }
    usleep(200 * 1000);
    CHECK(server_alive(), "the server died");
    expect_get("/hello.txt", 200, file_named("hello.txt"));
}

struct worker_arg {
    int id;
    int requests;
    bool reconnect;
};

static void *concurrent_worker(void *p)
{
    struct worker_arg *a = p;
    struct conn *c = NULL;
    for (int i = 0; i < a->requests; i++) {
        if (!c)
            c = conn_open();
        const struct file *f = &files[(size_t)(a->id + i) % NFILES];
        char target[256];
        snprintf(target, sizeof target, "/%s", f->name);
        if (strchr(target, ' '))
            snprintf(target, sizeof target, "/hello.txt"), f = file_named("hello.txt");
        CHECK(send_str(c, get_req("GET", target, NULL)), "worker %d send", a->id);
        struct resp r;
        bool ok = read_resp(c, false, &r);
        CHECK(ok && r.status == 200 && r.body_len == content_len(f) &&
                  memcmp(r.body, f->content, r.body_len) == 0,
              "worker %d request %d (%s)", a->id, i, target);
        resp_free(&r);
        if (!ok || a->reconnect) {
            conn_close(c);
            c = NULL;
        }
    }
    if (c)
        conn_close(c);
    return NULL;
}

static void test_concurrency(void)
{
    atomic_store(&phase, "concurrent clients");
    enum { N = 48 };
    pthread_t t[N];
    struct worker_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct worker_arg){ .id = i, .requests = 25, .reconnect = i % 4 == 0 };
        if (pthread_create(&t[i], NULL, concurrent_worker, &a[i]) != 0)
            die("pthread_create");
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
}

/* ---- timeouts, in the background while the rest runs ---------------------------------- */

enum { TO_IDLE, TO_IDLE_AFTER_REQUEST, TO_HEAD_TRICKLE };

struct timeout_arg {
    int kind;
    double closed_after; /* seconds until the server closed; < 0: never seen */
};

static void *timeout_worker(void *p)
{
    struct timeout_arg *a = p;
    struct conn *c = conn_open();
    set_timeouts(c->fd, 60);
    a->closed_after = -1;
    double t0 = now_s();
    if (a->kind == TO_IDLE_AFTER_REQUEST) {
        struct resp r;
        send_str(c, get_req("GET", "/hello.txt", NULL));
        if (read_resp(c, false, &r) && r.status == 200)
            t0 = now_s();
        resp_free(&r);
    }
    if (a->kind == TO_HEAD_TRICKLE) {
        /* a head that never ends: one header line a second */
        send_str(c, "GET / HTTP/1.1\r\nHost: t\r\n");
        for (int i = 0; i < 40; i++) {
            struct pollfd pf = { .fd = c->fd, .events = POLLIN };
            if (poll(&pf, 1, 1000) > 0)
                break;
            if (!send_str(c, "X-Slow: 1\r\n"))
                break;
        }
    }
    char tmp[256];
    ssize_t k = read(c->fd, tmp, sizeof tmp);
    if (k == 0 || (k < 0 && (errno == ECONNRESET || errno == EPIPE)))
        a->closed_after = now_s() - t0;
    conn_close(c);
    return NULL;
}

static pthread_t to_threads[3];
static struct timeout_arg to_args[3];

static void start_timeout_tests(void)
{
    for (int i = 0; i < 3; i++) {
        to_args[i].kind = i;
        if (pthread_create(&to_threads[i], NULL, timeout_worker, &to_args[i]) != 0)
            die("pthread_create");
    }
}

static void finish_timeout_tests(void)
{
    atomic_store(&phase, "timeouts");
    static const char *const names[] = { "idle (no request)", "idle (after a request)",
                                         "unfinished head" };
    static const double lo[] = { 9.5, 9.5, 4.5 }, hi[] = { 40, 40, 25 };
    for (int i = 0; i < 3; i++) {
        pthread_join(to_threads[i], NULL);
        double s = to_args[i].closed_after;
        fprintf(stderr, "client_test: timeout, %s: closed after %.2f s\n", names[i], s);
        CHECK(s >= lo[i] && s <= hi[i], "%s: closed after %.2f s, want %.1f .. %.0f s", names[i], s,
              lo[i], hi[i]);
    }
}

/* ---- a client that stops reading, and too few descriptors ------------------------------ */

/* test_slow_reader(): against a server started with -t SLOW_T_MS, a client
 * asks for a 256 MiB file and reads nothing (default buffers, so the kernel
 * may grow them). The server must give up about SLOW_T_MS after the client
 * stopped taking bytes, with a reset the client sees without reading (POLLERR
 * or POLLHUP); counting the kernel's buffer growth as progress made it 2-3
 * times as long. Then a client that reads slowly but steadily (64 KiB every
 * SLOW_T_MS / 4) must not be cut off within 3 * SLOW_T_MS. */
static void test_slow_reader(void)
{
    atomic_store(&phase, "slow reader");
    struct conn *c = conn_open();
    CHECK(send_str(c, get_req("GET", "/huge.bin", NULL)), "send");
    double t0 = now_s();
    struct pollfd pf = { .fd = c->fd, .events = 0 };
    int r = poll(&pf, 1, 20 * SLOW_T_MS);
    double s = now_s() - t0;
    fprintf(stderr, "client_test: a client that reads nothing: reset after %.2f s (-t %d ms)\n", s,
            SLOW_T_MS);
    CHECK(r == 1 && (pf.revents & (POLLERR | POLLHUP)), "no reset within %d ms (poll %d, revents %#x)",
          20 * SLOW_T_MS, r, (unsigned)pf.revents);
    CHECK(s >= 0.9 * SLOW_T_MS / 1000 && s <= 1.8 * SLOW_T_MS / 1000 + (SANITIZED_SLACK),
          "reset after %.2f s with -t %d ms", s, SLOW_T_MS);
    conn_close(c);

    atomic_store(&phase, "slow but steady reader");
    c = conn_open_rcvbuf(64 * 1024);
    CHECK(send_str(c, get_req("GET", "/huge.bin", NULL)), "send");
    t0 = now_s();
    size_t got = 0;
    while (now_s() - t0 < 3.0 * SLOW_T_MS / 1000) {
        usleep(SLOW_T_MS * 1000 / 4);
        ssize_t k = recv(c->fd, c->buf, sizeof c->buf, MSG_DONTWAIT);
        CHECK(k > 0 || (k < 0 && errno == EAGAIN), "steady reader cut off after %.2f s, %zu bytes: %s",
              now_s() - t0, got, k == 0 ? "EOF" : strerror(errno));
        if (k > 0)
            got += (size_t)k;
    }
    CHECK(got > 0, "the steady reader got nothing");
    conn_close(c);
}

/* test_few_descriptors(): the server run with RLIMIT_NOFILE at 4 .. 12
 * either answers a request (200, or 503 when it cannot open the file) or
 * exits non-zero with a message on stderr within the I/O timeout, never
 * listens in silence (at 7 it used to print
 * "listening" and never answer: weft's poller could not start, and accept's
 * EMFILE was retried forever). */
static void test_few_descriptors(void)
{
    for (int lim = 4; lim <= 12; lim++) {
        char what[64];
        snprintf(what, sizeof what, "RLIMIT_NOFILE %d", lim);
        atomic_store(&phase, "few descriptors");
        int out[2], err[2];
        if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
            die("pipe: %s", strerror(errno));
        pid_t pid = spawn_server(NULL, out[1], err[1], lim);
        server_pid = pid;
        close(out[1]);
        close(err[1]);
        char line[256] = "";
        FILE *f = fdopen(out[0], "r");
        bool listening = f && fgets(line, sizeof line, f) && sscanf(line, "listening on 127.0.0.1:%d", &port) == 1;
        bool answered = false;
        if (listening) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            set_timeouts(fd, IO_TIMEOUT_S);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
                const char *req = "GET / HTTP/1.0\r\n\r\n";
                (void)!send(fd, req, strlen(req), MSG_NOSIGNAL);
                char buf[64] = "";
                ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
                answered = k > 9 && strncmp(buf, "HTTP/1.1 ", 9) == 0; /* 200, or 503 for no descriptors */
                CHECK(answered || k >= 0 || errno != EAGAIN, "%s: no answer and no exit within %d s",
                      what, IO_TIMEOUT_S);
            }
            close(fd);
        }
        if (f)
            fclose(f);
        else
            close(out[0]);
        int st = 0;
        if (answered) {
            kill(pid, SIGTERM);
            waitpid(pid, &st, 0);
        } else {
            double until = now_s() + IO_TIMEOUT_S;
            pid_t w = 0;
            while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < until)
                usleep(10000);
            if (w == 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                CHECK(0, "%s: %s and neither answered nor exited", what,
                      listening ? "listening" : "not listening");
            }
        }
        server_pid = 0;
        char msg[1024];
        ssize_t m = read(err[0], msg, sizeof msg - 1);
        msg[m > 0 ? m : 0] = '\0';
        close(err[0]);
        char *nl = strrchr(msg, '\n');
        if (nl && nl[1] == '\0')
            *nl = '\0';
        fprintf(stderr, "client_test: %s: %s\n", what,
                answered ? "answered" : listening ? "listened, then exited" : "exited at start");
        if (!answered) {
            CHECK(!WIFEXITED(st) || WEXITSTATUS(st) != 0, "%s: exit status 0 without serving", what);
            CHECK(m > 0, "%s: exited (status %d) without a message", what, st);
            if (listening)
                CHECK(strstr(msg, "cannot serve") != NULL, "%s: unexpected message '%s'", what, msg);
        }
    }
}

/* ---- main ------------------------------------------------------------------------------ */

static void stop_server(void)
{
    atomic_store(&phase, "SIGTERM");
    CHECK(server_alive(), "the server is not running at the end");
    kill(server_pid, SIGTERM);
    int st = 0;
    pid_t r = 0;
    for (int i = 0; i < 1000 && r == 0; i++) {
        r = waitpid(server_pid, &st, WNOHANG);
        if (r == 0)
            usleep(10 * 1000);
    }
    if (r == 0) {
        CHECK(0, "the server ignored SIGTERM for 10 s");
        kill(server_pid, SIGKILL);
        waitpid(server_pid, &st, 0);
    } else {
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: exit status %d, signal %d",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    server_pid = 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: client_test <httpd binary> [flag for every server start]\n");
        return 2;
    }
    server_bin = argv[1];
    server_flag = argc == 3 ? argv[2] : NULL;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG_S);

    test_command_line();
    make_tree();
    atexit(remove_tree);
    start_server();
    fprintf(stderr, "client_test: %s on port %d, root %s\n", server_bin, port, rootdir);

    start_timeout_tests();
    test_basic();
    test_paths();
    test_types();
    test_escapes();
    test_errors();
    test_keepalive();
    test_kept_file();
    test_pipelining();
    test_head();
    test_conditional();
    test_big();
    test_vanishing_clients();
    test_concurrency();
    finish_timeout_tests();

    atomic_store(&phase, "still alive");
    CHECK(server_alive(), "the server died");
    expect_get("/", 200, file_named("index.html"));
    stop_server();

    static const char *const slow_args[] = { "-t", SLOW_T_ARG, NULL };
    start_server_args(slow_args);
    test_slow_reader();
    stop_server();
    test_few_descriptors();

    free(big);
    int f = atomic_load(&failures);
    if (f) {
        fprintf(stderr, "client_test: %d failure(s) against %s\n", f, server_bin);
        return 1;
    }
    printf("client_test: all passed against %s\n", server_bin);
    return 0;
}
