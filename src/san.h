/*
 * san.h — telling ASan, TSan and Valgrind about stack switches (and TSan
 * about weft's blocking system calls: weft__san_blocking_begin/end below).
 *
 * Every switch between stacks goes through weft__san_switch() right before
 * the assembly switch and weft__san_arrive() right after it, on the new
 * stack. In a plain build these compile to nothing.
 *
 * ASan: __sanitizer_start_switch_fiber(save, bottom, size) names the stack we
 * go to; save is NULL when the stack we leave is never resumed (an exiting
 * uthread, or vcore context, which always restarts at the top of its stack).
 * __sanitizer_finish_switch_fiber() completes it on the new stack.
 * TSan: every uthread is a TSan fiber; vcore context is the vcore kernel
 * thread's own fiber. __tsan_switch_to_fiber() with flags 0 synchronises the
 * two sides, which is what a switch means: everything before it happens
 * before everything after it.
 */
#ifndef WEFT_SAN_H
#define WEFT_SAN_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TSAN 1
#endif
#endif

#ifdef WEFT_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif
#ifdef WEFT_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __sanitizer_syscall_pre_impl_futex(long uaddr, long op, long val, long timeout, long uaddr2,
                                        long val3);
void __sanitizer_syscall_post_impl_futex(long res, long uaddr, long op, long val, long timeout,
                                         long uaddr2, long val3);
#endif
#ifdef WEFT_VALGRIND
#include <valgrind/valgrind.h>
#endif

/* What a stack needs for the sanitizers; embedded in uthreads and vcores.
 * Only the fields of the tools built in: empty in a plain build (a GNU C
 * empty struct), so a uthread pays nothing for them. */
struct weft__san {
#ifdef WEFT_ASAN
    void *asan_fake;        /* ASan fake stack of this context while switched out */
    void *asan_vc_fake;     /* vcores: vcore context's own, while a uthread runs */
#endif
#ifdef WEFT_TSAN
    void *tsan_fiber;       /* TSan fiber of this context */
    void *tsan_thread;      /* vcores: the kernel thread's own fiber */
    unsigned tsan_entries;  /* vcores: entries into the current fiber */
#endif
#ifdef WEFT_VALGRIND
    unsigned vg_id;         /* Valgrind stack id */
#endif
};

/* weft__san_switch() announces a switch to the stack [lo, lo+size) owned by
 * to; from is the context we leave, NULL if it will never resume. */
static inline void weft__san_switch(struct weft__san *from, struct weft__san *to,
                                    const void *lo, size_t size)
{
#ifdef WEFT_ASAN
    __sanitizer_start_switch_fiber(from ? &from->asan_fake : NULL, lo, size);
#endif
#ifdef WEFT_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)from; (void)to; (void)lo; (void)size;
}

/* weft__san_arrive() completes a switch on the new stack; self is the context
 * we arrived in (NULL: a fresh start). The stack we came from is stored in
 * *old_lo / *old_size when those are not NULL (ASan builds only). */
static inline void weft__san_arrive(struct weft__san *self, const void **old_lo, size_t *old_size)
{
#ifdef WEFT_ASAN
    __sanitizer_finish_switch_fiber(self ? self->asan_fake : NULL, old_lo, old_size);
#endif
    (void)self; (void)old_lo; (void)old_size;
}

/* weft__san_vcore_depart() announces vcore context's switch to the stack
 * [lo, lo+size) of to, keeping vcore context's ASan fake stack in vcore for
 * its next entry (weft__san_vcore_enter), where it starts at the top of its
 * stack again. ASan's next collection frees the fake frames left deeper
 * than the new entry's; those at its own depth stay allocated, and once
 * their size class runs out such frames go on the real stack (no
 * use-after-return check for them). A fake stack made afresh at every entry cost
 * a map, its page faults and an unmap each time: about 8 us per pass
 * through vcore context under ASan (a pair's hand-offs, one in 16 through
 * vcore context, ran 80 times slower than without the sanitizer). */
static inline void weft__san_vcore_depart(struct weft__san *vcore, struct weft__san *to,
                                          const void *lo, size_t size)
{
#ifdef WEFT_ASAN
    __sanitizer_start_switch_fiber(&vcore->asan_vc_fake, lo, size);
#endif
#ifdef WEFT_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)vcore; (void)to; (void)lo; (void)size;
}

/* weft__san_vcore_enter() completes a switch into vcore context (a uthread
 * switched out): vcore context's fake stack is current again. */
static inline void weft__san_vcore_enter(struct weft__san *vcore)
{
#ifdef WEFT_ASAN
    __sanitizer_finish_switch_fiber(vcore->asan_vc_fake, NULL, NULL);
    vcore->asan_vc_fake = NULL; /* current now; weft__san_vcore_depart keeps it again */
#endif
    (void)vcore;
}

/* weft__san_stack_new() / _free(): a stack [lo, lo+size) for a new context. */
static inline void weft__san_stack_new(struct weft__san *s, void *lo, size_t size)
{
#ifdef WEFT_ASAN
    s->asan_fake = NULL;
#endif
#ifdef WEFT_TSAN
    s->tsan_fiber = __tsan_create_fiber(0);
#endif
#ifdef WEFT_VALGRIND
    s->vg_id = lo ? VALGRIND_STACK_REGISTER(lo, (char *)lo + size) : 0; /* NULL: stack-copy */
#endif
    (void)s; (void)lo; (void)size;
}

