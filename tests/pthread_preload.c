/*
 * pthread_preload — an unmodified pthread program (no weft header, plain
 * pthread_create, pthread_mutex, pthread_cond, epoll_wait, accept, read,
 * write), run under LD_PRELOAD=libweft-pthread.so and without it:
 *
 *   pthread_preload expect-weft      (preloaded)
 *   pthread_preload expect-kernel    (not)
 *
 *  1. 3 000 threads wait on one condition variable at once: under weft the
 *     process has at most vcores + 4 kernel threads (/proc/self/task)
 *     meanwhile; without it, at least 3 000;
 *  2. an event-loop-per-thread server: 2 x CPUs + 2 loops (more loops than
 *     vcores), each a thread in epoll_wait on its own epoll instance with its
 *     own listening socket on 127.0.0.1; 4 client threads per loop connect,
 *     send 20 requests each and check every reply. Every connection is
 *     served, in the same way with and without weft;
 *  3. pthread_cleanup_push/pop of the C library's header and
 *     pthread_cancel: a thread cancelled in pthread_cond_wait runs its
 *     handler (holding the mutex) and joins as PTHREAD_CANCELED.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define FAIL(...) do { fprintf(stderr, "pthread_preload: FAILED: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CHECK(c, ...) do { if (!(c)) FAIL(__VA_ARGS__); } while (0)

static int expect_weft;

static int kernel_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d, "opendir /proc/self/task");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ---- 1. many threads ---------------------------------------------------------------------- */

#define NT 3000
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int arrived, go;

static void *waiter(void *arg)
{
    pthread_mutex_lock(&m);
    arrived++;
    pthread_cond_broadcast(&c);
    while (!go)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return arg;
}

static void case_many(void)
{
    static pthread_t t[NT];
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 * 1024);
    for (long i = 0; i < NT; i++)
        CHECK(pthread_create(&t[i], &a, waiter, (void *)i) == 0, "pthread_create %ld", i);
    pthread_attr_destroy(&a);
    pthread_mutex_lock(&m);
    while (arrived < NT)
        pthread_cond_wait(&c, &m);
    int k = kernel_threads(); /* every thread is inside pthread_cond_wait */
    go = 1;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    for (long i = 0; i < NT; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0 && r == (void *)i, "join %ld", i);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr, "pthread_preload: %d threads waiting, %d kernel threads (%ld CPUs)\n", NT, k, cpus);
    if (expect_weft)
        CHECK(k <= cpus + 4, "%d kernel threads for %d pthreads: not on weft?", k, NT);
    else
        CHECK(k >= NT, "%d kernel threads for %d pthreads without weft: something interposes", k, NT);
}

/* ---- 2. event loops ----------------------------------------------------------------------- */

#define MAXLOOPS 64
#define CLIENTS 4
#define REQS 20
static int nloops;
static int lfd[MAXLOOPS];
static struct sockaddr_in laddr[MAXLOOPS];
static atomic_int served;

static void *event_loop(void *arg)
{
    long i = (long)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd[i] };
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd[i], &ev) == 0, "epoll_ctl listener");
    int open_conns = 0, accepted = 0;
    while (accepted < CLIENTS || open_conns > 0) {
        struct epoll_event out[16];
        int n = epoll_wait(ep, out, 16, 20000);
        CHECK(n > 0, "loop %ld: epoll_wait returned %d (%s)", i, n, strerror(errno));
        for (int k = 0; k < n; k++) {
            int fd = out[k].data.fd;
            if (fd == lfd[i]) {
                int s = accept4(lfd[i], NULL, NULL, SOCK_CLOEXEC);
                CHECK(s >= 0, "accept: %s", strerror(errno));
                struct epoll_event e2 = { .events = EPOLLIN, .data.fd = s };
                CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &e2) == 0, "epoll_ctl conn");
                open_conns++;
                accepted++;
                continue;
            }
            unsigned char b;
            ssize_t r = read(fd, &b, 1);
            if (r <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                open_conns--;
                continue;
            }
            b++;
            CHECK(write(fd, &b, 1) == 1, "loop write");
            atomic_fetch_add(&served, 1);
        }
    }
    close(ep);
    return NULL;
}

