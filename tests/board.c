/*
 * board — the cross-process priority board (<weft/board.h>).
 *
 * Proves:
 *  - bad input: a NULL, empty, too long (ENAMETOOLONG) or odd name
 *    (EINVAL); a second attach (EBUSY); detach when not attached and
 *    removing a board twice (EINVAL, ENOENT); attach, detach and re-attach;
 *  - two processes sharing one CPU, each a prio runtime with one vcore on
 *    it: while process A runs an urgent uthread (prio 30) for 300 ms,
 *    process B's CPU-bound uthread (prio -30) makes under a tenth of the
 *    progress it makes in the 300 ms after A's urgent work is gone (B's
 *    vcore cedes the CPU while A has more urgent work ready, and resumes);
 *  - B's vcore thread runs under SCHED_IDLE while A's urgent level is recent
 *    on the board (also while A sleeps: A's vcore then gets the CPU the
 *    moment it wakes), and under its own policy again once A's level is
 *    older than WEFT_BOARD_RECENT_MS (where the process may leave SCHED_IDLE
 *    again: else its policy must never change), and a fork() from B while
 *    so gives a child under SCHED_OTHER;
 *  - a process that dies attached: its urgent word is seen while it lives
 *    and dropped (weft_board_foreign reads nothing) once it is gone.
 * The other processes are this program again (fork + exec: a fork of a
 * threaded process may not start threads under TSan), sharing a small
 * segment of their own with the test. Needs /dev/shm (exit 77 without it).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"

struct shared {
    _Atomic long b_count;     /* B's work units */
    _Atomic int stop;         /* B: finish */
    _Atomic int c_ready;      /* the doomed child runs its urgent uthread */
    _Atomic int b_policy;     /* B's vcore thread's policy, as B's uthread last saw it */
    _Atomic int b_fork;       /* B forked under SCHED_IDLE: 1 the child was not, 2 it was */
};

static struct shared *sh;
static char name[64];
static int cpu, shfd = -1;

/* map_shared() maps the test's own segment: a memfd the parent makes and
 * the children inherit (its number is on their command line). */
static void map_shared(void)
{
    if (shfd < 0) {
        shfd = memfd_create("weft-board-test", 0); /* no MFD_CLOEXEC: inherited */
        CHECK(shfd >= 0 && ftruncate(shfd, sizeof *sh) == 0, "memfd: %s", strerror(errno));
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, shfd, 0);
    CHECK(sh != MAP_FAILED, "mmap");
}

/* spawn_role() starts this program again as process role ("b" or "c"). */
static pid_t spawn_role(const char *role)
{
    char cpus[16], fd[16];
    snprintf(cpus, sizeof cpus, "%d", cpu);
    snprintf(fd, sizeof fd, "%d", shfd);
    fflush(NULL);
    pid_t p = fork();
    CHECK(p >= 0, "fork");
    if (p == 0) {
        execl("/proc/self/exe", "board", role, fd, name, cpus, (char *)NULL);
        _exit(127);
    }
    return p;
}

static void pin_to_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "sched_setaffinity");
}

static void start(void)
{
    CHECK_RC(weft_set_preempt_period(1000), 0);
    struct weft_config c = { .vcores = 1, .sched = "prio" };
    CHECK_RC(weft_init(&c), 0);
    CHECK(weft_vcore_cpu(0) == cpu, "vcore 0 on CPU %d, not %d", weft_vcore_cpu(0), cpu);
    CHECK_RC(weft_board_attach(name), 0);
}

/* ---- process B: a less urgent CPU-bound uthread ---------------------------------------- */

