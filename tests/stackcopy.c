/*
 * stackcopy.c — stack-copy uthreads (WEFT_STACK_COPY): their stacks survive
 * every way of switching out, on any vcore, and every blocking call works
 * from them.
 *
 *  1. recursion: uthreads recurse 1 KiB frames deep, switching out at every
 *     depth (yield, sleep, park, a contended mutex, a semaphore), and check
 *     every frame's bytes and a pointer to a local after each switch and on
 *     the way back up; a copy of a stack larger than 1 MiB too;
 *  2. every blocking primitive used from stack-copy uthreads, results
 *     checked: mutex (stack-copy and ordinary uthreads contending on one),
 *     timed mutex, condition variable (and a timed wait that times out),
 *     semaphore, barrier, rwlock, futex, wait group, park, sleep, join (both
 *     ways), detached, I/O on sockets and pipes with buffers on the stack
 *     (read, write, readv, writev, recv, send, poll_fd, accept, connect),
 *     regular files (open, pread, pwrite, fsync: offloaded or through the
 *     ring), weft_offload;
 *  3. migration: a stack-copy uthread parks on vcore 0 and is resumed on
 *     vcore 1 (2+ vcores), its frames intact;
 *  4. preemption: CPU-bound stack-copy uthreads are switched out by the
 *     notification signal (a signal frame on the run stack goes out and
 *     comes back with the copy) and keep their stacks;
 *  5. the counters: copies were made and sized like the stacks.
 * The stack objects that others touch (mutexes, queues, ...) are statics:
 * that is the rule for stack-copy uthreads (weft.h). stackcopy_misuse.c
 * checks what happens when it is broken.
 */
#include "check.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <weft/event.h>
#include <weft/io.h>
#include <weft/sync.h>

static weft_t spawn_copy(void *(*fn)(void *), void *arg, const char *name)
{
    return spawn_ex(fn, arg, WEFT_STACK_COPY, 0, name);
}

/* ---- 1. recursion -------------------------------------------------------------- */

#define FRAME 1024
static weft_mutex_t rec_mutex = WEFT_MUTEX_INIT;
static weft_sem_t rec_sem = WEFT_SEM_INIT(1);

/* block() switches the caller out one of five ways, by depth. */
static void block(int how)
{
    switch (how % 5) {
    case 0:
        weft_yield();
        break;
    case 1:
        CHECK_RC(weft_sleep_ns(20000), 0);
        break;
    case 2:
        CHECK_RC(weft_unpark(weft_self()), 0); /* a token: the park returns at once... */
        CHECK_RC(weft_park(), 0);
        weft_yield();                          /* ...so switch out for sure as well */
        break;
    case 3:
        CHECK_RC(weft_mutex_lock(&rec_mutex), 0);
        weft_yield();                          /* holding it: others queue behind */
        CHECK_RC(weft_mutex_unlock(&rec_mutex), 0);
        break;
    default:
        CHECK_RC(weft_sem_wait(&rec_sem), 0);
        weft_yield();
        CHECK_RC(weft_sem_post(&rec_sem), 0);
        break;
    }
}

static void fill(volatile unsigned char *f, int depth, unsigned seed)
{
    for (int i = 0; i < FRAME; i++)
        f[i] = (unsigned char)(depth * 31 + i * 7 + seed);
}

static void verify(volatile unsigned char *f, int depth, unsigned seed, const char *when)
{
    for (int i = 0; i < FRAME; i++)
        CHECK(f[i] == (unsigned char)(depth * 31 + i * 7 + seed),
              "frame at depth %d (seed %u) changed at byte %d %s", depth, seed, i, when);
}

static __attribute__((noinline)) long recurse(int depth, int max, unsigned seed)
{
    volatile unsigned char frame[FRAME];
    volatile unsigned char *self = frame; /* a pointer to a local, kept in a local */
    fill(frame, depth, seed);
    block(depth + (int)seed);
    verify(self, depth, seed, "after switching out at this depth");
    long below = depth < max ? recurse(depth + 1, max, seed) : 0;
    verify(frame, depth, seed, "after the deeper frames returned");
    CHECK(self == frame, "a pointer to a local moved: %p vs %p", (void *)self, (void *)frame);
    return below + frame[depth % FRAME];
}

struct rec_arg {
    int max;
    unsigned seed;
    long want;
};

static void *recurser(void *arg)
{
    struct rec_arg *a = arg;
    long got = recurse(0, a->max, a->seed);
    CHECK(got == a->want, "recursion sum %ld, want %ld", got, a->want);
    return (void *)1;
}

static long rec_want(int max, unsigned seed)
{
    long s = 0;
    for (int d = 0; d <= max; d++)
        s += (unsigned char)(d * 31 + (d % FRAME) * 7 + seed);
    return s;
}

/* big_then_park(): uses about 1.5 MiB of stack, then switches out there. */
static __attribute__((noinline)) unsigned big_frame(unsigned seed)
{
    volatile unsigned char big[1536 * 1024];
    for (size_t i = 0; i < sizeof big; i += 512)
        big[i] = (unsigned char)(i / 512 + seed);
    CHECK_RC(weft_sleep_ns(100000), 0);
    weft_yield();
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof big; i += 512) {
        CHECK(big[i] == (unsigned char)(i / 512 + seed), "1.5 MiB frame changed at %zu", i);
        sum += big[i];
    }
    return sum;
}

