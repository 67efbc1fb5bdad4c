/*
 * httpd.c — a static-file HTTP/1.1 server in the thread-per-connection style.
 *
 * One thread accepts; each connection gets its own thread that reads
 * requests, answers them in order and closes. Built against weft the
 * threads are uthreads and every blocking call parks only the uthread; built
 * with -DHTTPD_PTHREAD (httpd-pthread) they are kernel threads. The two
 * builds differ only in httpd_io.h. README.md has the user's view.
 *
 * A connection's life:
 *   1. answer every complete request in the input buffer (pipelining), the
 *      responses collected in an output buffer; a file body is sent with
 *      sendfile(2) right after its header (flushed with MSG_MORE so both
 *      leave in the same segments);
 *   2. flush the output buffer;
 *   3. read more, with a deadline: IDLE_TIMEOUT_NS when no request has
 *      started, HEAD_TIMEOUT_NS from the first byte of a request head;
 *   4. on EOF, a timeout or an I/O error: close at once. After an error
 *      status, or a response with "Connection: close": shut down the sending
 *      side and drain the input for a moment (a lingering close) so that the
 *      kernel does not answer unread input with a reset that could destroy
 *      the response before the client reads it.
 *
 * Files are opened one path component at a time, relative to a descriptor of
 * the root taken at start-up, each with O_NOFOLLOW: a symbolic link anywhere
 * under the root is never followed (403), and ".." cannot occur because the
 * parser has normalised the path (and refused one that climbs above "/").
 * A connection keeps the file directly under the root it served last open
 * and serves the next request for it from that descriptor after a stat shows
 * it unchanged ("the kept file" below): no open and close per request.
 *
 * Priority classes (README.md, "Priority classes"): a path that starts with
 * /class/<c>/ (c = 0, the most urgent, .. 7) is served as the rest of the
 * path, and the connection's thread runs at class c's priority while it
 * answers it (hio_class: under `-s prio` the prio scheduler honours it).
 * With -C, /compute/<k> answers with the result of k thousand rounds of a
 * 64-bit mixing function: CPU work, for the priority benchmark.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http_parse.h"
#include "httpd_io.h"

#define SEC 1000000000ull
#define IDLE_TIMEOUT_NS (10 * SEC) /* keep-alive: no new request for this long */
#define HEAD_TIMEOUT_NS (5 * SEC)  /* a started request head must be complete by then */
#define SEND_TIMEOUT_NS (10 * SEC) /* default -t: the client takes no byte for this long */
#define LINGER_NS       (2 * SEC)  /* lingering close: drain the input at most this long */
#define LINGER_BYTES    (256 * 1024)

#define YIELD_EVERY 32 /* requests; a client that keeps the pipe full cannot hog a vcore */

#define IN_BUF  (2 * HTTP_MAX_HEAD) /* a partial head (< HTTP_MAX_HEAD) always leaves room */
#define OUT_BUF 4096

#define SERVER_NAME "weft-httpd (" HTTPD_FLAVOUR ")"

#define HTTPD_CLASSES 8
#define COMPUTE_MAX 1000000 /* /compute/<k>: k at most this */
#define KEPT_PATH 256       /* the longest request path whose file a connection keeps open */
#define KEPT_IDLE_NS (100 * 1000000ull) /* an idle connection closes its kept file after this */

static int root_fd = -1; /* the document root, O_DIRECTORY; set once in main */
static bool compute_on;  /* -C: /compute/<k> is served; set once in main */
static uint64_t send_timeout_ns = SEND_TIMEOUT_NS; /* -t; set once in main */
static atomic_long live_conns; /* connection threads running */
static atomic_long kept_files; /* connections holding a file open for the next request */
static long kept_files_max;    /* at most this many (a quarter of RLIMIT_NOFILE); set in main */

struct conn {
    int fd;
    bool reset;              /* the client stopped taking the response: abort */
    size_t in_start, in_end; /* unparsed input: in[in_start..in_end) */
    size_t out_len;          /* pending output: out[0..out_len) */
    uint64_t handed;         /* bytes given to the kernel on this connection */
    uint64_t taken;          /* of those, taken by the client when last looked */
    bool taken_known;        /* taken is valid for the responses under way */
    uint64_t progress_at;    /* when taken last grew (or the input they answer came) */
    int64_t date_sec, lm_sec;/* the seconds date and lm were formatted for (-1: none) */
    char date[30], lm[30];   /* Date and Last-Modified, IMF-fixdate */
    int kept_fd;             /* the file last served, kept open (-1: none): kept_file() */
    struct stat kept_st;     /* its status when opened */
    char kept_path[KEPT_PATH]; /* the request path it answered */
    struct http_request req;
    char in[IN_BUF];
    char out[OUT_BUF];
};