static void *b_worker(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (!atomic_load(&sh->stop) && weft_now_ns() < end) { /* weft_now_ns: a safe point */
        spin_work(200);
        int pol = sched_getscheduler(0); /* its vcore's thread */
        atomic_store(&sh->b_policy, pol);
        if (pol == SCHED_IDLE && !atomic_load(&sh->b_fork)) {
            pid_t p = fork();
            if (p == 0)
                _exit(sched_getscheduler(0) == SCHED_OTHER ? 0 : 1);
            int st = 0;
            CHECK(p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st), "B's fork");
            atomic_store(&sh->b_fork, WEXITSTATUS(st) == 0 ? 1 : 2);
        }
        atomic_fetch_add(&sh->b_count, 1);
    }
    return NULL;
}

static int run_b(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("process B");
    map_shared();
    pin_to_cpu();
    start();
    weft_attr_t a = { .prio = -30 };
    weft_t t;
    CHECK_RC(weft_spawn(&t, &a, b_worker, NULL), 0);
    CHECK_RC(weft_join(t, NULL), 0);
    weft_shutdown();
    return 0;
}

/* ---- process A: an urgent uthread for a while ------------------------------------------- */

static long c0, c1;

static void *a_urgent(void *arg)
{
    (void)arg;
    c0 = atomic_load(&sh->b_count);
    uint64_t end = weft_now_ns() + MS(300);
    while (weft_now_ns() < end)
        spin_work(200);
    c1 = atomic_load(&sh->b_count);
    return NULL;
}

/* ---- process C: dies attached with urgent work ready -------------------------------------- */

static void *c_urgent(void *arg)
{
    (void)arg;
    atomic_store(&sh->c_ready, 1);
    for (;;) /* until killed */
        spin_work(1000), weft_now_ns();
    return NULL;
}

static int run_c(void)
{
    map_shared();
    pin_to_cpu();
    start();
    weft_attr_t a = { .prio = 25 };
    weft_t t;
    CHECK_RC(weft_spawn(&t, &a, c_urgent, NULL), 0);
    weft_join(t, NULL);
    return 1;
}

/* can_leave_idle(): a thread of this process may go SCHED_IDLE and back
 * (what weft_vcore_kernel_idle needs); tried on a thread of its own. */
static void *try_idle(void *arg)
{
    struct sched_param p = { 0 };
    *(int *)arg = sched_setscheduler(0, SCHED_IDLE, &p) == 0 && sched_setscheduler(0, SCHED_OTHER, &p) == 0;
    return NULL;
}

static bool can_leave_idle(void)
{
    pthread_t th;
    int ok = 0;
    CHECK(pthread_create(&th, NULL, try_idle, &ok) == 0 && pthread_join(th, NULL) == 0, "thread");
    return ok;
}

