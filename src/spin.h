/*
 * spin.h — the runtime's short-hold spinlock and futex system-call wrappers.
 *
 * A weft spinlock guards a few pointer updates (a wait queue, a run queue);
 * nothing blocks while holding one. Waiting for one spins with PAUSE, then
 * falls back to sched_yield() so a lock whose holder's kernel thread was
 * descheduled does not burn the core forever (invariant 5: spin, then park).
 */
#ifndef WEFT_SPIN_H
#define WEFT_SPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* One atomic idiom: C11 atomic_*_explicit. An object that must keep a plain
 * type is viewed as atomic through these casts: a field of a struct in
 * include/weft/ (C++ includes those headers, and `_Atomic` is C only), a
 * futex word (WEFT__AT: the kernel takes a plain uint32_t *), a word the
 * yield pass's code or another library reads (weft__yield_flag), a
 * thread-local word. The public headers' own inline functions, which C++
 * compiles too, are the one place for the __atomic builtins. */
#define WEFT__ATOMIC(T, p) ((_Atomic(T) *)(void *)(p))
#define WEFT__AT(p) WEFT__ATOMIC(uint32_t, p)
_Static_assert(sizeof(_Atomic(void *)) == sizeof(void *) && sizeof(_Atomic(uint32_t)) == 4 &&
                   sizeof(_Atomic(int)) == sizeof(int) && sizeof(_Atomic(unsigned char)) == 1,
               "an atomic view of a plain object must have its size");

/* libweft is built with hidden symbols: the public headers say what it
 * exports, and WEFT__EXPORT marks the few internal names the pthread layer
 * and the I/O shim (separate libraries) call. tests/exports.txt lists every
 * exported name; the test abi-exports holds libweft.so to it. */
#define WEFT__EXPORT __attribute__((visibility("default")))

static inline void weft__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

WEFT__EXPORT void weft__spin_lock_slow(uint32_t *l);

#if defined(__SANITIZE_THREAD__)
#define WEFT__SPIN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT__SPIN_TSAN 1
#endif
#endif
#ifdef WEFT__SPIN_TSAN
/* TSan is also told of the lock as a plain acquire/release pair (see
 * weft_spin_lock in <weft/sched.h>). */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define WEFT__SPIN_ACQUIRED(l) __tsan_acquire(l)
#define WEFT__SPIN_RELEASING(l) __tsan_release(l)
#else
#define WEFT__SPIN_ACQUIRED(l) ((void)(l))
#define WEFT__SPIN_RELEASING(l) ((void)(l))
#endif

/* weft__tls_crit counts, per kernel thread, the spinlocks it holds and the
 * scheduler operations or switches it is inside: a weft call from a signal
 * handler that finds it non-zero has interrupted weft's own code and must
 * not take locks or touch queues (event.c, "signal-safe calls"). Raised
 * before a lock is taken, lowered after it is released. */
WEFT__EXPORT extern __thread unsigned weft__tls_crit __attribute__((tls_model("initial-exec")));

/* weft__crit_word() is the address of weft__tls_crit of the kernel thread
 * running now, from a thread pointer read afresh. A uthread may resume on
 * another kernel thread after any switch, and a compiler may keep the
 * thread pointer it read before a call for a TLS access after it (it is
 * constant in C's eyes): aarch64 reads it with an mrs that GCC keeps in a
 * register across calls and hoists out of loops (alarm.c's stop() did
 * weft_yield() and then took a spinlock with the crit count of the kernel
 * thread it had left, racing that thread's own updates: a count of -1, and
 * every later weft call there refused with EDEADLK), and an atomic access
 * takes the word's address from %fs:0 on x86-64 as well. A volatile asm is
 * neither merged with another nor moved out of a loop. (x86-64's plain
 * accesses address %fs directly, which reads the base at every access.) */
