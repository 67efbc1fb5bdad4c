/*
 * fork — fork() from a process running weft: the child has one thread, the
 * caller, and a fresh runtime; the parent is unaffected.
 *
 * Proves, with the runtime running (a uthread parked in weft_read, others
 * sleeping) when a uthread forks:
 *  - in the child, the caller is a plain kernel thread (weft_self() NULL)
 *    that still owns the weft mutex it held; weft_sleep_ns returns (it hung
 *    with 2 vcores: the parent's vcore state was kept); spawn and join work
 *    on a new runtime; two child uthreads talk over a new pipe (new poller);
 *    a 1 MiB weft_write to a socket the parent's weft had made non-blocking
 *    blocks and completes (blocking emulation kept, not EAGAIN); and
 *    returning from the uthread's function ends the child with status 0;
 *  - no copy of the parent's parked reader runs in the child: the parent's
 *    reader gets every byte written to its socket after the fork (with 1
 *    vcore a copy used to run and take half of them);
 *  - fork + exec from a uthread, and system(), give the command's status;
 *  - fork from main while uthreads run: the child starts its own runtime.
 * The runtime in the parent carries on: everything is joined at the end.
 */
#define _GNU_SOURCE
#include <sys/wait.h>

#include "iocheck.h"

/* TSan refuses new threads in the child of a multi-threaded fork unless told
 * otherwise; weft's child starts a fresh runtime with new threads. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "die_after_fork=0";
}

#define TOTAL   (256 * 1024)       /* parent's reader: bytes written after the fork */
#define CHILD_W (1024 * 1024)      /* the child's write to the inherited socket */

static int sp[2];                  /* parent: writer sp[1] -> reader uthread sp[0] */
static int sq[2];                  /* child writes sq[1] -> parent reads sq[0] */
static weft_mutex_t held = WEFT_MUTEX_INIT;

static void *reader(void *arg)
{
    (void)arg;
    static char buf[8192];
    size_t got = 0;
    while (got < TOTAL) {
        ssize_t n = weft_read(sp[0], buf, sizeof buf);
        CHECK(n > 0, "parent reader: %zd (%s) after %zu bytes", n, strerror(IOERR), got);
        got += (size_t)n;
    }
    return (void *)got;
}

static void *sleeper(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++)
        CHECK_RC(weft_sleep_ns(MS(5)), 0);
    return NULL;
}

static int cp[2]; /* the child's own pipe */

static void *child_writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        CHECK_IO(weft_write(cp[1], &i, sizeof i), (long)sizeof i, 0);
    weft_close(cp[1]);
    return NULL;
}

static void *child_reader(void *arg)
{
    (void)arg;
    int v, want = 0;
    ssize_t n;
    while ((n = weft_read(cp[0], &v, sizeof v)) == (ssize_t)sizeof v) {
        CHECK(v == want, "child pipe: %d, want %d", v, want);
        want++;
    }
    CHECK(n == 0 && want == 100, "child pipe: end %zd after %d values", n, want);
    weft_close(cp[0]);
    return (void *)42;
}

static void *add_one(void *arg)
{
    return (void *)((uintptr_t)arg + 1);
}

/* child_body(): the child of a uthread's fork, as a plain kernel thread. */
static void child_body(void)
{
    check_watchdog(SCALE(60, 300)); /* the parent's watchdog thread is not here */
    check_phase("child");
    CHECK(weft_self() == NULL, "weft_self() in the child: %p", (void *)weft_self());
    CHECK_RC(weft_mutex_unlock(&held), 0);
    CHECK_RC(weft_sleep_ns(MS(10)), 0);

    weft_t t;
    void *r = NULL;
    CHECK_RC(weft_spawn(&t, NULL, add_one, (void *)41), 0);
    CHECK_RC(weft_join(t, &r), 0);
    CHECK(r == (void *)42, "child's uthread returned %p", r);

    CHECK(pipe2(cp, O_CLOEXEC) == 0, "pipe");
    weft_t a, b;
    CHECK_RC(weft_spawn(&a, NULL, child_reader, NULL), 0);
    CHECK_RC(weft_spawn(&b, NULL, child_writer, NULL), 0);
    CHECK_RC(weft_join(b, NULL), 0);
    CHECK_RC(weft_join(a, &r), 0);
    CHECK(r == (void *)42, "child reader");

    static char big[CHILD_W];
    memset(big, 'c', sizeof big);
    ssize_t n = weft_write(sq[1], big, sizeof big);
    CHECK(n == CHILD_W, "child's write to the inherited socket: %zd (%s)", n,
          n < 0 ? strerror(IOERR) : "short");

    /* Give a copied parent reader every chance to run (there is none). */
    CHECK_RC(weft_sleep_ns(MS(100)), 0);
}