static void bad_input(void)
{
    check_phase("bad input");
    char longname[WEFT_BOARD_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_RC(weft_board_attach(NULL), EINVAL);
    CHECK_RC(weft_board_attach(""), EINVAL);
    CHECK_RC(weft_board_attach("a/b"), EINVAL);
    CHECK_RC(weft_board_attach("with space"), EINVAL);
    CHECK_RC(weft_board_attach(longname), ENAMETOOLONG);
    CHECK_RC(weft_board_remove(longname), ENAMETOOLONG);
    longname[WEFT_BOARD_NAME_MAX] = 0; /* exactly the limit: fine */
    CHECK_RC(weft_board_remove(longname), ENOENT);
    CHECK_RC(weft_board_detach(), EINVAL);
    CHECK(!weft_board_attached(), "attached");
    int r = weft_board_attach(name);
    if (r == ENOSYS || r == ENOENT) {
        printf("board: no /dev/shm (%s): skipped\n", strerror(r));
        exit(77);
    }
    CHECK_RC(r, 0);
    CHECK(weft_board_attached(), "not attached");
    CHECK_RC(weft_board_attach(name), EBUSY);
    CHECK_RC(weft_board_attach("another-board"), EBUSY);
    CHECK(weft_board_foreign(0) == WEFT_BOARD_NONE, "a foreign level with the runtime off");
    CHECK_RC(weft_board_detach(), 0);
    CHECK(!weft_board_attached(), "still attached");
    CHECK_RC(weft_board_detach(), EINVAL);
    CHECK_RC(weft_board_attach(name), 0); /* again */
    CHECK_RC(weft_board_detach(), 0);
    CHECK_RC(weft_board_remove(name), 0);
    CHECK_RC(weft_board_remove(name), ENOENT);
}

int main(int argc, char **argv)
{
    if (argc == 5) { /* a child process: role, segment, board, CPU */
        shfd = atoi(argv[2]);
        snprintf(name, sizeof name, "%s", argv[3]);
        cpu = atoi(argv[4]);
        return strcmp(argv[1], "b") == 0 ? run_b() : run_c();
    }
    check_watchdog(WATCHDOG_SECS);
    snprintf(name, sizeof name, "weft-test-%d", (int)getpid());
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++)
        ;
    bad_input();
    map_shared();

    check_phase("two processes, one CPU");
    bool kidle = can_leave_idle();
    pid_t b = spawn_role("b");
    pin_to_cpu();
    start();
    WAIT_UNTIL(atomic_load(&sh->b_count) > 1000, "B runs");
    CHECK(atomic_load(&sh->b_policy) == SCHED_OTHER, "B's vcore under policy %d before A's urgent work",
          atomic_load(&sh->b_policy));
    weft_attr_t a = { .prio = 30 };
    weft_t t;
    CHECK_RC(weft_spawn(&t, &a, a_urgent, NULL), 0);
    CHECK_RC(weft_join(t, NULL), 0);
    weft_sleep_ns(MS(300)); /* A idle: nothing urgent on the board */
    long c2 = atomic_load(&sh->b_count);
    int pol = atomic_load(&sh->b_policy);
    CHECK(pol == (kidle ? SCHED_IDLE : SCHED_OTHER),
          "B's vcore under policy %d with A's urgent level recent (SCHED_IDLE %s)", pol,
          kidle ? "possible" : "not possible here");
    /* B published its policy before it forked: under SCHED_IDLE on a busy
     * machine (a sanitizer's fork, other tests on this CPU) the child and
     * the wait for it may take a while yet. */
    if (kidle)
        WAIT_UNTIL(atomic_load(&sh->b_fork) != 0, "B's fork under SCHED_IDLE to finish");
    CHECK(atomic_load(&sh->b_fork) == (kidle ? 1 : 0), "B's fork under SCHED_IDLE: %d",
          atomic_load(&sh->b_fork));
    WAIT_UNTIL(atomic_load(&sh->b_policy) == SCHED_OTHER, "B's vcore back to SCHED_OTHER");
    atomic_store(&sh->stop, 1);
    int st;
    CHECK(waitpid(b, &st, 0) == b && WIFEXITED(st) && WEXITSTATUS(st) == 0, "B failed: %#x", st);
    printf("board: B's work units: %ld while A had urgent work, %ld after; B under SCHED_IDLE %s\n",
           c1 - c0, c2 - c1, kidle ? "while A's level was recent" : "never (not possible here)");
    CHECK(c2 - c1 > 0, "B made no progress once A's urgent work was gone");
    CHECK((c1 - c0) * 10 < c2 - c1, "B went on while A had more urgent work: %ld vs %ld after",
          c1 - c0, c2 - c1);

    check_phase("a process dies attached");
    pid_t c = spawn_role("c");
    WAIT_UNTIL(atomic_load(&sh->c_ready), "C runs its urgent uthread");
    WAIT_UNTIL(weft_board_foreign(0) == 25, "C's urgent level on the board");
    CHECK(kill(c, SIGKILL) == 0, "kill");
    CHECK(waitpid(c, &st, 0) == c, "waitpid");
    WAIT_UNTIL(weft_board_foreign(0) == WEFT_BOARD_NONE, "C's level dropped once it died");

    CHECK_RC(weft_board_detach(), 0);
    weft_shutdown();
    CHECK_RC(weft_board_remove(name), 0);
    printf("board: ok\n");
    return 0;
}
