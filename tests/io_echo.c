/*
 * io_echo — a TCP echo server and thousands of concurrent clients, all
 * uthreads, over 127.0.0.1.
 *
 * Proves: one acceptor uthread (weft_accept / weft_accept4) takes exactly N
 * connections, each served by its own uthread (read/write, recv/send or
 * readv/writev); N client uthreads connect concurrently with weft_connect and
 * each writes several random-sized payloads (1 B .. 64 KiB, from a
 * per-client PRNG) from a writer uthread while the client reads the echo
 * back in random-sized pieces: every byte comes back in order, the stream
 * ends with EOF right after the last byte, every write returns its full
 * length (weft completes writes on the sockets it made non-blocking), the
 * scatter calls (readv, recvmsg) never write outside their iovecs, and the
 * server echoed exactly the bytes the clients sent. Clients cycle through
 * read/write, readv/writev, recv/send, recvfrom/sendto and recvmsg/sendmsg.
 * Accepted descriptors are blocking in the POSIX sense until weft uses them.
 */
#include "iocheck.h"

#define NCLIENTS SCALE(2000, 300)
#define MAXMSG 65536
#define SERVER_BUF 16384
#define GAP 16                        /* bytes between two iovecs, with a sentinel */
#define SENTINEL 0xEE

static struct sockaddr_in srv_addr;
static int listen_fd;
static atomic_long server_bytes;
static atomic_long client_bytes;
static atomic_int clients_done, handlers_done;

/* ---- server ------------------------------------------------------------------------------ */

struct handler {
    int fd;
    int mode;                         /* 0 read/write, 1 recv/send, 2 readv/writev */
};

static void *handler_main(void *arg)
{
    struct handler *h = arg;
    uint8_t *buf = malloc(SERVER_BUF + GAP);
    CHECK(buf != NULL, "malloc");
    long total = 0;
    for (;;) {
        ssize_t n, w;
        switch (h->mode) {
        case 0:
            n = weft_read(h->fd, buf, SERVER_BUF);
            break;
        case 1:
            n = weft_recv(h->fd, buf, SERVER_BUF, 0);
            break;
        default: {
            struct iovec iov[2] = { { buf, 100 }, { buf + 100, SERVER_BUF - 100 } };
            n = weft_readv(h->fd, iov, 2);
            break;
        }
        }
        CHECK(n >= 0, "server read (mode %d): %s", h->mode, strerror(IOERR));
        if (n == 0)
            break;
        switch (h->mode) {
        case 0:
            w = weft_write(h->fd, buf, (size_t)n);
            break;
        case 1:
            w = weft_send(h->fd, buf, (size_t)n, MSG_NOSIGNAL);
            break;
        default: {
            size_t a = (size_t)n / 3;
            struct iovec iov[3] = { { buf, a }, { buf + a, 0 }, { buf + a, (size_t)n - a } };
            w = weft_writev(h->fd, iov, 3);
            break;
        }
        }
        CHECK(w == n, "server write (mode %d) returned %zd of %zd: %s", h->mode, w, n,
              w < 0 ? strerror(IOERR) : "short");
        total += n;
    }
    CHECK(weft_close(h->fd) == 0, "close: %s", strerror(IOERR));
    atomic_fetch_add(&server_bytes, total);
    atomic_fetch_add(&handlers_done, 1);
    free(buf);
    free(h);
    return NULL;
}

static void *acceptor_main(void *arg)
{
    (void)arg;
    weft_t *hs = calloc(NCLIENTS, sizeof *hs);
    CHECK(hs != NULL, "calloc");
    for (int i = 0; i < NCLIENTS; i++) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int fd = i % 2 ? weft_accept4(listen_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC)
                       : weft_accept(listen_fd, (struct sockaddr *)&peer, &len);
        CHECK(fd >= 0, "accept #%d: %s", i, strerror(IOERR));
        CHECK(len == sizeof peer && peer.sin_family == AF_INET &&
                  peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
              "accept #%d: peer address not 127.0.0.1 (len %u)", i, (unsigned)len);
        CHECK(!fd_is_nonblocking(fd), "accept #%d: new descriptor is O_NONBLOCK", i);
        if (i % 2) {
            int fl = fcntl(fd, F_GETFD);
            CHECK(fl >= 0 && (fl & FD_CLOEXEC), "accept4(SOCK_CLOEXEC) #%d: no FD_CLOEXEC", i);
        }
        struct handler *h = malloc(sizeof *h);
        CHECK(h != NULL, "malloc");
        h->fd = fd;
        h->mode = i % 3;
        hs[i] = spawn(handler_main, h);
    }
    for (int i = 0; i < NCLIENTS; i++)
        join(hs[i]);
    free(hs);
    return NULL;
}