static void *forker(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&held), 0);
    CHECK_IO(weft_write(sq[1], "x", 1), 1, 0); /* weft makes sq[1] non-blocking */
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(IOERR));
    if (pid == 0) {
        child_body();
        return NULL; /* the child's last thread ends: exit status 0 */
    }
    CHECK(weft_self() != NULL, "parent lost its uthread");
    CHECK_RC(weft_mutex_unlock(&held), 0);
    return (void *)(intptr_t)pid;
}

static void *fork_exec(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(IOERR));
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "fork+exec status %#x", st);
    st = system("exit 4");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 4, "system() status %#x", st);
    return NULL;
}

static int wait_status(pid_t pid)
{
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(IOERR));
    return st;
}

int main(void)
{
    check_watchdog(SCALE(60, 300));
    io_test_start();
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sq) == 0, "socketpair");

    check_phase("fork from a uthread");
    weft_t r, s, f;
    CHECK_RC(weft_spawn(&r, NULL, reader, NULL), 0);
    CHECK_RC(weft_spawn(&s, NULL, sleeper, NULL), 0);
    weft_sleep_ns(MS(5)); /* the reader is parked in weft_read now */
    CHECK_RC(weft_spawn(&f, NULL, forker, NULL), 0);
    void *pv;
    CHECK_RC(weft_join(f, &pv), 0);
    pid_t child = (pid_t)(intptr_t)pv;

    /* The parent's reader gets everything written after the fork. */
    static char chunk[4096];
    memset(chunk, 'p', sizeof chunk);
    for (size_t sent = 0; sent < TOTAL; sent += sizeof chunk) {
        CHECK_IO(weft_write(sp[1], chunk, sizeof chunk), (long)sizeof chunk, 0);
        if (sent % (64 * 1024) == 0)
            weft_sleep_ns(MS(2));
    }
    /* The child's 1 MiB through the inherited socket (after our "x"). */
    static char in[65536];
    size_t got = 0;
    while (got < 1 + CHILD_W) {
        ssize_t n = weft_read(sq[0], in, sizeof in);
        CHECK(n > 0, "reading the child's bytes: %zd (%s) after %zu", n, strerror(IOERR), got);
        got += (size_t)n;
        if (got < 256 * 1024)
            weft_sleep_ns(MS(1)); /* slowly at first: the child's write must wait */
    }
    CHECK_RC(weft_join(r, &pv), 0);
    CHECK((size_t)pv == TOTAL, "parent's reader got %zu of %d bytes", (size_t)pv, TOTAL);
    CHECK_RC(weft_join(s, NULL), 0);
    int st = wait_status(child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x (exit %d, signal %d)", st,
          WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);

    check_phase("fork + exec, system()");
    CHECK_RC(weft_spawn(&f, NULL, fork_exec, NULL), 0);
    CHECK_RC(weft_join(f, NULL), 0);

    check_phase("fork from main");
    CHECK_RC(weft_spawn(&s, NULL, sleeper, NULL), 0);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(IOERR));
    if (pid == 0) {
        weft_t t;
        void *res = NULL;
        if (weft_spawn(&t, NULL, add_one, (void *)6) != 0 || weft_join(t, &res) != 0)
            _exit(2);
        weft_shutdown();
        _exit(res == (void *)7 ? 0 : 3);
    }
    st = wait_status(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child of main: status %#x", st);
    CHECK_RC(weft_join(s, NULL), 0);

    weft_shutdown();
    fprintf(stderr, "fork: ok\n");
    return 0;
}