/* ---- output ---------------------------------------------------------------- */

/* Send progress is what the client has taken, not what the kernel accepted:
 * while a client does not read, the kernel still grows the socket's send
 * buffer now and then, and a rule of "no byte moved for t" restarts each time
 * (a 10 s limit became 30 s). taken = bytes handed to the kernel minus those
 * still in the send queue (SIOCOUTQ: unsent or not yet acknowledged). The
 * clock starts when the input being answered arrives; the connection is
 * aborted (reset) when taken then stands still for send_timeout_ns. The
 * system call is made only when a send comes back short or late. Until the
 * baseline is taken, sends do not block (send_deadline() is in the past), so
 * the first short send takes it at once. */
static uint64_t taken_now(const struct conn *c)
{
    int queued = 0;
    if (ioctl(c->fd, SIOCOUTQ, &queued) < 0 || queued < 0)
        queued = 0;
    return c->handed - (uint64_t)queued;
}

static void progress_start(struct conn *c)
{
    c->taken_known = false;
    c->progress_at = hio_now_ns();
}

/* stalled() updates the progress mark; true (and the connection marked for a
 * reset) when the client has taken nothing for send_timeout_ns. */
static bool stalled(struct conn *c)
{
    uint64_t t = taken_now(c), now = hio_now_ns();
    if (!c->taken_known) {
        c->taken_known = true;
        c->taken = t;
    } else if (t > c->taken) {
        c->taken = t;
        c->progress_at = now;
        return false;
    }
    if (now - c->progress_at < send_timeout_ns)
        return false;
    c->reset = true;
    return true;
}

/* send_deadline(): when the next send must give up and look at the client's
 * progress: its time limit, or a tenth of the limit from now (progress is
 * seen only when looked for, so a stall is seen at most that late; the
 * pthread build's SO_SNDTIMEO slice is the same tenth). */
static uint64_t send_deadline(const struct conn *c)
{
    if (!c->taken_known)
        return 1;
    uint64_t limit = c->progress_at + send_timeout_ns, look = hio_now_ns() + send_timeout_ns / 10;
    return look < limit ? look : limit;
}

/* sent() accounts for one send's result k: 0 to go on, -1 to drop. */
static int sent(struct conn *c, ssize_t k, bool more)
{
    if (k < 0)
        return errno == ETIMEDOUT && !stalled(c) ? 0 : -1;
    c->handed += (uint64_t)k;
    return more && stalled(c) ? -1 : 0;
}

static int out_flush(struct conn *c, int flags)
{
    size_t off = 0;
    while (off < c->out_len) {
        ssize_t k = hio_send(c->fd, c->out + off, c->out_len - off, flags, send_deadline(c));
        if (k > 0)
            off += (size_t)k;
        if (sent(c, k, off < c->out_len) < 0)
            return -1;
    }
    c->out_len = 0;
    return 0;
}

static int out_put(struct conn *c, const char *p, size_t n)
{
    if (c->out_len + n > OUT_BUF && out_flush(c, MSG_MORE) < 0)
        return -1;
    memcpy(c->out + c->out_len, p, n); /* n <= OUT_BUF: heads and error bodies are small */
    c->out_len += n;
    return 0;
}

struct head {
    int status;
    const char *ctype;   /* NULL: no Content-Type */
    long long length;    /* < 0: no Content-Length */
    long long mtime;     /* < 0: no Last-Modified */
    const char *extra;   /* NULL or more header lines, each ending in CRLF */
};

/* The head is built with plain copies, not snprintf: at tens of thousands
 * of responses a second per core, formatting was a few per cent of the
 * server's CPU (perf, `httpd -v 1` under wrk). */
struct sbuf {
    char *p;
    size_t n, cap;
};