#if defined(__aarch64__) || defined(WEFT__SPIN_TSAN)
static inline unsigned *weft__crit_word(void)
{
    unsigned *p;
#if defined(__aarch64__)
    unsigned long off;
    __asm__ volatile("mrs %0, tpidr_el0\n\t"
                     "adrp %1, :gottprel:weft__tls_crit\n\t"
                     "ldr %1, [%1, #:gottprel_lo12:weft__tls_crit]\n\t"
                     "add %0, %0, %1"
                     : "=r"(p), "=&r"(off));
#else
    __asm__ volatile("movq %%fs:0, %0\n\t"
                     "addq weft__tls_crit@gottpoff(%%rip), %0"
                     : "=r"(p));
#endif
    return p;
}
#endif

/* WEFT__CRIT is this kernel thread's weft__tls_crit, as an lvalue: read
 * afresh through weft__crit_word() where that is needed (above); elsewhere
 * the variable itself. */
#if defined(__aarch64__) || defined(WEFT__SPIN_TSAN)
#define WEFT__CRIT (*weft__crit_word())
#else
#define WEFT__CRIT weft__tls_crit
#endif

/* Only the owning kernel thread touches it, so plain accesses; in TSan
 * builds relaxed atomics, since TSan sees the uthreads that run on one
 * kernel thread as threads of their own and cannot always see the switches
 * that order them. */
#ifdef WEFT__SPIN_TSAN
#define WEFT__CRIT_LOAD() atomic_load_explicit(WEFT__ATOMIC(unsigned, &WEFT__CRIT), memory_order_relaxed)
#define WEFT__CRIT_ADD(v) atomic_fetch_add_explicit(WEFT__ATOMIC(unsigned, &WEFT__CRIT), (v), memory_order_relaxed)
#define WEFT__CRIT_OR(v) atomic_fetch_or_explicit(WEFT__ATOMIC(unsigned, &WEFT__CRIT), (v), memory_order_relaxed)
#define WEFT__CRIT_AND(v) atomic_fetch_and_explicit(WEFT__ATOMIC(unsigned, &WEFT__CRIT), (v), memory_order_relaxed)
#else
#define WEFT__CRIT_LOAD() (WEFT__CRIT)
#define WEFT__CRIT_ADD(v) (WEFT__CRIT += (v))
#define WEFT__CRIT_OR(v) (WEFT__CRIT |= (v))
#define WEFT__CRIT_AND(v) (WEFT__CRIT &= (v))
#endif

static inline void weft__crit_enter(void)
{
    WEFT__CRIT_ADD(1u);
    atomic_signal_fence(memory_order_seq_cst);
}

static inline void weft__crit_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    WEFT__CRIT_ADD(~0u); /* -1 */
}

/* weft__spin_lock() takes *l (0 free, 1 held). */
static inline void weft__spin_lock(uint32_t *l)
{
    weft__crit_enter();
    if (__builtin_expect(atomic_exchange_explicit(WEFT__AT(l), 1, memory_order_acquire), 0))
        weft__spin_lock_slow(l);
    WEFT__SPIN_ACQUIRED(l);
}

/* weft__spin_trylock() takes *l if it is free; true if it did. */
static inline bool weft__spin_trylock(uint32_t *l)
{
    weft__crit_enter();
    bool took = atomic_load_explicit(WEFT__AT(l), memory_order_relaxed) == 0 &&
                !atomic_exchange_explicit(WEFT__AT(l), 1, memory_order_acquire);
    if (took)
        WEFT__SPIN_ACQUIRED(l);
    else
        weft__crit_leave();
    return took;
}

/* weft__spin_unlock() releases *l. */
static inline void weft__spin_unlock(uint32_t *l)
{
    WEFT__SPIN_RELEASING(l);
    atomic_store_explicit(WEFT__AT(l), 0, memory_order_release);
    weft__crit_leave();
}

/* weft__futex_wait() sleeps while *addr == val, until woken or until the
 * absolute CLOCK_MONOTONIC deadline (UINT64_MAX: none). Returns 0 (woken or
 * spurious), EAGAIN (*addr != val), ETIMEDOUT or EINTR. Kernel thread only. */
int weft__futex_wait(uint32_t *addr, uint32_t val, uint64_t deadline_ns);

/* weft__futex_wake() wakes up to n kernel threads sleeping on addr. */
void weft__futex_wake(uint32_t *addr, int n);

#endif