/* ---- clients ------------------------------------------------------------------------------ */

#define MAXMSGS 6

struct client {
    uint32_t id;
    int fd;
    int mode;                   /* 0 rw, 1 readv/writev, 2 recv/send, 3 sendto/recvfrom, 4 sendmsg/recvmsg */
    int nmsg;
    size_t size[MAXMSGS];
    uint64_t total;
};

static ssize_t client_send(struct client *c, uint8_t *buf, size_t n)
{
    /* buf holds the message in two pieces: [0, a) and [a + GAP, n + GAP). */
    size_t a = n / 2;
    struct iovec iov[2] = { { buf, a }, { buf + a + GAP, n - a } };
    switch (c->mode) {
    case 0:
        memmove(buf + a, buf + a + GAP, n - a);
        return weft_write(c->fd, buf, n);
    case 1:
        return weft_writev(c->fd, iov, 2);
    case 2:
        memmove(buf + a, buf + a + GAP, n - a);
        return weft_send(c->fd, buf, n, MSG_NOSIGNAL);
    case 3:
        memmove(buf + a, buf + a + GAP, n - a);
        return weft_sendto(c->fd, buf, n, MSG_NOSIGNAL, NULL, 0);
    default: {
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = 2;
        return weft_sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    }
    }
}

static void *client_writer(void *arg)
{
    struct client *c = arg;
    uint8_t *buf = malloc(MAXMSG + GAP);
    CHECK(buf != NULL, "malloc");
    uint64_t off = 0;
    for (int m = 0; m < c->nmsg; m++) {
        size_t n = c->size[m], a = n / 2;
        pattern_fill(c->id, off, buf, a);
        pattern_fill(c->id, off + a, buf + a + GAP, n - a);
        ssize_t w = client_send(c, buf, n);
        CHECK(w == (ssize_t)n, "client %u (mode %d) message %d: wrote %zd of %zu: %s", c->id,
              c->mode, m, w, n, w < 0 ? strerror(IOERR) : "short write");
        off += n;
    }
    CHECK(shutdown(c->fd, SHUT_WR) == 0, "shutdown: %s", strerror(IOERR));
    free(buf);
    return NULL;
}

/* client_recv() reads up to want bytes into buf (contiguous on return) and
 * checks the sentinel gap of the scatter calls. */