static void put_str(struct sbuf *b, const char *s, size_t len)
{
    if (len > b->cap - b->n)
        len = b->cap - b->n; /* cannot happen with the heads below: the buffer has room */
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

#define PUT_LIT(b, lit) put_str(b, lit, sizeof lit - 1)

static void put_cstr(struct sbuf *b, const char *s)
{
    put_str(b, s, strlen(s));
}

static void put_num(struct sbuf *b, unsigned long long v)
{
    char d[20];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put_str(b, d + i, sizeof d - i);
}

/* date_of() is now's IMF-fixdate, formatted once a second per connection. */
static const char *date_of(struct conn *c)
{
    int64_t now = (int64_t)time(NULL);
    if (now != c->date_sec) {
        http_format_date(now, c->date);
        c->date_sec = now;
    }
    return c->date;
}

/* put_head() appends a response head. Connection: close when closing;
 * HTTP/1.0 keep-alive is confirmed explicitly. */
static int put_head(struct conn *c, const struct head *h, int version, bool close)
{
    char buf[768];
    struct sbuf b = { buf, 0, sizeof buf };
    PUT_LIT(&b, "HTTP/1.1 ");
    put_num(&b, (unsigned)h->status);
    PUT_LIT(&b, " ");
    put_cstr(&b, http_reason(h->status));
    PUT_LIT(&b, "\r\nDate: ");
    put_cstr(&b, date_of(c));
    PUT_LIT(&b, "\r\nServer: " SERVER_NAME "\r\n");
    if (h->ctype) {
        PUT_LIT(&b, "Content-Type: ");
        put_cstr(&b, h->ctype);
        PUT_LIT(&b, "\r\n");
    }
    if (h->length >= 0) {
        PUT_LIT(&b, "Content-Length: ");
        put_num(&b, (unsigned long long)h->length);
        PUT_LIT(&b, "\r\n");
    }
    if (h->mtime >= 0) {
        if (h->mtime != c->lm_sec) {
            http_format_date(h->mtime, c->lm);
            c->lm_sec = h->mtime;
        }
        PUT_LIT(&b, "Last-Modified: ");
        put_cstr(&b, c->lm);
        PUT_LIT(&b, "\r\n");
    }
    if (h->extra)
        put_cstr(&b, h->extra);
    if (close)
        PUT_LIT(&b, "Connection: close\r\n");
    else if (version == 10)
        PUT_LIT(&b, "Connection: keep-alive\r\n");
    PUT_LIT(&b, "\r\n");
    return out_put(c, buf, b.n);
}

/* send_error() queues an error response with a one-line text body (none for
 * HEAD). */
static int send_error(struct conn *c, int status, const struct http_request *r, bool close)
{
    char body[64];
    int bn = snprintf(body, sizeof body, "%d %s\n", status, http_reason(status));
    struct head h = { .status = status, .ctype = "text/plain; charset=utf-8", .length = bn,
                      .mtime = -1, .extra = status == 405 ? "Allow: GET, HEAD\r\n" : NULL };
    if (put_head(c, &h, r->version, close) < 0)
        return -1;
    return r->method == HTTP_METHOD_HEAD ? 0 : out_put(c, body, (size_t)bn);
}

/* ---- files ---------------------------------------------------------------- */

static const char *content_type(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        { "html", "text/html; charset=utf-8" },
        { "htm", "text/html; charset=utf-8" },
        { "css", "text/css; charset=utf-8" },
        { "js", "text/javascript; charset=utf-8" },
        { "json", "application/json" },
        { "txt", "text/plain; charset=utf-8" },
        { "png", "image/png" },
        { "jpg", "image/jpeg" },
        { "jpeg", "image/jpeg" },
        { "gif", "image/gif" },
        { "svg", "image/svg+xml" },
        { "ico", "image/x-icon" },
        { "wasm", "application/wasm" },
    };
    const char *base = strrchr(path, '/');
    const char *dot = strrchr(base ? base : path, '.');
    if (dot)
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcasecmp(dot + 1, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

/* open_in_root() opens the normalised path ("/" or "/a/b", no "." or ".."
 * segments) under root_fd without following any symbolic link: every
 * component is opened by itself with O_NOFOLLOW. Returns a descriptor (of a
 * directory or anything else; O_NONBLOCK so a FIFO cannot hang us) or -1 with
 * errno (ELOOP for a link). */
static int open_in_root(const char *path)
{
    const int leaf = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    const int inner = O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC;
    const char *p = path + 1;
    if (*p == '\0')
        return openat(root_fd, ".", leaf | O_DIRECTORY);
    int dir = root_fd;
    char name[NAME_MAX + 1];
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        int fd = -1, e = ENAMETOOLONG;
        if (n <= NAME_MAX) {
            memcpy(name, p, n);
            name[n] = '\0';
            fd = openat(dir, name, slash ? inner : leaf);
            e = errno;
        }
        if (dir != root_fd)
            close(dir);
        if (fd < 0 || !slash) {
            errno = e;
            return fd;
        }
        dir = fd;
        p = slash + 1;
    }
}

static int errno_status(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: case ENAMETOOLONG:
        return 404;
    case EACCES: case EPERM: case ELOOP:
        return 403;
    case EMFILE: case ENFILE: case ENOMEM:
        return 503;
    default:
        return 500;
    }
}