static inline void weft__san_stack_free(struct weft__san *s)
{
#ifdef WEFT_TSAN
    if (s->tsan_fiber)
        __tsan_destroy_fiber(s->tsan_fiber);
    s->tsan_fiber = NULL;
#endif
#ifdef WEFT_VALGRIND
    if (s->vg_id)
        VALGRIND_STACK_DEREGISTER(s->vg_id);
    s->vg_id = 0;
#endif
    (void)s;
}

/* weft__san_vcore_done() drops the fibers a vcore made (on its own thread). */
static inline void weft__san_vcore_done(struct weft__san *vcore)
{
#ifdef WEFT_TSAN
    if (vcore->tsan_fiber != vcore->tsan_thread)
        __tsan_destroy_fiber(vcore->tsan_fiber);
    vcore->tsan_fiber = vcore->tsan_thread;
#endif
    (void)vcore;
}

/* weft__san_thread() records the calling kernel thread's own context. */
static inline void weft__san_thread(struct weft__san *s)
{
#ifdef WEFT_ASAN
    s->asan_fake = NULL;
    s->asan_vc_fake = NULL;
#endif
#ifdef WEFT_TSAN
    s->tsan_fiber = s->tsan_thread = __tsan_get_current_fiber();
    s->tsan_entries = 0;
#endif
    (void)s;
}

/* weft__san_vcore_left() is called by vcore context right after it switched
 * (in TSan's view) to a uthread. Vcore context never returns from its
 * functions — it restarts at the top of its stack — so the TSan shadow call
 * stack of its fiber grows with every entry; give it a fresh fiber now and
 * then, long before TSan's fixed-size shadow stack would overflow. */
static inline void weft__san_vcore_left(struct weft__san *vcore)
{
#ifdef WEFT_TSAN
    if (++vcore->tsan_entries < 1024)
        return;
    vcore->tsan_entries = 0;
    void *old = vcore->tsan_fiber;
    vcore->tsan_fiber = __tsan_create_fiber(0);
    if (old != vcore->tsan_thread)
        __tsan_destroy_fiber(old);
#endif
    (void)vcore;
}

/* weft__san_vcore_restart() is called by vcore context right before it
 * jumps back to the top of its own stack, abandoning the frames below:
 * ASan forgets their poisoned redzones (as at a longjmp); TSan gets a fresh
 * fiber, whose shadow call stack does not hold the abandoned frames. */
#ifdef WEFT_ASAN
void __asan_handle_no_return(void);
#endif
static inline void weft__san_vcore_restart(struct weft__san *vcore)
{
#ifdef WEFT_ASAN
    __asan_handle_no_return();
#endif
#ifdef WEFT_TSAN
    /* An entry like any other (weft__san_vcore_left bounds them), except
     * that many restarts in a row, with no uthread run between them, move
     * to the kernel thread's own fiber and drop the one that grew. */
    if (++vcore->tsan_entries >= 512) {
        void *old = vcore->tsan_fiber;
        vcore->tsan_fiber = vcore->tsan_thread;
        vcore->tsan_entries = 0;
        __tsan_switch_to_fiber(vcore->tsan_fiber, 0);
        if (old != vcore->tsan_thread)
            __tsan_destroy_fiber(old);
    }
#endif
    (void)vcore;
}

/* weft__san_release()/weft__san_acquire() tell TSan about a hand-over it
 * cannot see: a pointer that travels through the kernel (an io_uring
 * submission and its completion). */
static inline void weft__san_release(void *addr)
{
#ifdef WEFT_TSAN
    __tsan_release(addr);
#endif
    (void)addr;
}

static inline void weft__san_acquire(void *addr)
{
#ifdef WEFT_TSAN
    __tsan_acquire(addr);
#endif
    (void)addr;
}

/* weft__san_thread_ctx() is the context to switch to when a vcore goes back
 * to its kernel thread's own stack. */
static inline struct weft__san weft__san_thread_ctx(const struct weft__san *vcore)
{
    struct weft__san s = *vcore;
#ifdef WEFT_TSAN
    s.tsan_fiber = vcore->tsan_thread;
#endif
    return s;
}

/* weft__san_blocking_begin()/weft__san_blocking_end() bracket a system call
 * that may sleep, made with syscall() (a futex wait, epoll_pwait, ppoll, an
 * io_uring wait). TSan runs an asynchronous signal's handler late, when the
 * thread next enters its runtime (an intercepted call), except while the
 * thread sleeps in one of its own blocking interceptors: a thread asleep in a
 * bare syscall() held a signal back for as long as it slept (a server's
 * SIGTERM with its main thread in weft_join: for ever, if no interceptor ran).
 * TSan's futex system-call hooks (<sanitizer/linux_syscall_hooks.h>) open and
 * close such a blocking region, whatever the call: pending handlers run at
 * the begin, and those that come while the call sleeps run at once, as a plain
 * build runs them. Nothing in other builds. */
static inline void weft__san_blocking_begin(void)
{
#ifdef WEFT_TSAN
    __sanitizer_syscall_pre_impl_futex(0, 0, 0, 0, 0, 0);
#endif
}

static inline void weft__san_blocking_end(void)
{
#ifdef WEFT_TSAN
    __sanitizer_syscall_post_impl_futex(0, 0, 0, 0, 0, 0, 0);
#endif
}

#endif