static void *big_user(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    return (void *)(uintptr_t)big_frame(seed);
}

static void test_recursion(void)
{
    check_phase("recursion");
    enum { K = 6 };
    static struct rec_arg args[K];
    weft_t t[K];
    int max = SCALE(120, 40);
    for (int i = 0; i < K; i++) {
        args[i] = (struct rec_arg){ .max = max, .seed = (unsigned)i * 13u + 1u };
        args[i].want = rec_want(max, args[i].seed);
        t[i] = spawn_copy(recurser, &args[i], "recurser");
    }
    for (int i = 0; i < K; i++)
        CHECK(join(t[i]) == (void *)1, "recurser %d", i);

    check_phase("a 1.5 MiB stack copied");
    weft_t b1 = spawn_copy(big_user, (void *)3, "big1");
    weft_t b2 = spawn_copy(big_user, (void *)5, "big2");
    unsigned want1 = 0, want2 = 0;
    for (size_t i = 0; i < 1536 * 1024; i += 512) {
        want1 += (unsigned char)(i / 512 + 3);
        want2 += (unsigned char)(i / 512 + 5);
    }
    CHECK(join(b1) == (void *)(uintptr_t)want1, "big1 sum");
    CHECK(join(b2) == (void *)(uintptr_t)want2, "big2 sum");
}

/* ---- 2. blocking primitives ------------------------------------------------------ */

/* Mutex, stack-copy and ordinary uthreads contending. */
static weft_mutex_t mx = WEFT_MUTEX_INIT;
static long mx_count;
static atomic_int mx_inside;

static void *mx_worker(void *arg)
{
    int n = (int)(uintptr_t)arg;
    for (int i = 0; i < n; i++) {
        CHECK_RC(weft_mutex_lock(&mx), 0);
        CHECK(atomic_fetch_add(&mx_inside, 1) == 0, "two holders of one mutex");
        long c = mx_count;
        if (i % 16 == 0)
            weft_yield(); /* switch out holding it */
        mx_count = c + 1;
        atomic_fetch_sub(&mx_inside, 1);
        CHECK_RC(weft_mutex_unlock(&mx), 0);
    }
    return NULL;
}

/* Condition variable: a bounded queue, producers and consumers. */
static weft_mutex_t q_m = WEFT_MUTEX_INIT;
static weft_cond_t q_notempty = WEFT_COND_INIT, q_notfull = WEFT_COND_INIT;
static int q_buf[4], q_head, q_len;
static long q_sum;

static void *producer(void *arg)
{
    int base = (int)(uintptr_t)arg;
    for (int i = 1; i <= 500; i++) {
        CHECK_RC(weft_mutex_lock(&q_m), 0);
        while (q_len == 4)
            CHECK_RC(weft_cond_wait(&q_notfull, &q_m), 0);
        q_buf[(q_head + q_len++) % 4] = base + i;
        CHECK_RC(weft_cond_signal(&q_notempty), 0);
        CHECK_RC(weft_mutex_unlock(&q_m), 0);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    int n = (int)(uintptr_t)arg;
    long local = 0;
    for (int i = 0; i < n; i++) {
        CHECK_RC(weft_mutex_lock(&q_m), 0);
        while (q_len == 0)
            CHECK_RC(weft_cond_wait(&q_notempty, &q_m), 0);
        local += q_buf[q_head];
        q_head = (q_head + 1) % 4;
        q_len--;
        CHECK_RC(weft_cond_signal(&q_notfull), 0);
        CHECK_RC(weft_mutex_unlock(&q_m), 0);
    }
    CHECK_RC(weft_mutex_lock(&q_m), 0);
    q_sum += local;
    CHECK_RC(weft_mutex_unlock(&q_m), 0);
    return NULL;
}

/* Timed waits that time out: the deadline's alarm is in the uthread. */
static weft_mutex_t held_mx = WEFT_MUTEX_INIT;
static weft_cond_t never = WEFT_COND_INIT;
static void *timeouts(void *unused)
{
    (void)unused;
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_mutex_timedlock(&held_mx, t0 + MS(3)), ETIMEDOUT);
    CHECK(weft_now_ns() - t0 >= MS(3), "timedlock returned early");
    static weft_mutex_t m = WEFT_MUTEX_INIT;
    CHECK_RC(weft_mutex_lock(&m), 0);
    t0 = weft_now_ns();
    CHECK_RC(weft_cond_timedwait(&never, &m, t0 + MS(3)), ETIMEDOUT);
    CHECK(weft_now_ns() - t0 >= MS(3), "cond_timedwait returned early");
    CHECK_RC(weft_mutex_unlock(&m), 0);
    static weft_sem_t empty = WEFT_SEM_INIT(0);
    CHECK_RC(weft_sem_timedwait(&empty, weft_now_ns() + MS(2)), ETIMEDOUT);
    return (void *)1;
}