/* ---- priority classes and compute requests ------------------------------------- */

/* take_class() strips a leading "/class/<c>/" (c a digit below HTTPD_CLASSES)
 * from r->path and returns c; -1 (path unchanged) if there is none. */
static int take_class(struct http_request *r)
{
    char *p = r->path;
    if (strncmp(p, "/class/", 7) != 0 || p[7] < '0' || p[7] >= '0' + HTTPD_CLASSES ||
        (p[8] != '/' && p[8] != '\0'))
        return -1;
    int cls = p[7] - '0';
    if (p[8] == '\0')
        strcpy(p, "/");
    else
        memmove(p, p + 8, strlen(p + 8) + 1);
    return cls;
}

/* compute_mix() is the work of /compute/<k>: k thousand rounds of a 64-bit
 * mixing step (splitmix64's finaliser) on a chain seeded with k. */
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

/* compute() answers /compute/<k>: "compute <k> <16 hex digits>\n", or 404
 * for a k that is not a number from 1 to COMPUTE_MAX. */
static int compute(struct conn *c, const struct http_request *r, bool close)
{
    const char *s = r->path + 9;
    char *end;
    errno = 0;
    unsigned long k = strtoul(s, &end, 10);
    if (*s < '1' || *s > '9' || *end != '\0' || errno != 0 || k > COMPUTE_MAX)
        return send_error(c, 404, r, close);
    char body[64];
    int n = snprintf(body, sizeof body, "compute %lu %016llx\n", k,
                     (unsigned long long)compute_mix(k));
    struct head h = { .status = 200, .ctype = "text/plain; charset=utf-8", .length = n,
                      .mtime = -1 };
    if (put_head(c, &h, r->version, close) < 0)
        return -1;
    return r->method == HTTP_METHOD_HEAD ? 0 : out_put(c, body, (size_t)n);
}

/* ---- the kept file -------------------------------------------------------------
 *
 * A connection keeps the regular file it served last open, with its status,
 * and answers the next request for the same path from it when a stat of the
 * path (fstatat, no descriptor made) shows the same file unchanged: device,
 * inode, size, modification and change times. Every answer is as fresh as
 * with an open per request; what goes is the open and the close, which in a
 * threaded server take the process's shared descriptor-table lock (nginx's
 * worker processes each have their own table). Only files directly in the
 * root are kept: for them the stat (AT_SYMLINK_NOFOLLOW) refuses a symbolic
 * link exactly as open_in_root does, where a deeper path's stat would follow
 * a link in a directory component. A different path, or a change, opens
 * afresh (open_in_root). A kept file is a descriptor per connection, so
 * only busy connections keep one: a connection that waits KEPT_IDLE_NS for
 * its next request closes it (idle connections, which may be many, hold
 * none), and at most kept_files_max connections keep one at a time. */

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void drop_kept(struct conn *c)
{
    if (c->kept_fd < 0)
        return;
    close(c->kept_fd);
    c->kept_fd = -1;
    atomic_fetch_sub(&kept_files, 1);
}

/* kept_file(): the kept descriptor for path, *st its status, if path names
 * the kept file still unchanged; else -1 (and a changed one is dropped). */
static int kept_file(struct conn *c, const char *path, struct stat *st)
{
    if (c->kept_fd < 0 || strcmp(path, c->kept_path) != 0)
        return -1;
    struct stat now;
    if (fstatat(root_fd, path + 1, &now, AT_SYMLINK_NOFOLLOW) != 0 || !same_file(&now, &c->kept_st)) {
        drop_kept(c);
        return -1;
    }
    *st = c->kept_st;
    return c->kept_fd;
}

/* keep_file() makes fd, just opened for path with status st, the kept file
 * (the previous one closed): false if it cannot be kept (path too long, too
 * many kept), and then the caller still owns fd. */
