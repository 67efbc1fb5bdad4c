/*
 * sys.h — the C library's own thread calls, for libweft's internal use.
 *
 * libweft-pthread.so (src/pthread/) defines pthread_create, pthread_mutex_lock
 * and the rest itself, so that an unmodified program's threads become
 * uthreads. libweft's own kernel threads (vcores, the ticker, offload
 * helpers) and its own locks must still be the C library's: libweft calls
 * those functions through this table, never by name. When the pthread
 * layer is loaded (it exports weft_pthread_interposes), the table holds the
 * C library's definitions, looked up in libc's own scope; otherwise the plain
 * names, so that a sanitizer runtime's interceptors still see every call.
 */
#ifndef WEFT_SYS_H
#define WEFT_SYS_H

#include <pthread.h>
#include <signal.h>
#include <time.h>

struct weft__sys {
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*pthread_join)(pthread_t, void **);
    int (*pthread_attr_init)(pthread_attr_t *);
    int (*pthread_attr_destroy)(pthread_attr_t *);
    int (*pthread_attr_setdetachstate)(pthread_attr_t *, int);
    int (*pthread_attr_setstacksize)(pthread_attr_t *, size_t);
    int (*pthread_mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
    int (*pthread_mutex_lock)(pthread_mutex_t *);
    int (*pthread_mutex_unlock)(pthread_mutex_t *);
    int (*pthread_cond_init)(pthread_cond_t *, const pthread_condattr_t *);
    int (*pthread_cond_signal)(pthread_cond_t *);
    int (*pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    int (*pthread_once)(pthread_once_t *, void (*)(void));
    int (*pthread_key_create)(pthread_key_t *, void (*)(void *));
    int (*pthread_setspecific)(pthread_key_t, const void *);
    int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
    int (*sched_yield)(void);
    void (*pthread_exit)(void *) __attribute__((noreturn));
};

/* weft__sys: resolved by a constructor of libweft (before any constructor
 * of a library that depends on it); the plain names until then. */
extern struct weft__sys weft__sys;

#endif