/* Semaphore ping-pong. */
static weft_sem_t ping = WEFT_SEM_INIT(0), pong = WEFT_SEM_INIT(0);
static void *pinger(void *arg)
{
    int n = (int)(uintptr_t)arg;
    for (int i = 0; i < n; i++) {
        CHECK_RC(weft_sem_post(&ping), 0);
        CHECK_RC(weft_sem_wait(&pong), 0);
    }
    return NULL;
}
static void *ponger(void *arg)
{
    int n = (int)(uintptr_t)arg;
    for (int i = 0; i < n; i++) {
        CHECK_RC(weft_sem_wait(&ping), 0);
        CHECK_RC(weft_sem_post(&pong), 0);
    }
    return NULL;
}

/* Barrier: every member sees every round complete. */
#define BAR_N 4
static weft_barrier_t bar;
static atomic_int bar_arrived[50];
static atomic_int bar_serial;
static void *bar_member(void *unused)
{
    (void)unused;
    for (int r = 0; r < 50; r++) {
        atomic_fetch_add(&bar_arrived[r], 1);
        int rc = weft_barrier_wait(&bar);
        CHECK(rc == 0 || rc == WEFT_BARRIER_SERIAL, "barrier_wait returned %d", rc);
        if (rc == WEFT_BARRIER_SERIAL)
            atomic_fetch_add(&bar_serial, 1);
        CHECK(atomic_load(&bar_arrived[r]) == BAR_N, "round %d passed with %d arrived", r,
              atomic_load(&bar_arrived[r]));
    }
    return NULL;
}

/* rwlock: readers never see a half-done write. */
static weft_rwlock_t rw = WEFT_RWLOCK_INIT;
static long rw_a, rw_b;
static void *rw_writer(void *unused)
{
    (void)unused;
    for (int i = 0; i < 300; i++) {
        CHECK_RC(weft_rwlock_wrlock(&rw), 0);
        rw_a++;
        weft_yield();
        rw_b++;
        CHECK_RC(weft_rwlock_unlock(&rw), 0);
    }
    return NULL;
}
static void *rw_reader(void *unused)
{
    (void)unused;
    for (int i = 0; i < 300; i++) {
        CHECK_RC(weft_rwlock_rdlock(&rw), 0);
        long a = rw_a;
        weft_yield();
        CHECK(rw_b == a && rw_a == a, "reader saw a=%ld b=%ld", rw_a, rw_b);
        CHECK_RC(weft_rwlock_unlock(&rw), 0);
    }
    return NULL;
}

/* futex: a waiter on a static word. */
static uint32_t fx_word;
static void *fx_waiter(void *unused)
{
    (void)unused;
    while (__atomic_load_n(&fx_word, __ATOMIC_ACQUIRE) == 0) {
        int rc = weft_futex_wait(&fx_word, 0, WEFT_FOREVER);
        CHECK(rc == 0 || rc == EAGAIN, "futex_wait returned %d", rc);
    }
    return (void *)(uintptr_t)__atomic_load_n(&fx_word, __ATOMIC_ACQUIRE);
}

/* Wait group and detached children. */
static weft_wg_t wg = WEFT_WG_INIT;
static atomic_int wg_done_count;
static void *wg_child(void *unused)
{
    (void)unused;
    CHECK_RC(weft_sleep_ns(50000), 0);
    atomic_fetch_add(&wg_done_count, 1);
    CHECK_RC(weft_wg_done(&wg), 0);
    return NULL;
}
static void *wg_parent(void *unused)
{
    (void)unused;
    CHECK_RC(weft_wg_add(&wg, 20), 0);
    for (int i = 0; i < 20; i++)
        spawn_ex(wg_child, NULL, WEFT_STACK_COPY | WEFT_DETACHED, 0, "wg-child");
    CHECK_RC(weft_wg_wait(&wg), 0);
    CHECK(atomic_load(&wg_done_count) == 20, "wg_wait returned with %d done",
          atomic_load(&wg_done_count));
    return (void *)1;
}

/* park / unpark between two stack-copy uthreads. */
static _Atomic(weft_t) pk_a, pk_b;
static atomic_int pk_turn;
static void *pk_side(void *arg)
{
    int me = (int)(uintptr_t)arg;
    _Atomic(weft_t) *other = me ? &pk_a : &pk_b;
    for (int i = 0; i < 1000; i++) {
        while (atomic_load(&pk_turn) != me)
            CHECK_RC(weft_park(), 0);
        atomic_store(&pk_turn, !me);
        weft_t o;
        while (!(o = atomic_load(other)))
            weft_yield();
        CHECK_RC(weft_unpark(o), 0);
    }
    return NULL;
}
static void *pk_start(void *arg)
{
    atomic_store((int)(uintptr_t)arg ? &pk_b : &pk_a, weft_self());
    return pk_side(arg);
}

/* join both ways. */
static void *child_value(void *arg)
{
    CHECK_RC(weft_sleep_ns(10000), 0);
    return (void *)((uintptr_t)arg * 3);
}
static void *joiner(void *unused)
{
    (void)unused;
    weft_t a = spawn_copy(child_value, (void *)7, "copy-child");
    weft_t b = spawn_ex(child_value, (void *)9, 0, 0, "plain-child");
    CHECK(join(a) == (void *)21, "stack-copy child's result");
    CHECK(join(b) == (void *)27, "ordinary child's result");
    return (void *)1;
}

