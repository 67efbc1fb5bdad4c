/*
 * sys.c — resolves weft__sys (sys.h): the C library's own thread calls when
 * the pthread layer interposes the names, the plain names otherwise; and
 * weft__panic (internal.h), weft's way out of an impossible state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

struct weft__sys weft__sys = {
    .pthread_create = pthread_create,
    .pthread_join = pthread_join,
    .pthread_attr_init = pthread_attr_init,
    .pthread_attr_destroy = pthread_attr_destroy,
    .pthread_attr_setdetachstate = pthread_attr_setdetachstate,
    .pthread_attr_setstacksize = pthread_attr_setstacksize,
    .pthread_mutex_init = pthread_mutex_init,
    .pthread_mutex_lock = pthread_mutex_lock,
    .pthread_mutex_unlock = pthread_mutex_unlock,
    .pthread_cond_init = pthread_cond_init,
    .pthread_cond_signal = pthread_cond_signal,
    .pthread_cond_timedwait = pthread_cond_timedwait,
    .pthread_once = pthread_once,
    .pthread_key_create = pthread_key_create,
    .pthread_setspecific = pthread_setspecific,
    .pthread_sigmask = pthread_sigmask,
    .sched_yield = sched_yield,
    .pthread_exit = pthread_exit,
};

/* lookup(): name in the C library's own scope (libc, then, before glibc
 * 2.34, libpthread), or NULL. */
static void *lookup(void *libc, void *libpthread, const char *name)
{
    void *p = libc ? dlsym(libc, name) : NULL;
    if (!p && libpthread)
        p = dlsym(libpthread, name);
    return p;
}

__attribute__((constructor(101))) static void sys_resolve(void)
{
    if (!dlsym(RTLD_DEFAULT, "weft_pthread_interposes"))
        return; /* nobody interposes: the plain names are the C library's */
    void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
    void *libpthread = dlopen(LIBPTHREAD_SO, RTLD_LAZY | RTLD_NOLOAD);
#define RESOLVE(f)                                                   \
    do {                                                             \
        void *p_ = lookup(libc, libpthread, #f);                     \
        if (p_)                                                      \
            weft__sys.f = (__typeof__(weft__sys.f))p_;               \
    } while (0)
    RESOLVE(pthread_create);
    RESOLVE(pthread_join);
    RESOLVE(pthread_attr_init);
    RESOLVE(pthread_attr_destroy);
    RESOLVE(pthread_attr_setdetachstate);
    RESOLVE(pthread_attr_setstacksize);
    RESOLVE(pthread_mutex_init);
    RESOLVE(pthread_mutex_lock);
    RESOLVE(pthread_mutex_unlock);
    RESOLVE(pthread_cond_init);
    RESOLVE(pthread_cond_signal);
    RESOLVE(pthread_cond_timedwait);
    RESOLVE(pthread_once);
    RESOLVE(pthread_key_create);
    RESOLVE(pthread_setspecific);
    RESOLVE(pthread_sigmask);
    RESOLVE(sched_yield);
    RESOLVE(pthread_exit);
#undef RESOLVE
}

_Noreturn void weft__panic(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (syscall(SYS_write, 2, "weft: ", 6) < 0 || syscall(SYS_write, 2, buf, (size_t)n) < 0) {
        /* nothing more we can do */
    }
    abort();
}
