/*
 * signal_sleep — a signal sent to a thread that weft put to sleep runs its
 * handler at once.
 *
 * weft's threads sleep in bare system calls (futex waits with a deadline,
 * epoll_pwait), and a wait with a deadline is restarted by the kernel after
 * a handler, so weft never sees the signal. That is right in a plain build,
 * where the kernel runs the handler itself; under TSan, which runs an
 * asynchronous handler only when the thread next enters its runtime, a vcore
 * asleep until a far alarm held the signal back until the alarm (20 s
 * measured), and a server's SIGTERM could wait as long (httpd's client test
 * failed so once: "the server ignored SIGTERM for 10 s"). Proves, in every
 * build:
 *  - each vcore thread, asleep with an alarm a minute away, runs a handler
 *    sent to it (SA_RESTART and not) within HANDLER_BOUND_NS;
 *  - main, asleep in weft_join() on an outside kernel thread, does too.
 */
#define _GNU_SOURCE
#include "check.h"

#define HANDLER_BOUND_NS MS(5000)

static int nvc;
static pthread_t vthreads[64];
static atomic_long handled;

static weft_sem_t release[64]; /* sleeper v waits on release[v] */

static void on_signal(int sig)
{
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

/* Sleeps in a timed wait a minute long: its vcore naps until then. */
static void *sleeper(void *arg)
{
    weft_sem_t *mine = arg;
    CHECK_RC(weft_sem_timedwait(mine, weft_now_ns() + MS(60000)), 0);
    return NULL;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sends sig to t and returns how long its handler took to run (0 if it did
 * not run within the bound), waiting on this kernel thread. */
static uint64_t signal_and_time(pthread_t t, int sig)
{
    long before = atomic_load(&handled);
    uint64_t t0 = mono_ns();
    CHECK(pthread_kill(t, sig) == 0, "pthread_kill");
    while (atomic_load(&handled) == before) {
        if (mono_ns() - t0 > HANDLER_BOUND_NS)
            return 0;
        usleep(1000);
    }
    return mono_ns() - t0 ? mono_ns() - t0 : 1;
}

static pthread_t main_thread;
static _Atomic uint64_t main_took[2];

/* A kernel thread: signals main while main sleeps in weft_join(), then lets
 * the joined uthread finish. */
static void *signal_main(void *arg)
{
    (void)arg;
    usleep(200 * 1000); /* main is asleep in weft_join by now, or soon */
    atomic_store(&main_took[0], signal_and_time(main_thread, SIGUSR1));
    atomic_store(&main_took[1], signal_and_time(main_thread, SIGUSR2));
    CHECK_RC(weft_sem_post(&release[0]), 0);
    return NULL;
}

int main(void)
{
    check_watchdog(SCALE(60, 120));
    main_thread = pthread_self();
    struct sigaction sa = { 0 };
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* a sleep the kernel restarts after the handler */
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sa.sa_flags = 0; /* one that returns EINTR (a futex wait without deadline) */
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");

    CHECK_RC(weft_init(NULL), 0);
    nvc = weft_num_vcores();
    CHECK(nvc > 0 && nvc <= 64, "%d vcores", nvc);

    check_phase("record the vcore threads");
    check_vcore_threads(vthreads, nvc);

    check_phase("vcores asleep until an alarm a minute away");
    weft_t sleepers[64];
    for (int v = 0; v < nvc; v++) {
        weft_attr_t a = { .flags = WEFT_PINNED, .vcore = v };
        CHECK_RC(weft_sem_init(&release[v], 0), 0);
        CHECK_RC(weft_spawn(&sleepers[v], &a, sleeper, &release[v]), 0);
    }
    usleep(200 * 1000); /* every vcore has gone to sleep */
    for (int v = 0; v < nvc; v++)
        for (int sig = SIGUSR1; sig <= SIGUSR2; sig += SIGUSR2 - SIGUSR1) {
            uint64_t took = signal_and_time(vthreads[v], sig);
            CHECK(took != 0, "vcore %d: the handler of signal %d did not run within %llu ms", v,
                  sig, (unsigned long long)(HANDLER_BOUND_NS / 1000000u));
        }

    check_phase("main asleep in weft_join");
    pthread_t kt;
    CHECK(pthread_create(&kt, NULL, signal_main, NULL) == 0, "pthread_create");
    CHECK_RC(weft_join(sleepers[0], NULL), 0); /* released by signal_main */
    CHECK(pthread_join(kt, NULL) == 0, "pthread_join");
    for (int i = 0; i < 2; i++)
        CHECK(atomic_load(&main_took[i]) != 0,
              "main in weft_join: the handler of %s did not run within %llu ms",
              i ? "SIGUSR2" : "SIGUSR1", (unsigned long long)(HANDLER_BOUND_NS / 1000000u));

    check_phase("release the sleepers");
    for (int v = 1; v < nvc; v++)
        CHECK_RC(weft_sem_post(&release[v]), 0);
    for (int v = 1; v < nvc; v++)
        CHECK_RC(weft_join(sleepers[v], NULL), 0);
    fprintf(stderr, "signal_sleep: %d vcores; main's handlers after %.1f / %.1f ms\n", nvc,
            (double)atomic_load(&main_took[0]) / 1e6, (double)atomic_load(&main_took[1]) / 1e6);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    weft_shutdown();
    return 0;
}