/* I/O: socket pairs and a pipe, buffers on the stack. */
static int sp[2], pp[2];
static void *io_writer(void *unused)
{
    (void)unused;
    char buf[3000];
    for (int r = 0; r < 20; r++) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (char)(r + i);
        CHECK(weft_write(sp[0], buf, sizeof buf) == (ssize_t)sizeof buf, "write");
        char a[100], b[200];
        memset(a, r, sizeof a);
        memset(b, r + 1, sizeof b);
        struct iovec iov[2] = { { a, sizeof a }, { b, sizeof b } };
        CHECK(weft_writev(sp[0], iov, 2) == 300, "writev");
        CHECK(weft_send(sp[0], "x", 1, 0) == 1, "send");
        CHECK(weft_write(pp[1], &r, sizeof r) == (ssize_t)sizeof r, "pipe write");
        CHECK_RC(weft_sleep_ns(20000), 0); /* the reader parks meanwhile */
    }
    return NULL;
}
static size_t read_full(int fd, char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = weft_read(fd, p + got, n - got);
        CHECK(k > 0, "read returned %zd (%s)", k, strerror(errno));
        got += (size_t)k;
    }
    return got;
}
static void *io_reader(void *unused)
{
    (void)unused;
    for (int r = 0; r < 20; r++) {
        char buf[3000];
        read_full(sp[1], buf, sizeof buf);
        for (size_t i = 0; i < sizeof buf; i++)
            CHECK(buf[i] == (char)(r + i), "round %d byte %zu", r, i);
        char a[100], b[200];
        struct iovec iov[2] = { { a, sizeof a }, { b, sizeof b } };
        size_t got = 0;
        while (got < 300) {
            ssize_t k = weft_readv(sp[1], iov, 2);
            CHECK(k > 0, "readv");
            got += (size_t)k; /* both iovecs fill in one go here: 300 bytes were sent together */
            CHECK(got == 300, "readv short: %zu", got);
        }
        CHECK(a[0] == (char)r && a[99] == (char)r && b[0] == (char)(r + 1) && b[199] == (char)(r + 1),
              "readv contents");
        char x;
        CHECK(weft_recv(sp[1], &x, 1, 0) == 1 && x == 'x', "recv");
        CHECK(weft_poll_fd(pp[0], POLLIN, -1) > 0, "poll_fd");
        int v = -1;
        CHECK(weft_read(pp[0], &v, sizeof v) == (ssize_t)sizeof v && v == r, "pipe read %d", v);
    }
    return (void *)1;
}

/* TCP over loopback: a stack-copy server and client. */
static int listen_fd;
static uint16_t listen_port;
static void *tcp_server(void *unused)
{
    (void)unused;
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    int c = weft_accept(listen_fd, (struct sockaddr *)&peer, &len);
    CHECK(c >= 0, "accept: %s", strerror(errno));
    char line[64];
    ssize_t n = weft_recv(c, line, sizeof line, 0);
    CHECK(n == 5 && memcmp(line, "hello", 5) == 0, "server got %zd bytes", n);
    CHECK(weft_send(c, "world", 5, 0) == 5, "send");
    CHECK_RC(weft_close(c), 0);
    return (void *)1;
}
static void *tcp_client(void *unused)
{
    (void)unused;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0, "socket");
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(listen_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK_RC(weft_connect(c, (struct sockaddr *)&a, sizeof a), 0);
    CHECK(weft_send(c, "hello", 5, 0) == 5, "send");
    char buf[16];
    CHECK(weft_recv(c, buf, sizeof buf, MSG_WAITALL) == 5 && memcmp(buf, "world", 5) == 0, "recv");
    CHECK_RC(weft_close(c), 0);
    return (void *)1;
}

/* Regular files: stack buffers and path, offloaded or through the ring. */
static void *file_user(void *unused)
{
    (void)unused;
    char path[64];
    snprintf(path, sizeof path, "/tmp/weft-stackcopy-%d", (int)getpid());
    int fd = weft_open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "weft_open: %s", strerror(errno));
    char out[8192], in[8192];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (char)(i * 13);
    CHECK(weft_pwrite(fd, out, sizeof out, 100) == (ssize_t)sizeof out, "pwrite");
    CHECK_RC(weft_fsync(fd), 0);
    memset(in, 0, sizeof in);
    CHECK(weft_pread(fd, in, sizeof in, 100) == (ssize_t)sizeof in, "pread");
    CHECK(memcmp(in, out, sizeof in) == 0, "pread returned other bytes");
    /* sendfile from it into a socket pair whose far end another uthread
     * reads; the offset lives on this stack. */
    int s2[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s2) == 0, "socketpair");
    off_t off = 100;
    size_t sent = 0;
    while (sent < sizeof out) {
        ssize_t k = weft_sendfile(s2[0], fd, &off, sizeof out - sent);
        CHECK(k > 0, "sendfile: %s", strerror(errno));
        sent += (size_t)k;
        size_t got = 0;
        while (got < (size_t)k) {
            ssize_t r = weft_read(s2[1], in + sent - (size_t)k + got, (size_t)k - got);
            CHECK(r > 0, "read after sendfile");
            got += (size_t)r;
        }
    }
    CHECK(off == (off_t)(100 + sizeof out) && memcmp(in, out, sizeof in) == 0, "sendfile bytes");
    weft_close(s2[0]);
    weft_close(s2[1]);
    CHECK_RC(weft_close(fd), 0);
    unlink(path);
    return (void *)1;
}

