/*
 * stack_overflow — a uthread that overflows its stack is caught and named.
 *
 * Proves: in a child process, a named uthread that recurses without bound
 * kills the process with SIGSEGV or SIGABRT after weft prints
 *   weft: uthread <id> (<name>) overflowed its <N> KiB stack
 * with the thread's real id and name and N matching the stack size asked
 * for after rounding (64 KiB as is; 1 byte -> the 16 KiB minimum; 20000
 * bytes -> whole pages; 0 -> the 256 KiB default; 100000 bytes -> pages above
 * the sanitizer builds' 64 KiB minimum), also while sibling uthreads run.
 *
 * Usage as a child: stack_overflow child <name> <stack_size>.
 */
#include "child.h"

#include <inttypes.h>

/* ---- child ------------------------------------------------------------------------ */

static volatile unsigned sink;

/* Each frame keeps a live, volatile buffer and uses the callee's result, so
 * the recursion can be neither flattened into a loop nor moved off the
 * stack (no ASan fake stack either). */
__attribute__((noinline, no_sanitize_address))
static unsigned dive(unsigned depth)
{
    volatile char buf[512];
    buf[0] = (char)depth;
    buf[sizeof buf - 1] = (char)(depth >> 8);
    unsigned below = dive(depth + 1);
    return below + (unsigned char)buf[0] + (unsigned char)buf[sizeof buf - 1];
}

static void *diver(void *arg)
{
    (void)arg;
    fprintf(stderr, "child: diver id %" PRIu64 "\n", weft_id(weft_self()));
    fflush(stderr);
    sink = dive(0);
    return NULL;
}

static void *sibling(void *arg)
{
    (void)arg;
    for (;;) {
        spin_work(1000);
        weft_yield();
    }
    return NULL;
}

static int child_main(const char *name, size_t size)
{
    unsetenv("WEFT_STACK_SIZE");   /* "0" must mean the built-in default */
    alarm(WATCHDOG_SECS / 2);      /* a hung overflow handler dies by SIGALRM */
    for (int i = 0; i < 3; i++)
        spawn_ex(sibling, NULL, WEFT_DETACHED, 0, "sibling");
    weft_attr_t a = { .stack_size = size, .name = name };
    weft_t t;
    CHECK_RC(weft_spawn(&t, &a, diver, NULL), 0);
    join(t);
    fprintf(stderr, "child: the diver came back\n");
    return 3;
}

/* ---- parent ------------------------------------------------------------------------- */

/* The minimum is 16 KiB; docs/ARCHITECTURE.md raises it to 64 KiB in
 * sanitizer builds, whose instrumented frames are several times larger. */
#define MIN_STACK_BYTES SCALE(16 * 1024, 64 * 1024)

static size_t expected_kib(size_t asked)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t sz = asked == 0 ? 256 * 1024 : asked;
    if (sz < MIN_STACK_BYTES)
        sz = MIN_STACK_BYTES;
    sz = (sz + page - 1) / page * page;
    return sz / 1024;
}

static void run_case(const char *name, size_t size)
{
    char size_arg[32];
    snprintf(size_arg, sizeof size_arg, "%zu", size);
    char *argv[] = { "stack_overflow", "child", (char *)name, size_arg, NULL };
    static struct child_result res;
    run_child(argv, NULL, &res);

    char st[64];
    int sig = WIFSIGNALED(res.status) ? WTERMSIG(res.status) : 0;
    if (!(sig == SIGSEGV || sig == SIGABRT) || !strstr(res.err, "child: diver id "))
        fprintf(stderr, "---- child stderr ----\n%s---- end ----\n", res.err);
    CHECK(sig == SIGSEGV || sig == SIGABRT, "%s/%zu: child ended with %s, wanted SIGSEGV or SIGABRT",
          name, size, describe_status(res.status, st, sizeof st));

    const char *idp = strstr(res.err, "child: diver id ");
    CHECK(idp != NULL, "child did not report the diver's id");
    unsigned long long id = strtoull(idp + strlen("child: diver id "), NULL, 10);
    char want[256];
    snprintf(want, sizeof want, "weft: uthread %llu (%s) overflowed its %zu KiB stack", id, name,
             expected_kib(size));
    if (!strstr(res.err, want))
        fprintf(stderr, "---- child stderr ----\n%s---- end ----\n", res.err);
    CHECK(strstr(res.err, want) != NULL, "child's stderr lacks \"%s\"", want);
    fprintf(stderr, "ok: %s\n", want);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2], (size_t)strtoull(argv[3], NULL, 10));
    check_watchdog(WATCHDOG_SECS);
    check_phase("64 KiB");
    run_case("deep-diver", 64 * 1024);
    check_phase("1 byte -> minimum");
    run_case("tiny", 1);
    check_phase("20000 bytes -> pages");
    run_case("odd-size", 20000);
    check_phase("100000 bytes -> pages");
    run_case("big-odd", 100000);
    check_phase("default size");
    run_case("default", 0);
    fprintf(stderr, "stack_overflow: ok\n");
    return 0;
}
