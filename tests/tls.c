/*
 * tls — per-uthread TLS (weft_config.tls = WEFT_TLS_UTHREAD):
 *  1. 1 000 uthreads each write their own __thread values (a word, errno,
 *     and a __thread array of three pages) and check them after every
 *     blocking step: a mutex, a condition variable, a sleep, a pipe read,
 *     yields; at all vcores they move between vcores (counted);
 *  2. glibc's own per-thread state follows: pthread_self() (the C
 *     library's, which reads the thread pointer) is each uthread's own and
 *     stays the same across moves; printf("%f"), toupper and isalpha work
 *     (the ctype tables glibc points every new thread's TLS at);
 *  3. a dlopen()ed module's __thread data (dynamic TLS, allocated on first
 *     use by the C library) is each uthread's own, also its 10 000-byte
 *     array;
 *  4. thread keys with destructors in this mode;
 *  5. the mode is on (two uthreads see different addresses for the same
 *     __thread variable; the main thread's value is untouched).
 * In sanitizer builds weft_init refuses the mode with ENOTSUP (checked).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <poll.h>

#include "check.h"

static __thread long word = 1;
static __thread unsigned char pages[3 * 4096];
static pthread_mutex_t unused_for_types;
static weft_mutex_t mu = WEFT_MUTEX_INIT;
static weft_cond_t cv = WEFT_COND_INIT;
static int pipefd[2];
static atomic_int moved, done_count;

static long (*mod_get)(void);
static void (*mod_set)(long);
static char *(*mod_big)(void);

static int *(*volatile errno_at)(void) = __errno_location;

static void fill(long me)
{
    word = me;
    *errno_at() = (int)(me % 1000) + 1;
    memset(pages, (int)(me & 0xff), sizeof pages);
    if (mod_set) {
        mod_set(me * 3);
        memset(mod_big(), (int)((me * 7) & 0xff), 10000);
    }
}

static void check_mine(long me, const char *where)
{
    CHECK(word == me, "uthread %ld: __thread word is %ld after %s", me, word, where);
    CHECK(*errno_at() == (int)(me % 1000) + 1, "uthread %ld: errno %d after %s", me, *errno_at(), where);
    for (size_t i = 0; i < sizeof pages; i += 509)
        CHECK(pages[i] == (unsigned char)(me & 0xff), "uthread %ld: __thread array byte %zu after %s",
              me, i, where);
    CHECK(pages[sizeof pages - 1] == (unsigned char)(me & 0xff), "last byte");
    char buf[64]; /* glibc's locale and ctype state, set up per thread */
    snprintf(buf, sizeof buf, "%.2f %s", (double)me / 4, "x");
    char want[64];
    snprintf(want, sizeof want, "%ld.%02ld x", me / 4, (me % 4) * 25);
    CHECK(strcmp(buf, want) == 0 && toupper('q') == 'Q' && isalpha('z'), "uthread %ld: printf "
          "gives '%s'", me, buf);
    if (mod_get) {
        CHECK(mod_get() == me * 3, "uthread %ld: the module's __thread is %ld after %s", me, mod_get(), where);
        char *b = mod_big();
        CHECK(b[0] == (char)((me * 7) & 0xff) && b[9999] == (char)((me * 7) & 0xff),
              "uthread %ld: the module's array after %s", me, where);
    }
}

static weft_key_t key;
static atomic_int key_dtors;
static void key_dtor(void *v) { (void)v; atomic_fetch_add(&key_dtors, 1); }

static void *worker(void *arg)
{
    long me = (long)(intptr_t)arg;
    pthread_t self0 = pthread_self();
    int vc0 = weft_vcore_id();
    fill(me);
    CHECK_RC(weft_key_setspecific(key, (void *)arg), 0);
    check_mine(me, "start");
    for (int round = 0; round < 3; round++) {
        weft_mutex_lock(&mu);
        check_mine(me, "mutex lock");
        weft_mutex_unlock(&mu);
        weft_yield();
        check_mine(me, "yield");
        weft_sleep_ns(50000);
        check_mine(me, "sleep");
        if (me % 10 == 0) {
            char c;
            struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
            weft_poll_fd(pipefd[0], POLLIN, 100000); /* mostly times out: I/O wait */
            (void)p;
            (void)c;
            check_mine(me, "I/O wait");
        }
        weft_mutex_lock(&mu);
        weft_cond_timedwait(&cv, &mu, weft_now_ns() + 20000);
        weft_mutex_unlock(&mu);
        check_mine(me, "cond wait");
        CHECK(pthread_equal(pthread_self(), self0), "uthread %ld: the C library's pthread_self changed", me);
        CHECK(weft_key_getspecific(key) == arg, "key value");
    }
    if (weft_vcore_id() != vc0)
        atomic_fetch_add(&moved, 1);
    atomic_fetch_add(&done_count, 1);
    return (void *)(uintptr_t)self0;
}

static void *addr_of_word(void *arg)
{
    (void)arg;
    return &word;
}

#define NT SCALE(1000, 200)

int main(void)
{
    (void)unused_for_types;
    check_watchdog(WATCHDOG_SECS);
    struct weft_config cfg = { .tls = WEFT_TLS_UTHREAD };
    int r = weft_init(&cfg);
#ifdef WEFT_TEST_SANITIZED
    CHECK_RC(r, ENOTSUP); /* documented: sanitizer runtimes keep per-thread state in TLS */
    printf("tls: refused in a sanitizer build, as documented\n");
    return 0;
#endif
    CHECK_RC(r, 0);
    word = -5;
    void *lib = dlopen(WEFT_TLS_MODULE, RTLD_NOW);
    CHECK(lib != NULL, "dlopen %s: %s", WEFT_TLS_MODULE, dlerror());
    mod_get = (long (*)(void))dlsym(lib, "tls_module_get");
    mod_set = (void (*)(long))dlsym(lib, "tls_module_set");
    mod_big = (char *(*)(void))dlsym(lib, "tls_module_big");
    CHECK(mod_get && mod_set && mod_big, "module symbols");
    CHECK(pipe(pipefd) == 0, "pipe");
    CHECK_RC(weft_key_create(&key, key_dtor), 0);

    check_phase("the mode is on");
    void *a = join(spawn(addr_of_word, NULL));
    weft_t t1 = spawn(addr_of_word, NULL), t2 = spawn(addr_of_word, NULL);
    void *b = join(t1), *c = join(t2);
    CHECK(a != (void *)&word && b != (void *)&word, "a uthread's __thread is main's");
    (void)c;

    check_phase("1000 uthreads");
    static weft_t t[NT];
    for (long i = 0; i < NT; i++)
        t[i] = spawn((void *(*)(void *))worker, (void *)(intptr_t)(i + 1));
    void *selfs[NT];
    for (long i = 0; i < NT; i++)
        selfs[i] = join(t[i]);
    CHECK(atomic_load(&done_count) == NT, "done %d", atomic_load(&done_count));
    for (long i = 1; i < NT; i++)
        CHECK(selfs[i] != selfs[0] || i == 0, "two live uthreads shared pthread_self");
    CHECK(atomic_load(&key_dtors) == NT, "key destructors %d", atomic_load(&key_dtors));
    CHECK(word == -5, "main's __thread changed: %ld", word);
    if (weft_num_vcores() > 1)
        fprintf(stderr, "tls: %d of %d uthreads ended on another vcore than they began\n",
                atomic_load(&moved), NT);
    weft_shutdown();
    printf("tls: ok\n");
    return 0;
}