/* Several descriptors at once (weft_poll, weft_epoll_wait), the arrays on
 * the waiter's stack. */
static int pa[2], pb[2];
static atomic_int b_read; /* the waiter has consumed 'b': 'a' may follow */
static void *multi_waiter(void *unused)
{
    (void)unused;
    struct pollfd fds[2] = { { .fd = pa[0], .events = POLLIN }, { .fd = pb[0], .events = POLLIN } };
    int n = weft_poll(fds, 2, -1);
    CHECK(n == 1 && !(fds[0].revents & POLLIN) && (fds[1].revents & POLLIN),
          "weft_poll: %d ready, revents %#x %#x", n, fds[0].revents, fds[1].revents);
    char c;
    CHECK(weft_read(pb[0], &c, 1) == 1 && c == 'b', "read after poll");
    atomic_store(&b_read, 1);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    struct epoll_event e = { .events = EPOLLIN, .data.u32 = 7 };
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pa[0], &e) == 0, "epoll_ctl");
    struct epoll_event got[4];
    n = weft_epoll_wait(ep, got, 4, -1);
    CHECK(n == 1 && got[0].data.u32 == 7, "weft_epoll_wait: %d events", n);
    CHECK(weft_read(pa[0], &c, 1) == 1 && c == 'a', "read after epoll_wait");
    weft_close(ep);
    return (void *)1;
}
static void *multi_writer(void *unused)
{
    (void)unused;
    CHECK_RC(weft_sleep_ns(MS(2)), 0);
    CHECK(weft_write(pb[1], "b", 1) == 1, "write b");
    /* 'a' only once the poll has returned: a waiter slow to run (a loaded
     * machine, ASan) would otherwise see both ready. */
    while (!atomic_load(&b_read))
        CHECK_RC(weft_sleep_ns(MS(1)), 0);
    CHECK_RC(weft_sleep_ns(MS(2)), 0);
    CHECK(weft_write(pa[1], "a", 1) == 1, "write a");
    return NULL;
}

/* weft_offload with its argument in a static, as weft.h asks. */
static void *square(void *arg)
{
    uintptr_t v = *(uintptr_t *)arg;
    return (void *)(v * v);
}
static uintptr_t offload_arg = 12;
static void *offloader(void *unused)
{
    (void)unused;
    void *r = NULL;
    CHECK_RC(weft_offload(square, &offload_arg, &r), 0);
    CHECK(r == (void *)144, "offload result %p", r);
    return (void *)1;
}

