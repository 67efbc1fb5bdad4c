/*
 * stack_as — small stacks cost little address space.
 *
 * Proves: in a child process limited to 1 GiB of address space
 * (RLIMIT_AS), 30 000 uthreads with 16 KiB stacks can all exist at once
 * (each parked on a semaphore), because the guard below a stack is sized
 * with it (4 KiB for 16 KiB). Before the fix every stack had a 64 KiB guard,
 * 80 KiB of address space a uthread, and spawns failed with EAGAIN at about
 * 11 500. Not in sanitizer builds (their shadow memory needs far more
 * address space than the limit).
 *
 * Usage as a child: stack_as child.
 */
#include "child.h"

#include <sys/resource.h>

#define N 30000

static weft_sem_t go;

static void *parked(void *arg)
{
    (void)arg;
    CHECK_RC(weft_sem_wait(&go), 0);
    return NULL;
}

static int child_main(void)
{
    struct rlimit rl = { 1ul << 30, 1ul << 30 };
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
    CHECK_RC(weft_sem_init(&go, 0), 0);
    static weft_t t[N];
    weft_attr_t a = { .stack_size = 16 * 1024 };
    int made = 0, rc = 0;
    for (; made < N; made++)
        if ((rc = weft_spawn(&t[made], &a, parked, NULL)) != 0)
            break;
    fprintf(stderr, "child: %d uthreads with 16 KiB stacks under a 1 GiB address limit%s%s\n",
            made, rc ? "; then " : "", rc ? check_errname(rc) : "");
    for (int i = 0; i < made; i++)
        CHECK_RC(weft_sem_post(&go), 0);
    for (int i = 0; i < made; i++)
        join(t[i]);
    weft_shutdown();
    return made == N ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "child") == 0)
        return child_main();
    check_watchdog(WATCHDOG_SECS);
#ifdef WEFT_TEST_SANITIZED
    fprintf(stderr, "stack_as: sanitizer build (shadow memory exceeds the limit): nothing checked\n");
    return 0;
#else
    char *argv_c[] = { "stack_as", "child", NULL };
    static struct child_result res;
    run_child(argv_c, NULL, &res);
    char st[64];
    fprintf(stderr, "%s", res.err);
    CHECK(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0, "child ended with %s",
          describe_status(res.status, st, sizeof st));
    fprintf(stderr, "stack_as: ok\n");
    return 0;
#endif
}