static bool keep_file(struct conn *c, const char *path, int fd, const struct stat *st)
{
    size_t n = strlen(path);
    if (n >= KEPT_PATH || path[0] != '/' || path[1] == '\0' || strchr(path + 1, '/'))
        return false; /* one component only: see above */
    if (c->kept_fd >= 0) {
        close(c->kept_fd);
    } else if (atomic_fetch_add(&kept_files, 1) >= kept_files_max) {
        atomic_fetch_sub(&kept_files, 1);
        return false;
    }
    c->kept_fd = fd;
    c->kept_st = *st;
    memcpy(c->kept_path, path, n + 1);
    return true;
}

/* serve() answers one parsed GET or HEAD. *close may be set (5xx). Returns
 * -1 when the connection must be dropped (I/O failed, or a file shrank under
 * a Content-Length already promised). */
static int serve(struct conn *c, const struct http_request *r, bool *close_after)
{
    if (compute_on && strncmp(r->path, "/compute/", 9) == 0)
        return compute(c, r, *close_after);
    int status = 0;
    const char *ctype = NULL;
    struct stat st;
    int fd = r->dir_hint ? -1 : kept_file(c, r->path, &st);
    bool kept = fd >= 0, via_dir = false;
    if (kept) {
        /* the same file, unchanged: as if just opened */
    } else if ((fd = open_in_root(r->path)) < 0) {
        status = errno_status(errno);
    } else if (fstat(fd, &st) < 0) {
        status = 500;
    } else if (S_ISDIR(st.st_mode)) {
        int f = openat(fd, "index.html", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int e = errno;
        close(fd);
        fd = f;
        if (fd < 0)
            status = errno_status(e); /* no index.html: 404 (no listings) */
        else if (fstat(fd, &st) < 0)
            status = 500;
        ctype = content_type("index.html");
        via_dir = true;
    } else if (r->dir_hint) {
        status = 404; /* "/file.txt/" */
    }
    if (status == 0 && !S_ISREG(st.st_mode))
        status = 403; /* FIFOs, devices, sockets, a directory called index.html */
    if (status != 0) {
        if (fd >= 0)
            close(fd);
        if (status >= 500)
            *close_after = true;
        return send_error(c, status, r, *close_after);
    }
    if (!ctype)
        ctype = content_type(r->path);
    if (!kept && !via_dir && keep_file(c, r->path, fd, &st))
        kept = true; /* a directory's index.html is opened afresh each time */

    if (r->has_ims && r->ims >= (int64_t)st.st_mtim.tv_sec) {
        if (!kept)
            close(fd);
        struct head h = { .status = 304, .length = -1, .mtime = st.st_mtim.tv_sec };
        return put_head(c, &h, r->version, *close_after);
    }
    struct head h = { .status = 200, .ctype = ctype, .length = (long long)st.st_size,
                      .mtime = st.st_mtim.tv_sec };
    int rc = put_head(c, &h, r->version, *close_after);
    if (rc == 0 && r->method == HTTP_METHOD_GET && st.st_size > 0) {
        rc = out_flush(c, MSG_MORE);
        off_t off = 0;
        while (rc == 0 && off < st.st_size) {
            ssize_t k = hio_sendfile(c->fd, fd, &off, (size_t)(st.st_size - off), send_deadline(c));
            if (k == 0)
                rc = -1; /* the file shrank; the length is already promised */
            else
                rc = sent(c, k, off < st.st_size);
        }
    }
    if (!kept)
        close(fd);
    return rc;
}

/* ---- connections ----------------------------------------------------------- */

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    uint64_t head_start = 0; /* when the pending request's first byte came; 0 = none */
    unsigned served = 0;
    int cls = -1;            /* the priority class this thread runs at; -1 = default */
    hio_conn_setup(c->fd, send_timeout_ns);

    for (;;) {
        bool done = false;
        while (!done && c->in_start < c->in_end) {
            int r = http_parse_request(c->in + c->in_start, c->in_end - c->in_start, &c->req);
            if (r == HTTP_NEED_MORE)
                break;
            if (r != HTTP_OK) {
                if (send_error(c, r, &c->req, true) < 0)
                    goto drop;
                done = true;
                break;
            }
            c->in_start += c->req.head_len;
            head_start = 0;
            int want = take_class(&c->req);
            if (want != cls) {
                hio_class(want);
                cls = want;
            }

            bool close_after = !c->req.keep_alive;
            if (serve(c, &c->req, &close_after) < 0)
                goto drop;
            done = close_after;
            if (++served % YIELD_EVERY == 0)
                hio_yield(); /* weft is cooperative: reads and sends that need
                                not wait never leave the uthread */
        }
        if (out_flush(c, 0) < 0)
            goto drop;
        if (done)
            goto linger;

        if (c->in_start > 0) { /* keep the partial head at the front */
            memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
            c->in_end -= c->in_start;
            c->in_start = 0;
        }
        uint64_t deadline;
        if (c->in_end == 0) {
            deadline = hio_now_ns() + IDLE_TIMEOUT_NS;
        } else {
            if (head_start == 0)
                head_start = hio_now_ns();
            deadline = head_start + HEAD_TIMEOUT_NS;
        }
        ssize_t k;
        if (c->kept_fd >= 0 && c->in_end == 0) {
            /* A busy connection keeps its file; one that falls idle gives
             * it back after KEPT_IDLE_NS (see "the kept file"). */
            uint64_t soon = hio_now_ns() + KEPT_IDLE_NS;
            k = hio_read(c->fd, c->in, IN_BUF, soon < deadline ? soon : deadline);
            if (k < 0 && soon < deadline && hio_now_ns() >= soon) { /* timed out (errno
                                                  is not read across a blocking call) */
                drop_kept(c);
                k = hio_read(c->fd, c->in, IN_BUF, deadline);
            }
        } else {
            k = hio_read(c->fd, c->in + c->in_end, IN_BUF - c->in_end, deadline);
        }
        if (k <= 0)
            goto drop; /* EOF, ETIMEDOUT (idle or slow head), ECONNRESET, ... */
        if (head_start == 0)
            head_start = hio_now_ns();
        c->in_end += (size_t)k;
        progress_start(c); /* what it asks for now is answered against a new clock */
    }

linger:
    shutdown(c->fd, SHUT_WR);
    {
        uint64_t deadline = hio_now_ns() + LINGER_NS;
        size_t drained = 0;
        while (drained < LINGER_BYTES) {
            ssize_t k = hio_read(c->fd, c->in, IN_BUF, deadline);
            if (k <= 0)
                break;
            drained += (size_t)k;
        }
    }
drop:
    if (c->reset) { /* free the kernel's buffers now, and tell the client */
        struct linger l = { .l_onoff = 1, .l_linger = 0 };
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    drop_kept(c);
    hio_close(c->fd);
    free(c);
    atomic_fetch_sub(&live_conns, 1);
    return NULL;
}

static void *acceptor(void *arg)
{
    int lfd = *(int *)arg;
    uint64_t last_warned = 0;
    for (;;) {
        int fd = hio_accept(lfd);
        if (fd < 0) {
            int e = errno;
            if (e == EBADF || e == EINVAL || e == ENOTSOCK || e == EOPNOTSUPP) {
                fprintf(stderr, "httpd: accept: %s\n", strerror(e));
                return NULL;
            }
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                /* Out of descriptors or memory: connections that end give
                 * some back. With none open, nothing will: say so and stop. */
                if (atomic_load(&live_conns) == 0) {
                    fprintf(stderr, "httpd: accept: %s with no connection open: cannot serve "
                                    "(raise the limit: ulimit -n)\n", strerror(e));
                    exit(1);
                }
                uint64_t now = hio_now_ns();
                if (now - last_warned >= SEC) {
                    fprintf(stderr, "httpd: accept: %s; waiting for connections to end\n", strerror(e));
                    last_warned = now;
                }
                hio_sleep_ns(10 * 1000000ull);
            }
            continue; /* ECONNABORTED, EPERM (firewall), ... */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = malloc(sizeof *c);
        if (c) {
            c->fd = fd;
            c->reset = false;
            c->in_start = c->in_end = c->out_len = 0;
            c->handed = 0;
            c->date_sec = c->lm_sec = -1;
            c->kept_fd = -1;
            progress_start(c);
            atomic_fetch_add(&live_conns, 1);
            if (hio_spawn(conn_main, c) == 0)
                continue;
            atomic_fetch_sub(&live_conns, 1);
            free(c);
        }
        hio_close(fd); /* no memory for another connection */
        hio_sleep_ns(1000000ull);
    }
}

/* ---- start-up ---------------------------------------------------------------- */

static void usage(FILE *f, int code)
{
    fprintf(f, "usage: httpd [-p port] [-r root] [-v vcores] [-s sched] [-t ms] [-C] [-c]\n"
               "  -p port    TCP port on 127.0.0.1 (default 8080; 0 = any free port)\n"
               "  -r root    directory to serve (default: the www directory of the source)\n"
               "  -v vcores  weft vcores, 0 = all (default: WEFT_VCORES or all;\n"
               "             ignored by httpd-pthread)\n"
               "  -s sched   weft scheduler: ws (default), fifo, prio (priority classes:\n"
               "             /class/<0..7>/path, 0 most urgent); ignored by httpd-pthread\n"
               "  -t ms      abort a response the client takes no byte of for this long\n"
               "             (default 10000)\n"
               "  -C         serve /compute/<k>: k thousand rounds of CPU work (1..1000000)\n"
               "  -c         connections are stack-copy uthreads (WEFT_STACK_COPY: a few\n"
               "             hundred bytes each while idle; ignored by httpd-pthread)\n");
    exit(code);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The compiled-in www of the source tree; failing that (a copied binary),
 * "www" next to the executable; failing that, ./www. */
static const char *default_root(char *buf, size_t cap)
{
#ifdef HTTPD_DEFAULT_ROOT
    if (is_dir(HTTPD_DEFAULT_ROOT))
        return HTTPD_DEFAULT_ROOT;
#endif
    ssize_t n = readlink("/proc/self/exe", buf, cap - 8);
    if (n > 0) {
        buf[n] = '\0';
        char *dir = dirname(buf);
        memmove(buf, dir, strlen(dir) + 1);
        strcat(buf, "/www");
        if (is_dir(buf))
            return buf;
    }
    return "www";
}

static void on_signal(int sig)
{
    (void)sig;
    _exit(0); /* nothing to flush: every response is written before it counts */
}

int main(int argc, char **argv)
{
    long port = 8080, vcores = 0;
    const char *root = NULL, *sched = NULL;
    char rootbuf[PATH_MAX];
    int opt;
    long send_ms = (long)(SEND_TIMEOUT_NS / 1000000u);
    bool stack_copy = false;
    while ((opt = getopt(argc, argv, "p:r:v:s:t:Cch")) != -1) {
        switch (opt) {
        case 'p':
            if (!parse_long(optarg, 0, 65535, &port))
                usage(stderr, 2);
            break;
        case 'r':
            root = optarg;
            break;
        case 'v':
            if (!parse_long(optarg, 0, 65536, &vcores))
                usage(stderr, 2);
            break;
        case 's':
            sched = optarg;
            break;
        case 'C':
            compute_on = true;
            break;
        case 't':
            if (!parse_long(optarg, 10, 3600000, &send_ms))
                usage(stderr, 2);
            send_timeout_ns = (uint64_t)send_ms * 1000000u;
            break;
        case 'c':
            stack_copy = true;
            break;
        case 'h':
            usage(stdout, 0);
            break;
        default:
            usage(stderr, 2);
        }
    }
    if (optind != argc)
        usage(stderr, 2);
    if (!root)
        root = default_root(rootbuf, sizeof rootbuf);

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct rlimit nofile;
    kept_files_max = getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                         ? (long)(nofile.rlim_cur / 4)
                         : 1L << 20;
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        fprintf(stderr, "httpd: root %s: %s\n", root, strerror(errno));
        return 1;
    }

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t slen = sizeof sin;
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(lfd, 4096) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &slen) < 0) {
        fprintf(stderr, "httpd: 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return 1;
    }

    int rc = hio_start((int)vcores, sched, stack_copy);
    if (rc != 0) {
        fprintf(stderr, "httpd: starting the runtime (-v %ld%s%s): %s\n", vcores,
                sched ? " -s " : "", sched ? sched : "", strerror(rc));
        return rc == EINVAL ? 2 : 1;
    }
    fprintf(stderr, "httpd (%s): serving %s\n", HTTPD_FLAVOUR, root);
    printf("listening on 127.0.0.1:%d\n", ntohs(sin.sin_port));
    fflush(stdout);

    rc = hio_run(acceptor, &lfd);
    if (rc != 0)
        fprintf(stderr, "httpd: acceptor: %s\n", strerror(rc));
    return 1; /* the acceptor only returns on a fatal error */
}