static ssize_t client_recv(struct client *c, uint8_t *buf, size_t want)
{
    size_t a = want / 2 ? want / 2 : 1;
    if (a > want)
        a = want;
    struct iovec iov[2] = { { buf, a }, { buf + a + GAP, want - a } };
    ssize_t n;
    switch (c->mode) {
    case 0:
        return weft_read(c->fd, buf, want);
    case 2:
        return weft_recv(c->fd, buf, want, 0);
    case 3: {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        return weft_recvfrom(c->fd, buf, want, 0, (struct sockaddr *)&from, &fl);
    }
    case 1:
    default:
        memset(buf + a, SENTINEL, GAP);
        if (c->mode == 1) {
            n = weft_readv(c->fd, iov, 2);
        } else {
            struct msghdr mh;
            memset(&mh, 0, sizeof mh);
            mh.msg_iov = iov;
            mh.msg_iovlen = 2;
            n = weft_recvmsg(c->fd, &mh, 0);
            if (n >= 0)
                CHECK(!(mh.msg_flags & MSG_TRUNC), "recvmsg: MSG_TRUNC on a stream");
        }
        if (n < 0)
            return n;
        for (int i = 0; i < GAP; i++)
            CHECK(buf[a + (size_t)i] == SENTINEL, "client %u (mode %d): scatter read wrote "
                  "between its iovecs", c->id, c->mode);
        if ((size_t)n > a)
            memmove(buf + a, buf + a + GAP, (size_t)n - a);
        return n;
    }
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    uint32_t seed = c->id * 2654435761u + 17;
    c->mode = (int)(c->id % 5);
    c->nmsg = 2 + (int)(check_rand(&seed) % (MAXMSGS - 1));
    c->total = 0;
    for (int m = 0; m < c->nmsg; m++) {
        unsigned bits = check_rand(&seed) % 17;           /* log-uniform sizes */
        size_t n = 1 + check_rand(&seed) % (1u << bits);
        if (check_rand(&seed) % 16 == 0)
            n = MAXMSG;
        c->size[m] = n;
        c->total += n;
    }
    c->fd = tcp_socket();
    int rc = weft_connect(c->fd, (struct sockaddr *)&srv_addr, sizeof srv_addr);
    CHECK(rc == 0, "client %u: weft_connect: %s", c->id, strerror(IOERR));
    weft_t w = spawn(client_writer, c);

    uint8_t *buf = malloc(MAXMSG + GAP);
    CHECK(buf != NULL, "malloc");
    uint64_t got = 0;
    for (;;) {
        size_t want = 1 + check_rand(&seed) % (check_rand(&seed) % 2 ? 64 : MAXMSG);
        ssize_t n = client_recv(c, buf, want);
        CHECK(n >= 0, "client %u (mode %d): read after %llu bytes: %s", c->id, c->mode,
              (unsigned long long)got, strerror(IOERR));
        CHECK((size_t)n <= want, "client %u: read %zd > %zu asked", c->id, n, want);
        if (n == 0)
            break;
        CHECK(got + (uint64_t)n <= c->total, "client %u: %llu bytes echoed, sent only %llu",
              c->id, (unsigned long long)(got + (uint64_t)n), (unsigned long long)c->total);
        size_t bad = pattern_find_bad(c->id, got, buf, (size_t)n);
        CHECK(bad == (size_t)n, "client %u (mode %d): echoed byte %llu is wrong", c->id,
              c->mode, (unsigned long long)(got + bad));
        got += (uint64_t)n;
    }
    CHECK(got == c->total, "client %u: EOF after %llu of %llu bytes", c->id,
          (unsigned long long)got, (unsigned long long)c->total);
    join(w);
    CHECK(weft_close(c->fd) == 0, "close: %s", strerror(IOERR));
    free(buf);
    atomic_fetch_add(&client_bytes, (long)c->total);
    atomic_fetch_add(&clients_done, 1);
    return NULL;
}

static void *run_all(void *arg)
{
    (void)arg;
    weft_t acc = spawn_ex(acceptor_main, NULL, 0, 0, "acceptor");
    struct client *cs = calloc(NCLIENTS, sizeof *cs);
    weft_t *ts = calloc(NCLIENTS, sizeof *ts);
    CHECK(cs != NULL && ts != NULL, "calloc");
    for (int i = 0; i < NCLIENTS; i++) {
        cs[i].id = (uint32_t)i;
        ts[i] = spawn(client_main, &cs[i]);
    }
    for (int i = 0; i < NCLIENTS; i++)
        join(ts[i]);
    join(acc);
    free(ts);
    free(cs);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    io_test_start();
    check_phase("limits");
    long need = 2L * NCLIENTS + 64;
    long have = raise_nofile();
    if (have < need) {
        fprintf(stderr, "SKIP: RLIMIT_NOFILE hard limit %ld < %ld needed for %d connections\n",
                have, need, NCLIENTS);
        return 77;
    }
    check_phase("listen");
    listen_fd = tcp_listener(&srv_addr, 4096);

    check_phase("echo");
    uint64_t t0 = weft_now_ns();
    in_uthread(run_all, NULL);
    uint64_t t1 = weft_now_ns();
    io_check_poller();
    CHECK(atomic_load(&clients_done) == NCLIENTS, "%d of %d clients done",
          atomic_load(&clients_done), NCLIENTS);
    CHECK(atomic_load(&handlers_done) == NCLIENTS, "%d of %d handlers done",
          atomic_load(&handlers_done), NCLIENTS);
    CHECK(atomic_load(&server_bytes) == atomic_load(&client_bytes),
          "server echoed %ld bytes, clients sent %ld", atomic_load(&server_bytes),
          atomic_load(&client_bytes));
    CHECK(weft_close(listen_fd) == 0, "close: %s", strerror(IOERR));
    fprintf(stderr, "io_echo: ok (%d vcores, %s, %d clients, %ld bytes each way, %.0f ms)\n",
            weft_num_vcores(), weft_poller_name(), NCLIENTS, atomic_load(&client_bytes),
            (double)(t1 - t0) / 1e6);
    weft_shutdown();
    return 0;
}
