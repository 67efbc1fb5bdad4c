/*
 * stackcopy_misuse.c — what a broken stack-copy program gets: a message
 * naming the mistake, and the abort, instead of silent corruption (run as
 * children, their stderr checked):
 *
 *   wg-on-stack     a stack-copy uthread waits on a weft_wg_t on its own
 *                   stack (the commonest mistake: its children then write
 *                   into whatever runs on that run stack meanwhile);
 *   mutex-on-stack  an ordinary uthread waits for a mutex that lives on a
 *                   stack-copy uthread's stack;
 *   alarm-on-stack  an alarm on a stack-copy uthread's stack is armed;
 *   offload-on-stack  weft_offload() is handed an argument on that stack;
 *   overflow        a stack-copy uthread recurses past its run stack: the
 *                   guard below the run stack faults and the report names
 *                   the uthread, as for an ordinary one.
 */
#include "check.h"
#include "child.h"

#include <inttypes.h>
#include <weft/io.h>
#include <weft/sync.h>
#include <weft/time.h>

static const weft_attr_t copy_attr = { .flags = WEFT_STACK_COPY, .name = "misuser" };

/* ASan may keep an instrumented function's locals in a "fake stack" on the
 * heap (use-after-return detection), where the mistake would do no harm:
 * the misusing functions keep theirs on the real stack. */
#define REAL_STACK __attribute__((no_sanitize_address))

static void *done_later(void *arg)
{
    weft_sleep_ns(1000000);
    weft_wg_done(arg);
    return NULL;
}

REAL_STACK static void *wg_on_stack(void *unused)
{
    (void)unused;
    weft_wg_t wg = WEFT_WG_INIT; /* wrong: others write it while we wait */
    weft_wg_add(&wg, 1);
    weft_t t;
    CHECK_RC(weft_spawn(&t, NULL, done_later, &wg), 0);
    weft_wg_wait(&wg);
    return NULL;
}

static weft_mutex_t *_Atomic shared_mutex;
static atomic_int stop;

REAL_STACK static void *holds_mutex_on_stack(void *unused)
{
    (void)unused;
    weft_mutex_t m = WEFT_MUTEX_INIT; /* wrong: another uthread waits on it */
    CHECK_RC(weft_mutex_lock(&m), 0);
    atomic_store(&shared_mutex, &m);
    while (!atomic_load(&stop))
        weft_yield();
    return NULL;
}

static void *waits_for_it(void *unused)
{
    (void)unused;
    weft_mutex_t *m;
    while (!(m = atomic_load(&shared_mutex)))
        weft_yield();
    weft_mutex_lock(m);
    return NULL;
}

static void ring(struct weft_alarm *a)
{
    (void)a;
}

REAL_STACK static void *alarm_on_stack(void *unused)
{
    (void)unused;
    struct weft_alarm a; /* wrong: the timer heap points at it while we wait */
    weft_alarm_init(&a, ring);
    weft_alarm_set_rel(&a, 1000000000);
    weft_alarm_start(&a);
    weft_sleep_ns(1000000);
    weft_alarm_stop(&a);
    return NULL;
}

static void *read_it(void *arg)
{
    return (void *)(uintptr_t)*(int *)arg;
}

REAL_STACK static void *offload_on_stack(void *unused)
{
    (void)unused;
    int value = 42; /* wrong: the helper thread reads it while we wait */
    void *r;
    weft_offload(read_it, &value, &r);
    return r;
}

static volatile unsigned sink;
static __attribute__((noinline)) unsigned dive(unsigned depth)
{
    volatile char frame[4096];
    frame[0] = (char)depth;
    frame[4095] = (char)depth;
    if (depth % 64 == 0)
        weft_yield(); /* switch out now and then on the way down */
    sink += dive(depth + 1);
    return frame[0] + frame[4095];
}

static void *diver(void *unused)
{
    (void)unused;
    fprintf(stderr, "child: diver id %" PRIu64 "\n", weft_id(weft_self()));
    fflush(stderr);
    return (void *)(uintptr_t)dive(0);
}

static int child_main(const char *what)
{
    alarm(WATCHDOG_SECS / 2); /* a hang dies by SIGALRM */
    weft_t t;
    if (strcmp(what, "wg-on-stack") == 0) {
        CHECK_RC(weft_spawn(&t, &copy_attr, wg_on_stack, NULL), 0);
    } else if (strcmp(what, "mutex-on-stack") == 0) {
        weft_t h;
        CHECK_RC(weft_spawn(&h, &copy_attr, holds_mutex_on_stack, NULL), 0);
        CHECK_RC(weft_spawn(&t, NULL, waits_for_it, NULL), 0);
    } else if (strcmp(what, "alarm-on-stack") == 0) {
        CHECK_RC(weft_spawn(&t, &copy_attr, alarm_on_stack, NULL), 0);
    } else if (strcmp(what, "offload-on-stack") == 0) {
        CHECK_RC(weft_spawn(&t, &copy_attr, offload_on_stack, NULL), 0);
    } else {
        weft_attr_t a = { .flags = WEFT_STACK_COPY, .name = "deep-copy" };
        CHECK_RC(weft_spawn(&t, &a, diver, NULL), 0);
    }
    join(t);
    fprintf(stderr, "child: %s came back\n", what);
    return 3;
}

static void run_case(const char *what, const char *want)
{
    char *argv[] = { "stackcopy_misuse", "child", (char *)what, NULL };
    /* The children break the rule on purpose: another uthread touches
     * memory on a stack-copy uthread's stack while weft copies that stack,
     * a race TSan may report (and exit) before weft's check aborts. The
     * check is what is tested here. */
    char *tsan_quiet[] = { "TSAN_OPTIONS=report_bugs=0", NULL };
    static struct child_result res;
    run_child(argv, TEST_TSAN ? tsan_quiet : NULL, &res);
    char st[64], wantbuf[256];
    int sig = WIFSIGNALED(res.status) ? WTERMSIG(res.status) : 0;
    if (strcmp(what, "overflow") == 0) {
        const char *idp = strstr(res.err, "child: diver id ");
        CHECK(idp != NULL, "child did not report the diver's id:\n%s", res.err);
        unsigned long long id = strtoull(idp + strlen("child: diver id "), NULL, 10);
        snprintf(wantbuf, sizeof wantbuf,
                 "weft: uthread %llu (deep-copy) overflowed its 2048 KiB stack (the run stack", id);
        want = wantbuf;
    }
    if (!(sig == SIGABRT || sig == SIGSEGV) || !strstr(res.err, want))
        fprintf(stderr, "---- child stderr ----\n%s---- end ----\n", res.err);
    CHECK(sig == SIGABRT || sig == SIGSEGV, "%s: child ended with %s, wanted an abort", what,
          describe_status(res.status, st, sizeof st));
    CHECK(strstr(res.err, want) != NULL, "%s: child's stderr lacks \"%s\"", what, want);
    fprintf(stderr, "ok: %s\n", what);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2]);
    check_watchdog(WATCHDOG_SECS);
    check_phase("wait group on a stack-copy stack");
    run_case("wg-on-stack", "is on the stack of a stack-copy uthread");
    check_phase("mutex on a stack-copy stack");
    run_case("mutex-on-stack", "a futex word (mutex");
    check_phase("armed alarm on a stack-copy stack");
    run_case("alarm-on-stack", "an armed alarm at");
    check_phase("weft_offload's argument on a stack-copy stack");
    run_case("offload-on-stack", "the argument of weft_offload() at");
    check_phase("overflow of the run stack");
    run_case("overflow", NULL);
    fprintf(stderr, "stackcopy_misuse: ok\n");
    return 0;
}