static void test_primitives(void)
{
    int nv = weft_num_vcores();
    check_phase("mutex, stack-copy and ordinary uthreads on one");
    {
        enum { W = 8, ITERS = 2000 };
        weft_t t[W];
        for (int i = 0; i < W; i++)
            t[i] = spawn_ex(mx_worker, (void *)(uintptr_t)ITERS, (i & 1) ? WEFT_STACK_COPY : 0, 0,
                            "mx");
        for (int i = 0; i < W; i++)
            join(t[i]);
        CHECK(mx_count == (long)W * ITERS, "mutex count %ld, want %d", mx_count, W * ITERS);
    }
    check_phase("timed waits");
    CHECK_RC(weft_mutex_lock(&held_mx), 0); /* main holds it: the timed lock times out */
    CHECK(join(spawn_copy(timeouts, NULL, "timeouts")) == (void *)1, "timeouts");
    CHECK_RC(weft_mutex_unlock(&held_mx), 0);

    check_phase("condition variable");
    {
        weft_t p[3], c[2];
        for (int i = 0; i < 3; i++)
            p[i] = spawn_copy(producer, (void *)(uintptr_t)(i * 1000), "producer");
        c[0] = spawn_copy(consumer, (void *)(uintptr_t)700, "consumer");
        c[1] = spawn_copy(consumer, (void *)(uintptr_t)800, "consumer");
        for (int i = 0; i < 3; i++)
            join(p[i]);
        join(c[0]);
        join(c[1]);
        long want = 0;
        for (int i = 0; i < 3; i++)
            for (int k = 1; k <= 500; k++)
                want += i * 1000 + k;
        CHECK(q_sum == want, "consumed sum %ld, want %ld", q_sum, want);
    }
    check_phase("semaphore");
    {
        weft_t a = spawn_copy(pinger, (void *)2000, "pinger");
        weft_t b = spawn_copy(ponger, (void *)2000, "ponger");
        join(a);
        join(b);
        CHECK(weft_sem_value(&ping) == 0 && weft_sem_value(&pong) == 0, "semaphores not back at 0");
    }
    check_phase("barrier");
    {
        CHECK_RC(weft_barrier_init(&bar, BAR_N), 0);
        weft_t t[BAR_N];
        for (int i = 0; i < BAR_N; i++)
            t[i] = spawn_copy(bar_member, NULL, "barrier");
        for (int i = 0; i < BAR_N; i++)
            join(t[i]);
        CHECK(atomic_load(&bar_serial) == 50, "%d serial waiters over 50 rounds",
              atomic_load(&bar_serial));
        CHECK_RC(weft_barrier_destroy(&bar), 0);
    }
    check_phase("rwlock");
    {
        weft_t t[4];
        t[0] = spawn_copy(rw_writer, NULL, "writer");
        t[1] = spawn_copy(rw_writer, NULL, "writer");
        t[2] = spawn_copy(rw_reader, NULL, "reader");
        t[3] = spawn_copy(rw_reader, NULL, "reader");
        for (int i = 0; i < 4; i++)
            join(t[i]);
        CHECK(rw_a == 600 && rw_b == 600, "rwlock counts %ld %ld", rw_a, rw_b);
    }
    check_phase("futex");
    {
        weft_t t = spawn_copy(fx_waiter, NULL, "futex");
        CHECK_RC(weft_sleep_ns(MS(2)), 0);
        __atomic_store_n(&fx_word, 42, __ATOMIC_RELEASE);
        CHECK(weft_futex_wake(&fx_word, 1) >= 0, "futex_wake");
        CHECK(join(t) == (void *)42, "futex waiter saw the wrong word");
    }
    check_phase("wait group, detached children");
    CHECK(join(spawn_copy(wg_parent, NULL, "wg")) == (void *)1, "wait group");

    check_phase("park / unpark");
    {
        weft_t a = spawn_copy(pk_start, (void *)0, "park-a");
        weft_t b = spawn_copy(pk_start, (void *)1, "park-b");
        join(a);
        join(b);
    }
    check_phase("join");
    CHECK(join(spawn_copy(joiner, NULL, "joiner")) == (void *)1, "joiner");
    CHECK(join(spawn_copy(child_value, (void *)2, "joined-from-main")) == (void *)6,
          "main joins a stack-copy uthread");

    check_phase("I/O on a socket pair and a pipe");
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
    CHECK(pipe(pp) == 0, "pipe");
    {
        weft_t r = spawn_copy(io_reader, NULL, "reader");
        weft_t w = spawn_copy(io_writer, NULL, "writer");
        join(w);
        CHECK(join(r) == (void *)1, "reader");
    }
    weft_close(sp[0]);
    weft_close(sp[1]);
    weft_close(pp[0]);
    weft_close(pp[1]);

    check_phase("TCP over loopback");
    {
        listen_fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(listen_fd >= 0, "socket");
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(bind(listen_fd, (struct sockaddr *)&a, sizeof a) == 0, "bind");
        socklen_t len = sizeof a;
        CHECK(getsockname(listen_fd, (struct sockaddr *)&a, &len) == 0, "getsockname");
        listen_port = ntohs(a.sin_port);
        CHECK(listen(listen_fd, 8) == 0, "listen");
        weft_t s = spawn_copy(tcp_server, NULL, "server");
        weft_t c = spawn_copy(tcp_client, NULL, "client");
        CHECK(join(c) == (void *)1, "client");
        CHECK(join(s) == (void *)1, "server");
        weft_close(listen_fd);
    }
    check_phase("poll and epoll_wait on several descriptors");
    CHECK(pipe(pa) == 0 && pipe(pb) == 0, "pipes");
    {
        weft_t w = spawn_copy(multi_waiter, NULL, "multi");
        weft_t x = spawn_copy(multi_writer, NULL, "writer");
        join(x);
        CHECK(join(w) == (void *)1, "multi waiter");
    }
    weft_close(pa[0]);
    weft_close(pa[1]);
    weft_close(pb[0]);
    weft_close(pb[1]);
    check_phase("regular files");
    CHECK(join(spawn_copy(file_user, NULL, "files")) == (void *)1, "files");
    check_phase("offload");
    CHECK(join(spawn_copy(offloader, NULL, "offload")) == (void *)1, "offload");
    (void)nv;
}

/* ---- 2b. joined before it ran: run inline, on the joiner's stack ------------------ */

static _Atomic(uintptr_t) child_local_at;
static atomic_int inline_runs; /* quick children that ran on their joiner's stack */
static _Atomic(weft_t) child_self;
static weft_key_t quick_key;
static atomic_int quick_dtors; /* quick_key's destructor calls */

static void quick_dtor(void *v)
{
    CHECK(v == (void *)&quick_key, "quick_key's destructor got %p", v);
    atomic_fetch_add(&quick_dtors, 1);
}

/* no_sanitize_address: ASan would keep the locals whose addresses are
 * compared below in its heap-allocated fake stack. */
__attribute__((no_sanitize_address)) static void *quick_child(void *arg)
{
    volatile int here = 1;
    atomic_store(&child_local_at, (uintptr_t)&here);
    atomic_store(&child_self, weft_self());
    errno = 77; /* its own errno, not the joiner's */
    CHECK_RC(weft_key_setspecific(quick_key, &quick_key), 0); /* its destructor runs at exit */
    return (void *)((uintptr_t)arg + (uintptr_t)here);
}

