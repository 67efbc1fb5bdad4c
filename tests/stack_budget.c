/*
 * stack_budget — the fallback to canary-checked stacks when guarded stacks
 * run out.
 *
 * Proves: in a child with WEFT_MAX_GUARDED_STACKS=8, 50 uthreads alive at
 * once (blocked on a semaphore) all run, use their stacks, switch many
 * times and join with the right results over two rounds; weft says so on
 * stderr exactly once (one line mentioning "guard"); a child without the
 * knob prints no such line.
 *
 * Usage as a child: stack_budget child.
 */
#include "child.h"

#define NT 50
#define ROUNDS 2

static weft_sem_t gate = WEFT_SEM_INIT(0);
static atomic_int started;

__attribute__((noinline)) static unsigned use_stack(unsigned depth)
{
    volatile char buf[256];
    buf[0] = (char)depth;
    if (depth == 0)
        return 1;
    unsigned r = use_stack(depth - 1);
    weft_yield();
    return r + (unsigned char)buf[0];
}

static void *blocked_worker(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    atomic_fetch_add(&started, 1);
    CHECK_RC(weft_sem_wait(&gate), 0);
    unsigned r = use_stack(20);
    for (int k = 0; k < 10; k++)
        weft_yield();
    return (void *)(i * 1000 + r);
}

static int child_main(void)
{
    unsigned want = 1;
    for (unsigned d = 1; d <= 20; d++)
        want += d;
    for (int round = 0; round < ROUNDS; round++) {
        weft_t t[NT];
        atomic_store(&started, 0);
        for (uintptr_t i = 0; i < NT; i++)
            t[i] = spawn(blocked_worker, (void *)i);
        WAIT_UNTIL(atomic_load(&started) == NT, "all workers alive at once");
        for (int i = 0; i < NT; i++)
            CHECK_RC(weft_sem_post(&gate), 0);
        for (uintptr_t i = 0; i < NT; i++) {
            void *r = join(t[i]);
            CHECK(r == (void *)(i * 1000 + want), "worker %zu returned %p", (size_t)i, r);
        }
    }
    weft_shutdown();
    fprintf(stderr, "budget-child: ok\n");
    return 0;
}

static int count_guard_lines(const char *s)
{
    int n = 0;
    while (*s) {
        const char *eol = strchr(s, '\n');
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)len, s);
        for (char *p = line; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        if (strstr(line, "guard"))
            n++;
        s += len + (eol != NULL);
    }
    return n;
}

static void run_case(char *const extra_env[], int want_guard_lines)
{
    char *argv[] = { "stack_budget", "child", NULL };
    static struct child_result res;
    run_child(argv, extra_env, &res);
    char st[64];
    int ok = WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0 &&
             strstr(res.err, "budget-child: ok") != NULL;
    int lines = count_guard_lines(res.err);
    if (!ok || lines != want_guard_lines)
        fprintf(stderr, "---- child stderr ----\n%s---- end ----\n", res.err);
    CHECK(ok, "child ended with %s", describe_status(res.status, st, sizeof st));
    CHECK(lines == want_guard_lines, "%d stderr lines mention \"guard\", expected %d", lines,
          want_guard_lines);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "child") == 0)
        return child_main();
    check_watchdog(WATCHDOG_SECS);
    check_phase("WEFT_MAX_GUARDED_STACKS=8");
    char *small[] = { "WEFT_MAX_GUARDED_STACKS=8", NULL };
    run_case(small, 1);
    check_phase("default budget");
    unsetenv("WEFT_MAX_GUARDED_STACKS");
    run_case(NULL, 0);
    fprintf(stderr, "stack_budget: ok\n");
    return 0;
}