static void *client(void *arg)
{
    long i = (long)arg / CLIENTS;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket");
    CHECK(connect(s, (struct sockaddr *)&laddr[i], sizeof laddr[i]) == 0, "connect: %s", strerror(errno));
    for (int q = 0; q < REQS; q++) {
        unsigned char b = (unsigned char)(q * 7 + i), back = 0;
        CHECK(write(s, &b, 1) == 1, "client write");
        CHECK(read(s, &back, 1) == 1 && back == (unsigned char)(b + 1), "client read %u after %u", back, b);
    }
    close(s);
    return NULL;
}

static void case_loops(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    nloops = (int)(2 * cpus + 2);
    if (nloops > MAXLOOPS)
        nloops = MAXLOOPS;
    pthread_t lt[MAXLOOPS], ct[MAXLOOPS * CLIENTS];
    for (long i = 0; i < nloops; i++) {
        lfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(lfd[i] >= 0, "socket");
        memset(&laddr[i], 0, sizeof laddr[i]);
        laddr[i].sin_family = AF_INET;
        laddr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(lfd[i], (struct sockaddr *)&laddr[i], sizeof laddr[i]) == 0, "bind");
        CHECK(listen(lfd[i], 64) == 0, "listen");
        socklen_t len = sizeof laddr[i];
        CHECK(getsockname(lfd[i], (struct sockaddr *)&laddr[i], &len) == 0, "getsockname");
        CHECK(pthread_create(&lt[i], NULL, event_loop, (void *)i) == 0, "loop thread");
    }
    for (long k = 0; k < nloops * CLIENTS; k++)
        CHECK(pthread_create(&ct[k], NULL, client, (void *)k) == 0, "client thread");
    for (long k = 0; k < nloops * CLIENTS; k++)
        pthread_join(ct[k], NULL);
    for (long i = 0; i < nloops; i++) {
        pthread_join(lt[i], NULL);
        close(lfd[i]);
    }
    int want = nloops * CLIENTS * REQS;
    fprintf(stderr, "pthread_preload: %d event loops served %d of %d requests\n", nloops,
            atomic_load(&served), want);
    CHECK(atomic_load(&served) == want, "served %d of %d", atomic_load(&served), want);
}

/* ---- 3. the C library's cleanup macros and cancellation ---------------------------------------- */

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cc = PTHREAD_COND_INITIALIZER;
static atomic_int waiting, handler_ran, handler_held;

static void handler(void *arg)
{
    (void)arg;
    atomic_store(&handler_held, pthread_mutex_trylock(&cm) != 0);
    pthread_mutex_unlock(&cm);
    atomic_store(&handler_ran, 1);
}

static void *cancellee(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cm);
    pthread_cleanup_push(handler, NULL);
    atomic_store(&waiting, 1);
    for (;;)
        pthread_cond_wait(&cc, &cm);
    pthread_cleanup_pop(0);
    return NULL;
}

static void case_cancel(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, cancellee, NULL) == 0, "create");
    while (!atomic_load(&waiting))
        usleep(1000);
    usleep(10000);
    CHECK(pthread_cancel(t) == 0, "cancel");
    void *r;
    CHECK(pthread_join(t, &r) == 0, "join");
    CHECK(r == PTHREAD_CANCELED, "join result %p", r);
    CHECK(atomic_load(&handler_ran) && atomic_load(&handler_held), "cleanup handler ran %d, held %d",
          atomic_load(&handler_ran), atomic_load(&handler_held));
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "expect-weft") && strcmp(argv[1], "expect-kernel")))
        FAIL("usage: pthread_preload expect-weft|expect-kernel");
    expect_weft = strcmp(argv[1], "expect-weft") == 0;
    alarm(120);
    case_many();
    case_loops();
    case_cancel();
    printf("pthread_preload: ok\n");
    return 0;
}