static void *blocking_child(void *arg)
{
    volatile unsigned char mine[512];
    for (int i = 0; i < 512; i++)
        mine[i] = (unsigned char)(i + (int)(uintptr_t)arg);
    for (int r = 0; r < 20; r++) { /* switches out, may move to another vcore */
        CHECK_RC(weft_sleep_ns(20000), 0);
        weft_yield();
        for (int i = 0; i < 512; i++)
            CHECK(mine[i] == (unsigned char)(i + (int)(uintptr_t)arg), "inline child's frame");
    }
    if ((uintptr_t)arg == 9)
        weft_exit((void *)99); /* weft_exit from an inline child returns to its joiner too */
    return (void *)((uintptr_t)arg * 2);
}

__attribute__((no_sanitize_address)) static void *inline_joiner(void *unused)
{
    (void)unused;
    volatile int mine = 5;
    weft_attr_t a = { .flags = WEFT_STACK_COPY };
    int dtors0 = atomic_load(&quick_dtors);
    for (int i = 0; i < 200; i++) {
        weft_t t;
        CHECK_RC(weft_spawn(&t, &a, quick_child, (void *)(uintptr_t)i), 0);
        errno = 11;
        void *r = NULL;
        CHECK_RC(weft_join(t, &r), 0);
        int e = errno_now(); /* the join may have moved us (if t was not run inline) */
        CHECK(e == 11, "the joiner's errno became %d", e);
        CHECK(r == (void *)(uintptr_t)(i + 1), "quick child %d returned %p", i, r);
        CHECK(atomic_load(&child_self) == t, "weft_self() in the child was not the child");
        CHECK(atomic_load(&quick_dtors) == dtors0 + i + 1,
              "quick child %d's key destructor did not run before its join returned", i);
        /* Just below the joiner's frames if it ran inline (the pointers
         * are only compared, never used); else another vcore ran it. */
        uintptr_t here = (uintptr_t)&mine, child = atomic_load(&child_local_at);
        if (child < here && here - child < 64 * 1024)
            atomic_fetch_add(&inline_runs, 1);
    }
    CHECK(weft_self() != atomic_load(&child_self), "weft_self() after the join");
    for (int i = 0; i < 10; i++) {
        weft_t t;
        CHECK_RC(weft_spawn(&t, &a, blocking_child, (void *)(uintptr_t)i), 0);
        void *r = NULL;
        CHECK_RC(weft_join(t, &r), 0);
        CHECK(r == (void *)(uintptr_t)(i == 9 ? 99 : i * 2), "blocking child %d returned %p", i, r);
        CHECK(mine == 5, "the joiner's frame changed");
    }
    return (void *)1;
}

static void test_inline_join(void)
{
    check_phase("inline join, ordinary joiner");
    CHECK_RC(weft_key_create(&quick_key, quick_dtor), 0);
    atomic_store(&inline_runs, 0);
    weft_t j = spawn_ex(inline_joiner, NULL, WEFT_STACK_OWN, 0, "joiner");
    CHECK(join(j) == (void *)1, "ordinary joiner");
    /* With one vcore nobody else can run a quick child before its join:
     * every one runs inline. With more, another vcore may steal one first
     * (under qemu's slow emulation, often): at least one still does. */
    int runs = atomic_load(&inline_runs);
    if (weft_num_vcores() == 1)
        CHECK(runs == 200, "%d of 200 quick children ran on their joiner's stack", runs);
    else
        CHECK(runs > 0, "no quick child of 200 ran on its joiner's stack");
    fprintf(stderr, "  %d of 200 quick children ran inline\n", runs);
    check_phase("inline join, stack-copy joiner");
    CHECK(join(spawn_copy(inline_joiner, NULL, "copy-joiner")) != NULL, "stack-copy joiner");
}

/* ---- 3. migration --------------------------------------------------------------- */

static atomic_int mig_parked, mig_stop;
static _Atomic(weft_t) mig_t;
static atomic_int mig_vcore_before, mig_vcore_after;

static __attribute__((noinline)) int mig_deep(int depth)
{
    volatile int local[64];
    for (int i = 0; i < 64; i++)
        local[i] = depth * 100 + i;
    int r;
    if (depth == 0) {
        atomic_store(&mig_vcore_before, weft_vcore_id());
        atomic_store(&mig_parked, 1);
        while (atomic_load(&mig_parked) == 1)
            CHECK_RC(weft_park(), 0);
        atomic_store(&mig_vcore_after, weft_vcore_id());
        r = 0;
    } else {
        r = mig_deep(depth - 1);
    }
    for (int i = 0; i < 64; i++)
        CHECK(local[i] == depth * 100 + i, "migrated frame at depth %d changed", depth);
    return r + local[7];
}

static void *migrant(void *unused)
{
    (void)unused;
    atomic_store(&mig_t, weft_self());
    int sum = mig_deep(10);
    int want = 0;
    for (int d = 0; d <= 10; d++)
        want += d * 100 + 7;
    CHECK(sum == want, "migrant's sum %d, want %d", sum, want);
    return (void *)1;
}

/* hog keeps the migrant's vcore busy with an ordinary uthread (which it
 * runs only once the migrant has switched out and let go of its run stack). */
static atomic_int hog_runs;
static void *hog(void *unused)
{
    (void)unused;
    atomic_store(&hog_runs, 1);
    while (!atomic_load(&mig_stop))
        ;
    return NULL;
}

static void *waker(void *unused)
{
    (void)unused;
    WAIT_UNTIL(atomic_load(&mig_parked) == 1, "the migrant parks");
    WAIT_UNTIL(atomic_load(&hog_runs), "the hog runs where the migrant parked");
    atomic_store(&mig_parked, 2);
    CHECK_RC(weft_unpark(atomic_load(&mig_t)), 0);
    return NULL;
}

static void test_migration(void)
{
    if (weft_num_vcores() < 2)
        return;
    check_phase("migration while parked");
    weft_t m = spawn_ex(migrant, NULL, WEFT_STACK_COPY | WEFT_ON_VCORE, 0, "migrant");
    WAIT_UNTIL(atomic_load(&mig_parked) == 1, "the migrant parks");
    /* Its vcore is kept busy by an ordinary uthread (which lets go of the
     * run stack); a uthread on another vcore wakes it there. */
    int before = atomic_load(&mig_vcore_before), other = (before + 1) % weft_num_vcores();
    weft_t h = spawn_ex(hog, NULL, WEFT_PINNED, before, "hog");
    weft_t w = spawn_ex(waker, NULL, WEFT_PINNED, other, "waker");
    join(w);
    CHECK(join(m) == (void *)1, "migrant");
    atomic_store(&mig_stop, 1);
    join(h);
    CHECK(atomic_load(&mig_vcore_after) == other, "the migrant parked on vcore %d resumed on "
          "vcore %d, not %d", before, atomic_load(&mig_vcore_after), other);
}

/* ---- 4. preemption ---------------------------------------------------------------- */

static atomic_int spin_stop, spin_running;
static void *spinner(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    volatile unsigned vals[256];
    for (int i = 0; i < 256; i++)
        vals[i] = seed * 1000u + (unsigned)i;
    atomic_fetch_add(&spin_running, 1);
    uint64_t rounds = 0;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
        for (int i = 0; i < 256; i++)
            CHECK(vals[i] == seed * 1000u + (unsigned)i, "spinner %u: slot %d changed", seed, i);
        rounds++;
    }
    return (void *)(uintptr_t)rounds;
}

static uint64_t sum_stat(size_t off)
{
    uint64_t s = 0;
    for (int v = 0; v < weft_num_vcores(); v++) {
        struct weft_vcore_stats st;
        CHECK_RC(weft_stats(v, &st), 0);
        s += *(uint64_t *)(void *)((char *)&st + off);
    }
    return s;
}

static void test_preemption(void)
{
    if (TEST_TSAN)
        return; /* notifications never switch under TSan (event.h) */
    check_phase("preemption of stack-copy uthreads");
    CHECK_RC(weft_set_preempt_period(1000), 0);
    uint64_t taken0 = sum_stat(offsetof(struct weft_vcore_stats, preempt_taken));
    int k = weft_num_vcores() + 2;
    weft_t t[16];
    for (int i = 0; i < k; i++)
        t[i] = spawn_copy(spinner, (void *)(uintptr_t)(i + 1), "spinner");
    /* Every spinner runs (so the others were switched out for it), and
     * they are preempted a few dozen times more. */
    WAIT_UNTIL(atomic_load(&spin_running) == k, "every spinner runs");
    uint64_t taken1 = sum_stat(offsetof(struct weft_vcore_stats, preempt_taken));
    uint64_t end = weft_now_ns() + MS(SCALE(300, 900));
    while (weft_now_ns() < end &&
           sum_stat(offsetof(struct weft_vcore_stats, preempt_taken)) < taken1 + 30)
        usleep(1000);
    atomic_store(&spin_stop, 1);
    for (int i = 0; i < k; i++)
        CHECK(join(t[i]) != NULL, "spinner %d never finished a round", i);
    uint64_t taken = sum_stat(offsetof(struct weft_vcore_stats, preempt_taken)) - taken0;
    CHECK(taken >= 1, "no stack-copy uthread was preempted");
    CHECK_RC(weft_set_preempt_period(0), 0);
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    uint64_t copies0 = sum_stat(offsetof(struct weft_vcore_stats, stack_copies));
    test_recursion();
    test_primitives();
    test_inline_join();
    test_migration();
    test_preemption();
    uint64_t copies = sum_stat(offsetof(struct weft_vcore_stats, stack_copies)) - copies0;
    uint64_t bytes = sum_stat(offsetof(struct weft_vcore_stats, stack_copy_bytes));
    CHECK(copies > 1000, "only %llu stack copies", (unsigned long long)copies);
    CHECK(bytes > copies * 64, "%llu bytes in %llu copies", (unsigned long long)bytes,
          (unsigned long long)copies);
    printf("stackcopy: ok (%d vcores, %llu copies, %.0f bytes each on average)\n",
           weft_num_vcores(), (unsigned long long)copies, (double)bytes / (double)copies);
    weft_shutdown();
    return 0;
}
