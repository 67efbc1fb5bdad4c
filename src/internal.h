/*
 * internal.h — the runtime's private types: uthreads, vcores, the runtime
 * singleton, waiters and timers. Nothing here is visible to applications or
 * to schedulers (they see <weft/sched.h> only).
 */
#ifndef WEFT_INTERNAL_H
#define WEFT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <weft/sched.h>
#include <weft/weft.h>

#include <weft/event.h>
#include <weft/time.h>

#include "arch/ctx.h"
#include "config.h"
#include "sys.h"
#include "san.h"
#include "spin.h"
#include "preempt.h"
#include "stackcopy.h"

#define WEFT__CACHELINE 64
#define WEFT__LIKELY(x)   __builtin_expect(!!(x), 1)
#define WEFT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define WEFT__CONTAINER(p, type, field) ((type *)(void *)((char *)(p) - offsetof(type, field)))
#define WEFT__NOINLINE __attribute__((noinline))
/* Each vcore's signal stack: weft's SIGSEGV handler, and an application's
 * SA_ONSTACK handlers (sanitizer builds' frames are several times larger).
 * Under ASan under 512 KiB: every __asan_handle_no_return (each call of a
 * _Noreturn function, several per pass through vcore context) clears the
 * signal stack's shadow, and from 512 KiB on (64 KiB of shadow, ASan's
 * clear_shadow_mmap_threshold) it does so by mapping it afresh: about 20 us
 * a pass, 10 times what the rest of it cost. */
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
#define WEFT__ALTSTACK_SIZE (256 * 1024)
#else
#define WEFT__ALTSTACK_SIZE (64 * 1024)
#endif

/* The I/O paths (io.c, poll.c, the pollers) never call the libc functions
 * the shim (src/shim) interposes — read, write, readv, writev, recv*, send*,
 * accept*, connect, poll, select, the epoll waits, sleep, usleep, nanosleep —
 * or an interposed program would call back into itself (and --wrap would
 * rename them): they use syscall(SYS_...) instead. The exceptions are calls
 * the shim passes straight through: close() in io.c (the shim's close only
 * drops weft's state, and TSan must see descriptors close), ppoll() where a
 * kernel thread that is not a uthread waits, and code off the I/O paths
 * (weft_dump's write, board.c's usleep and close, preempt.c's close), which
 * never runs in a uthread the shim would reroute. */

/* weft__panic() prints "weft: <message>" and aborts: impossible states only. */
WEFT__EXPORT _Noreturn void weft__panic(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- uthreads ---------------------------------------------------------- */

enum weft__ustate {
    WEFT__RUNNING = 1,  /* on a vcore */
    WEFT__RUNNABLE,     /* owned by the scheduler */
    WEFT__BLOCKED,      /* owned by whoever will make it runnable */
    WEFT__DONE,         /* finished, not yet joined; stack not in use */
    WEFT__FREE,         /* joined or detached and finished: in a stack cache */
};

/* Join flags, guarded by jlock. */
#define WEFT__J_DETACHED 0x1
#define WEFT__J_JOINING  0x2

/* Park states of weft_park()/weft_unpark(). */
enum { WEFT__PARK_NONE = 0, WEFT__PARK_TOKEN = 1, WEFT__PARK_PARKED = 2 };

/* A blocked uthread or kernel thread, queued on a weft__waitq (sync/wait.c).
 * A uthread's is its own `wait` (never on its stack: see the uthread); a
 * kernel thread's lives on its stack for the duration of the wait. */
struct weft__waiter {
    struct weft__waiter *next, *prev; /* guarded by the queue's lock */
    struct weft_uthread *ut;          /* the uthread, or NULL for a kernel thread */
    uint32_t word;                    /* atomic futex word of a kernel thread: 1 = woken */
    int status;                       /* WEFT__WAITING, then 0 or an errno; guarded by the lock */
    uintptr_t data;                   /* the primitive's own (futex address, rwlock side;
                                         a descriptor poll waiter: its group, io/fd.c) */
};

/* What a timed wait hands its timer, for the length of the wait:
 * weft__wait()'s deadline (sync/wait.c) or a sleep (alarm.c).
 * The timed wait stops its alarm with weft__alarm_stop_own(), which never
 * waits (a wait would reuse the waiter the timeout may be reading). */
struct weft__wait_rec {
    struct weft_alarm tm;            /* the deadline, or the sleep's wake-up */
    uint32_t *lock;                  /* weft__wait: the queue's lock (the timeout takes it) */
    struct weft__waitq *q;           /* weft__wait: the queue, or NULL */
    struct weft__waiter *w;          /* weft__wait: the waiter */
    struct weft_uthread *ut;         /* sleep: the sleeper */
    int err;                         /* sleep: ENOMEM when the alarm could not be armed */
};

/* A uthread's priorities (uthread.c: weft_setprio; sync/mutex.c: priority
 * inheritance). link.prio, what schedulers read, is the larger of base and
 * the boosts; it changes only under lock, together with the op
 * thread_prio_changed. */
#define WEFT__BOOSTS 4
struct weft__prio {
    uint32_t lock;                   /* spinlock: everything below, link.prio */
    int base;                        /* attr.prio / weft_setprio(); guarded by lock */
    unsigned gen;                    /* weft__rt.gen at spawn: a boost's target is a
                                        uthread of this runtime; fixed */
    struct weft__boost {             /* inherited levels, by the mutex that gave them;
                                        guarded by lock */
        const void *m;               /* the mutex, or NULL for a free entry */
        int level;
    } boost[WEFT__BOOSTS];
};

/* A uthread. An ordinary one lives at the top of its own stack mapping (see
 * stack.c); a stack-copy one (WEFT_STACK_COPY) in a pool, running on a
 * vcore's run stack and copied out to a buffer while switched out
 * (stackcopy.c). The fields a switch touches come first, in one cache line:
 * link, ctx, state, err, park, guarded, copy.
 *
 * Nothing that others reach while a uthread is switched out may be on its
 * stack: a stack-copy uthread's stack is somebody else's then. Its waiter
 * and its timed wait's record are here (wait, rec), one wait at a time:
 * nothing that runs between two waits of a uthread may wait (the end of a
 * timed wait stops its alarm without waiting: weft__alarm_stop_own). */
struct weft_uthread {
    struct weft_sched_link link;     /* MUST be first: <weft/sched.h> */
    struct weft__ctx ctx;            /* saved context; valid unless RUNNING */
    _Atomic int state;               /* enum weft__ustate; transitions documented in uthread.c */
    int err;                         /* errno while switched out; owner only */
    _Atomic int park;                /* WEFT__PARK_*; lock-free */
    bool guarded;                    /* PROT_NONE page below stack_lo; else canary, or copy */
    bool copy;                       /* stack-copy: runs on a run stack; fixed at spawn */
    uint8_t copy_flags;              /* WEFT__SC_*; the vcore running or switching it */
    uint8_t canary_tick;             /* switches out since spawn, mod 256 (stack.c); the
                                        vcore switching it out */
    uint32_t copy_len;               /* stack-copy: bytes in copy_buf */
    void *copy_buf;                  /* stack-copy: its stack while switched out, or NULL */
    struct weft__runstack *rs;       /* stack-copy: its run stack, NULL until it first runs
                                        (set atomically then: can_inline reads it unowned) */
    struct weft_uthread *host;       /* run inline by its joiner (WEFT__SC_INLINE): that
                                        joiner, whose stack it uses; fixed meanwhile */
    /* notifications (event.c): written by the uthread itself, read by the
     * notification handler on the same kernel thread (signal fences) */
    bool notif_pinned;               /* WEFT_PINNED was added by weft_notifs_disable() */
    int notif_depth;                 /* weft_notifs_disable() depth */
    int in_sched;                    /* inside a scheduler op called from this uthread */
    uint64_t id;                     /* fixed at spawn */
    void *(*fn)(void *);             /* fixed at spawn */
    void *arg;                       /* fixed at spawn */
    void *result;                    /* written at exit, read by the joiner after DONE */
    uint32_t jlock;                  /* spinlock: guards jflags, joiner, DONE transition */
    unsigned jflags;                 /* WEFT__J_*; guarded by jlock */
    struct weft__waiter *joiner;     /* guarded by jlock */
    uint64_t io_deadline;            /* weft_io_set_deadline(); 0 = none; owner only */
    void *specific;                  /* weft_key_* values (key.c); owner only, freed at exit */
    void *pthread;                   /* the pthread layer's state (src/pthread/): written
                                        under jlock, read atomically (its owner without it) */
    void *tls;                       /* WEFT_TLS=uthread: its thread pointer (tls.c); fixed
                                        at spawn */
    struct weft__prio prio;          /* priorities (weft_setprio, inheritance); see
                                        struct weft__prio above */
    /* stack: fixed while the uthread exists; see stack.c */
    char *map;                       /* start of the mapping (guard page, if any) */
    size_t map_size;                 /* whole mapping */
    char *stack_lo;                  /* lowest usable stack byte */
    size_t stack_size;               /* usable stack below this struct */
    size_t asked_size;               /* the stack size the application asked for (rounded) */
    struct weft_uthread *cache_next; /* stack cache link; owned by the cache */
    struct weft_uthread *sig_next;   /* a vcore's deferred unparks (event.c); owned by the
                                        unparker that won the park word, then the vcore */
    struct weft__san san;            /* sanitizer state; switch paths only */
    struct weft__waiter wait;        /* its waiter (sync/wait.c); one wait at a time */
    struct weft__wait_rec rec;       /* its wait record (weft__wait, sleep) */
    char name[32];                   /* fixed at spawn; "" = none */
};

/* ---- vcores -------------------------------------------------------------- */

/* A vcore's queue (event.c): application messages (weft_vcore_notify), and
 * what a signal handler's weft call left for the vcore to do: a bounded
 * lock-free queue (many producers, the vcore consumes; nothing allocated,
 * so any context may post) of messages and futex wake-ups, and a lock-free
 * stack of uthreads to make runnable. */
#define WEFT__SIGQ_CAP 1024
enum { WEFT__SIG_WAKE = 1, WEFT__SIG_MSG };
struct weft__sigmsg {
    _Atomic uint64_t seq;            /* slot ticket: pos (free), pos + 1 (filled) */
    unsigned kind, type;             /* WEFT__SIG_*; the message type */
    uintptr_t a, b;                  /* WAKE: address, count; MSG: payload */
};
struct weft__sigq {
    _Atomic uint64_t tail;           /* producers claim slots here (CAS) */
    uint64_t head;                   /* the vcore's next slot; vcore context only */
    _Atomic bool overflow;           /* a wake-up found the queue full: wake every sleeper */
    struct weft_uthread *_Atomic unparks; /* linked by sig_next */
    struct weft__sigmsg slot[WEFT__SIGQ_CAP];
};

/* A vcore's alarms (alarm.c). */
struct weft__heap {
    uint32_t lock;                   /* spinlock: v, n, cap, and the alarms' idx */
    struct weft_alarm **v;           /* min-heap on deadline; guarded by lock */
    int n, cap;                      /* guarded by lock */
    _Atomic uint64_t min;            /* v[0]->deadline or UINT64_MAX; written under lock */
};


enum weft__idle { WEFT__BUSY = 0, WEFT__SPINNING, WEFT__PARKING, WEFT__OFFLINE };

#define WEFT__TRACE 16 /* decisions kept per vcore for weft_dump() */

/* A vcore's idle loop pacing (vcore.c, vcore_idle); own vcore only. */
struct weft__vcore_spin {
    uint64_t until;                  /* end of the current spin, ns */
    unsigned rounds;                 /* idle rounds, to pace clock reads */
    uint64_t look_nrun;              /* nrun when the current idle moment began */
    unsigned look_rounds;            /* its rounds looking before counting as spinning */
};

/* A vcore's pending events (event.c), on a line of its own: any thread
 * posts them with an atomic OR. */
struct weft__vcore_ev {
    _Alignas(WEFT__CACHELINE) _Atomic uint64_t bits; /* pending events: bit t = type t
                                        (weft's own; WEFT__EV_SIGQ: sigq holds some) */
    _Atomic bool notif_sent;         /* a notification signal is on its way; cleared by
                                        weft__events_handle before it takes bits */
};

/* A vcore's part of the park protocol (vcore.c: see its design comment),
 * on a line of its own: kickers write it. */
struct weft__vcore_park {
    _Alignas(WEFT__CACHELINE) uint32_t word; /* futex: 1 = wake up; set by kickers */
    _Atomic bool parked;             /* on the idle list; written under rt.idle_lock */
    _Atomic bool in_poller;          /* about to sleep in the poller, or in it; own vcore
                                        writes, kickers read (vcore_signal) */
    struct weft__vcore *next;        /* the idle list's link; guarded by rt.idle_lock */
    _Atomic uint64_t watch_nrun;     /* this vcore's nrun as the watching vcore last saw
                                        it (vcore_watch); written by the watcher */
    /* The last WEFT__TRACE park/kick decisions, for weft_dump(): written by
     * this vcore's kernel thread only (relaxed), read anywhere. */
    struct weft__trace {
        _Atomic uint64_t t_ns;       /* when */
        _Atomic int kind;            /* enum weft__trace_kind */
        _Atomic int arg;             /* the other vcore, or a detail */
    } trace[WEFT__TRACE];
    _Atomic unsigned trace_n;        /* entries written so far */
};

/* A vcore's cache of freed default-size uthread shells (stack.c), LIFO,
 * linked by cache_next; own vcore only. */
struct weft__stack_cache {
    struct weft_uthread *list;
    int n;
};

struct weft__vcore {
    int id;                          /* fixed */
    int cpu;                         /* fixed: the CPU it is pinned to */
    /* owned by this vcore only */
    struct weft_uthread *current;    /* uthread running here, NULL in vcore context and
                                        while a blocking callback runs */
    void (*cb)(struct weft_uthread *, void *); /* pending weft_uthread_yield callback */
    void *cb_arg;
    struct weft_next_slot *nslot;    /* the scheduler's next slot here, or NULL: set by
                                        its init (weft_vcore_next_slot_set), set NULL by
                                        anyone (relaxed atomics, vc_slot); its fields
                                        are this vcore's (<weft/sched.h>) */
    struct weft_uthread *handoff_to; /* direct hand-off: the uthread whose stack the
                                        callback runs on, resumed after it */
    struct weft_uthread *pending;    /* a weft_yield() in vcore context: the yielder,
                                        handed to thread_paused if another runs */
    struct weft_uthread *copy_next;  /* a local successor that is a stack-copy uthread:
                                        run from vcore context once the one that
                                        switched out is done with (weft__vcore_next) */
    struct weft__sc_vcore sc;        /* stack copying (stackcopy.h) */
    int live_credit;                 /* uthreads counted in rt.live ahead, not yet spawned
                                        (uthread.c: live_inc, weft__live_return) */
    bool yielding;                   /* weft_yield() asks take_local for a successor
                                        (weft_vcore_yielder) */
    bool in_cb;                      /* cb runs: its wake-ups are its uthread's (by_uthread) */
    unsigned lone_yields;            /* yields that found nothing local, to pace steals */
    uint64_t id_next, id_end;        /* a block of uthread ids for spawns here */
    _Atomic int npinned;             /* live uthreads spawned WEFT_PINNED to this vcore:
                                        spawners add, the exits (here) subtract */
    _Atomic int idle;                /* enum weft__idle; written by this vcore only */
    int *errno_addr;                 /* this kernel thread's errno: uthreads' errno is
                                        saved from and restored to it by vcore context */
    struct weft__vcore_spin spin;    /* the idle loop's pacing (vcore.c) */
    uint32_t rand;                   /* weft_sched_rand() state */
    char *stack_lo;                  /* vcore-context stack */
    size_t stack_size;
    char *stack_top;
    struct weft__ctx thread_ctx;     /* the kernel thread's own stack, for exit */
    const void *thread_stack_lo;     /* ASan: the kernel thread's stack bounds */
    size_t thread_stack_size;
    struct weft__san san;            /* vcore context's sanitizer state */
    void *altstack;                  /* SIGSEGV alternate stack */
    struct weft__stack_cache stacks; /* default-size shells (stack.c) */
    struct weft_alarm *firing;       /* alarm whose callback runs here, or NULL */
    unsigned decisions;              /* scheduling decisions, to pace busy polls */
    pthread_t thread;                /* fixed after start */
    _Atomic int tid;                 /* kernel thread id; set once at start */
    /* events and notifications (event.c, preempt.c) */
    _Atomic uint64_t nrun;           /* uthreads run here (start_on); own vcore writes */
    bool preempt_now;                /* vcore context: weft__events_handle saw a preemption
                                        for the uthread being delivered */
    bool notif_here;                 /* weft_vcore_notify delivers to its own vcore: resume
                                        the caller here whatever is due; own thread only */
    bool resched;                    /* weft__events_handle saw WEFT__EV_RESCHED (a scheduler's
                                        weft_vcore_preempt); vcore context only */
    /* weft_vcore_kernel_idle (vcore.c); its own thread only */
    bool kidle;                      /* its thread runs under SCHED_IDLE */
    int kidle_policy, kidle_prio;    /* the policy (and priority) it had before */
    /* run-time vcore counts and cedes (vcore.c) */
    _Atomic bool napping;            /* asleep outside the idle list (ceding, or offline):
                                        own vcore writes; wakers read, then signal */
    _Atomic int online;              /* 1 if it should be online, 0 offline; written
                                        under rt.resize_lock */
    _Atomic bool up;                 /* it is online (ops->vcore_up ran, vcore_down not
                                        since); own vcore writes, releasers read */
    struct weft__vcore_tick tick;    /* ticks and retries (preempt.c, preempt.h) */
    void *thread_tp;                 /* the kernel thread's own thread pointer (tls.c);
                                        fixed after start */
    struct weft__vcore_counters {    /* weft_stats(); each written by one context of
                                        this vcore only, read anywhere (relaxed) */
        _Atomic uint64_t notifs, events, taken, deferred, longest;
        _Atomic uint64_t vcruns, kicks, parks, shared_rmw; /* vcruns: decisions
                                        not made by a direct hand-off */
        _Atomic uint64_t sc_copies, sc_bytes, sc_forwards; /* stackcopy.c */
    } st;
    /* I/O waiters that began waiting here (they end it with an RMW from
     * wherever they resume: weft__io_wait_begin). On a line of its own:
     * every idle vcore reads it (weft__io_waiting), and on the line of
     * current it cost a busy vcore a coherence miss per switch. */
    _Alignas(WEFT__CACHELINE) _Atomic int io_waiting;
    struct weft__vcore_ev ev;        /* events posted to it (event.c) */
    struct weft__vcore_park park;    /* the park protocol (vcore.c) */
    _Alignas(WEFT__CACHELINE) struct weft__heap heap; /* alarms started here */
    _Alignas(WEFT__CACHELINE) struct weft__sigq sigq; /* signal handlers' leftovers */
} __attribute__((aligned(WEFT__CACHELINE)));


/* A weft-internal payload-less event type (3..7 are free for weft's own):
 * weft_vcore_poke() asks the vcore to call ops->poked. */
#define WEFT__EV_SCHED 3u
/* ... and WEFT__EV_SIGQ: the vcore's sigq holds messages, or work a signal
 * handler left. */
#define WEFT__EV_SIGQ 4u
/* ... and WEFT__EV_RESCHED: weft_vcore_preempt() asks the vcore to
 * reconsider the uthread it runs (ops->should_preempt). */
#define WEFT__EV_RESCHED 5u


/* ---- the runtime ------------------------------------------------------------- */

enum { WEFT__OFF = 0, WEFT__RUNNING_RT = 2, WEFT__STOPPING = 3 };

struct weft__runtime {
    _Atomic int state;               /* WEFT__OFF / RUNNING_RT / STOPPING; written under init lock */
    int nvcores;                     /* vcores (threads) made; fixed while running. With a
                                        scheduler that has vcore_up/down, one per CPU of the
                                        mask, of which nonline are online */
    _Atomic int nonline;             /* online vcores, ids 0..nonline-1; written under
                                        resize_lock */
    uint32_t resize_lock;            /* spinlock: nonline, vcore->online, pinned spawns'
                                        check (weft_vcores_request/release) */
    bool resizable;                  /* ops has vcore_up/down; fixed while running */
    bool pi;                         /* ops has thread_prio_changed: weft mutexes inherit
                                        priorities; fixed while running */
    unsigned gen;                    /* bumped by every weft_init (struct weft__prio.gen) */
    int maxvcores;                   /* CPUs in the affinity mask; fixed */
    struct weft__vcore *vcores;      /* fixed while running */
    const struct weft_sched_ops *ops;/* fixed while running */
    bool sched_foreign;              /* ops is an application's (not in weft_text);
                                        fixed while running */
    /* The ops the switch paths call, resolved at weft_init: the built-in
     * schedulers' own, or, for an application's scheduler, wrappers that
     * hold notifications off around them (in_sched). Fixed while running. */
    struct weft_uthread *(*take_local)(int);  /* NULL if the scheduler has none */
    struct weft_uthread *(*take_yield)(int, struct weft_uthread *, int *); /* NULL: none */
    void (*thread_runnable)(struct weft_uthread *);
    int (*reclaim)(int, struct weft_uthread *); /* NULL if the scheduler has none */
    bool has_blocked;                /* ops->thread_has_blocked != NULL */
    bool swap_block_off;             /* has_blocked or per-uthread TLS: no block ends
                                        in a plain swap (swap_plain_block); fixed at init */
    size_t stack_size;               /* default stack size; fixed while running */
    _Alignas(WEFT__CACHELINE) _Atomic int nspinning; /* vcores spinning for work */
    _Atomic int nparked;             /* vcores on the idle list */
    uint32_t idle_lock;              /* spinlock: idle list, vcore->park.parked */
    struct weft__vcore *idle;        /* parked vcores, LIFO */
    int duty_vcore;                  /* the parked vcore with the alarm and poller duty
                                        (it sleeps until the nearest alarm, in the
                                        poller once I/O is in use), or -1; guarded
                                        by idle_lock */
    uint64_t duty_until;             /* the deadline it sleeps for; guarded by idle_lock */
    int watch_vcore;                 /* the parked vcore that watches the busy ones for a
                                        uthread that does not decide (vcore_watch), or -1;
                                        guarded by idle_lock */
    _Alignas(WEFT__CACHELINE) uint32_t live; /* atomic: uthreads not yet finished; futex for shutdown */
    _Atomic uint64_t next_id;        /* uthread ids */
    _Atomic unsigned spawn_rr;       /* round robin for spawns from outside */
    _Atomic int outside_wakers;      /* non-vcore threads inside weft_uthread_runnable */
    _Atomic int outside_calls;       /* non-vcore threads admitted by weft__outside_enter */
    _Atomic bool closing;            /* weft_shutdown has begun: no spawns from outside */
};

extern struct weft__runtime weft__rt;

/* weft__stack_default() is rt.stack_size, the default stack size, or 0
 * before weft_init (stack.c; for the pthread layer's attributes). */
WEFT__EXPORT size_t weft__stack_default(void);

/* weft__vc() returns the calling kernel thread's vcore, or NULL. Never
 * inlined and never cached by the compiler: a uthread may resume on another
 * vcore after any switch (invariant 2). */
struct weft__vcore *weft__vc(void);

/* weft__vc_at_entry() is the same read inlined, for the hot paths: only at
 * the start of a function, before anything that may switch, and never used
 * after a switch in the same function. */
extern __thread struct weft__vcore *weft__tls_vc __attribute__((tls_model("initial-exec")));
static inline struct weft__vcore *weft__vc_at_entry(void)
{
    return weft__tls_vc;
}

/* ---- signal-safe calls (event.c) ------------------------------------------------
 *
 * weft_unpark(), weft_sem_post() (through weft_futex_wake()) and
 * weft_vcore_notify() may be called from a signal handler. Such a call may
 * have interrupted weft's own code on the same kernel thread, holding a lock
 * it needs or half-way through a queue operation; weft__reentered() says
 * when that may be so, and the call then leaves its work on a vcore's sigq
 * (lock-free, no allocation) for the vcore to do at its next decision.
 * weft__tls_crit's top bit (WEFT__CRIT_SWITCH) is set while a uthread
 * switch is under way on this kernel thread (uthread.c). */
#define WEFT__CRIT_SWITCH 0x80000000u /* in weft__tls_crit: a switch is under way */
static inline bool weft__on_altstack(struct weft__vcore *vc)
{
    char here;
    return (uintptr_t)&here - (uintptr_t)vc->altstack < WEFT__ALTSTACK_SIZE; /* SA_ONSTACK */
}
/* weft__interrupted(vc): weft's own code may be running underneath on this
 * kernel thread (vc: its vcore, or NULL): a lock, a scheduler op or a switch
 * (weft__tls_crit), vcore context (callbacks too), or an application
 * scheduler's op. What unpark and wake must then leave to the vcore. */
static inline bool weft__interrupted(struct weft__vcore *vc)
{
    if (WEFT__CRIT_LOAD())
        return true;
    if (!vc)
        return false;
    struct weft_uthread *ut = vc->current;
    /* in_sched moves only around an application's ops: the built-in
     * schedulers' wake-ups leave the struct's second line alone. */
    return !ut || (weft__rt.sched_foreign && ut->in_sched);
}
/* weft__reentered(vc): the same, or running on the vcore's signal stack
 * (an SA_ONSTACK handler): nothing may switch from there either. */
static inline bool weft__reentered(struct weft__vcore *vc)
{
    return weft__interrupted(vc) || (vc && weft__on_altstack(vc));
}
/* weft__refused_here(): a call that blocks, switches or allocates, made
 * where it may have interrupted weft's own code on this kernel thread (a
 * signal handler's call), fails with EDEADLK instead of deadlocking. What a
 * handler interrupting application code does cannot be told apart from a
 * plain call: those calls are not async-signal-safe (weft.h). Vcore context
 * keeps its own rules (it never blocks). */
static inline bool weft__refused_here(void)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    if (!vc || !vc->current) /* vcore context is itself a switch under way */
        return (WEFT__CRIT_LOAD() & ~WEFT__CRIT_SWITCH) != 0;
    return weft__reentered(vc);
}
void weft__sigq_init(struct weft__vcore *vc);
/* weft__defer_*: leave the work for a vcore (the caller's, t's last, or
 * vcore 0 from an outside thread). unpark never fails; the others return
 * false when the queue is full (a wake-up then wakes every futex sleeper at
 * the vcore's next decision, so it is never lost; a message is refused). */
void weft__defer_unpark(struct weft__vcore *vc, struct weft_uthread *t);
void weft__defer_futex_wake(struct weft__vcore *vc, uint32_t *addr, int n);
bool weft__defer_msg(struct weft__vcore *target, unsigned type, uintptr_t payload);
/* weft__sigq_put_msg(): queue a message only (no attention); false if full. */
bool weft__sigq_put_msg(struct weft__vcore *target, unsigned type, uintptr_t payload);
/* weft__sigq_drain(vc, handle_msgs): does what vc's queue holds and returns
 * how many: vcore context (handle_msgs), or weft_shutdown after the vcores
 * stopped (!handle_msgs: the futex wake-ups still queued, for kernel threads
 * waiting on weft futexes, are made; messages, as always after the last
 * decision, are not handled). */
uint64_t weft__sigq_drain(struct weft__vcore *vc, bool handle_msgs);
/* weft__vcore_wake_signal_safe(): weft_vcore_wake() without the idle lock
 * (a parked vcore takes itself off the list when it wakes). */
void weft__vcore_wake_signal_safe(struct weft__vcore *vc);
/* weft__futex_wake_now(): weft_futex_wake() without the deferral. */
int weft__futex_wake_now(uint32_t *addr, int n);
/* weft__futex_wake_everyone(): wake every sleeper in the futex table. */
void weft__futex_wake_everyone(void);

/* weft__now_ns() is weft_now_ns() for weft's own use: no safe point (the
 * caller may hold a lock). */
static inline uint64_t weft__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Outside calls. A kernel thread that is not a vcore enters an exported call
 * that touches the vcores (spawn, alarm start/stop/reset, notify, poke,
 * preempt, stats, the preemption period, vcore requests and releases,
 * priority changes) through weft__outside_enter() and leaves it through
 * weft__outside_leave(); weft_shutdown() refuses new ones and waits for the
 * admitted ones before it frees anything. Uthreads and vcore context need
 * neither: shutdown waits for every uthread, and stops the vcores last.
 * how: WEFT__GATE_USE (the runtime must be running), WEFT__GATE_START (start
 * it with defaults if it is off), WEFT__GATE_SPAWN (as START, and refused
 * as soon as a shutdown begins: it waits for the uthreads, and no new one
 * may join them from outside). Returns 0 (admitted: call leave), EAGAIN
 * (USE, runtime off), ESHUTDOWN (a shutdown is under way), or weft_init()'s
 * error. */
enum { WEFT__GATE_USE, WEFT__GATE_START, WEFT__GATE_SPAWN };
int weft__outside_enter(int how);
static inline void weft__outside_leave(void)
{
    atomic_fetch_sub_explicit(&weft__rt.outside_calls, 1, memory_order_release);
}

/* After fork(), in the child (vcore.c's handler calls each): put the
 * module's process-wide state back to "never started", without freeing what
 * the parent's threads may have been changing. weft__uthread_forked(ut):
 * the calling kernel thread was uthread ut (or NULL) in the parent. */
void weft__uthread_forked(struct weft_uthread *ut);
void weft__notif_forked(void);
void weft__stack_forked(void);
void weft__futex_forked(void);
void weft__io_forked(void);
void weft__board_forked(void);

/* weft__board_attach_env(): WEFT_BOARD=<name> attaches at weft_init (board.c);
 * a failure is reported on stderr, not returned. */
void weft__board_attach_env(void);

/* weft__keys_exit(ut) runs ut's key destructors and frees its values
 * (key.c): called by ut itself as it finishes, before it leaves its stack. */
void weft__keys_exit(struct weft_uthread *ut);

/* weft__sched_resolve() sets rt->take_local, rt->take_yield,
 * rt->thread_runnable and rt->reclaim from rt->ops (uthread.c). */
void weft__sched_resolve(struct weft__runtime *rt);

/* weft__spin_ns: how long an idle vcore spins before it parks. */
extern uint64_t weft__spin_ns;

/* weft__vcore_loop(): vcore context's scheduling loop (vcore.c). */
_Noreturn void weft__vcore_loop(struct weft__vcore *vc);
/* weft__vcore_restart(): the same, begun again at the top of the vcore
 * stack, for vcore context deep in a call chain that cannot return (a
 * uthread it was about to run went elsewhere: stackcopy.c). */
_Noreturn void weft__vcore_restart(struct weft__vcore *vc);

/* weft__live_return(vc, n): vc gives back n of the live count it holds
 * (uthread.c); every idle moment gives back all of it. */
void weft__live_return(struct weft__vcore *vc, int n);

/* weft__shutdown_waiting(on): weft_shutdown() waits for rt.live to reach 0. */
void weft__shutdown_waiting(bool on);

/* weft__vcore_entry(vc): the top of vcore context after
 * weft_uthread_yield(): runs vc->cb on the uthread that switched out. */
void weft__vcore_entry(void *vc);

/* weft__vcore_next(): vcore context goes on with vc->copy_next if a switch
 * chose that stack-copy successor (uthread.c), else schedules. */
_Noreturn void weft__vcore_next(struct weft__vcore *vc);

/* weft__vcore_became_busy() is weft__vcore_leave_idle()'s slow path: the
 * vcore was spinning or parking (vcore.c, steps 2 and 3). */
void weft__vcore_became_busy(struct weft__vcore *vc);
/* weft__vcore_leave_idle(): the vcore is about to run a uthread (leaves idle state). */
static inline void weft__vcore_leave_idle(struct weft__vcore *vc)
{
    if (WEFT__UNLIKELY(atomic_load_explicit(&vc->idle, memory_order_relaxed) != WEFT__BUSY))
        weft__vcore_became_busy(vc);
}

/* weft__chores_due() says whether the coming scheduling decision must run
 * weft__vcore_chores() first: events are pending, or, at every 16th
 * decision, an alarm of this vcore is due, or (every 64th) uthreads wait for
 * I/O and nobody has looked at the poller for 200 us, so I/O is noticed even
 * when no vcore is idle. Two loads when neither an alarm nor an I/O waiter
 * is pending; a clock read (weft__chores_late, out of line) at every 16th
 * decision when one is: a pending alarm that is not due, a server's
 * timeouts, no longer sends every 16th decision through vcore context.
 * The caller counts the decision (vc->decisions++) after it. */
#define WEFT__CHORES_EVERY 16u
static inline bool weft__io_waiting(struct weft__vcore *self);
bool weft__chores_late(struct weft__vcore *vc, uint64_t d);
static inline bool weft__chores_due(struct weft__vcore *vc)
{
    if (WEFT__UNLIKELY(atomic_load_explicit(&vc->ev.bits, memory_order_relaxed) != 0))
        return true;
    uint64_t d = vc->decisions + 1;
    if (WEFT__LIKELY((d & (WEFT__CHORES_EVERY - 1)) != 0))
        return false;
    return (atomic_load_explicit(&vc->heap.min, memory_order_relaxed) != UINT64_MAX ||
            ((d & 63) == 0 && weft__io_waiting(vc))) &&
           weft__chores_late(vc, d);
}

/* I/O waiters: uthreads (and kernel threads) parked on a descriptor or a
 * ring request. Idle and busy vcores keep an eye on the poller while there
 * are any. Each is counted on the vcore where it begins to wait (kernel
 * threads: weft__io_nwaiting), so that a wait's two RMWs hit a line of its
 * own vcore's (another's only when it resumed elsewhere) instead of one line
 * that every vcore's I/O writes. A count never goes below zero (a waiter
 * ends its wait after it began it, on the same counter), so "nobody waits"
 * read from all of them misses only waiters that began after their counter
 * was read: as with a single counter read a moment earlier. */
extern _Atomic int weft__io_nwaiting;

static inline struct weft__vcore *weft__io_wait_begin(void)
{
    struct weft__vcore *vc = weft__vc();
    atomic_fetch_add_explicit(vc ? &vc->io_waiting : &weft__io_nwaiting, 1,
                              memory_order_relaxed);
    return vc;
}

/* weft__io_wait_end(): vc is what weft__io_wait_begin returned. */
static inline void weft__io_wait_end(struct weft__vcore *vc)
{
    atomic_fetch_sub_explicit(vc ? &vc->io_waiting : &weft__io_nwaiting, 1,
                              memory_order_relaxed);
}

/* weft__io_waiting(): does anyone wait for I/O? self (the caller's vcore, or
 * NULL) is looked at first: on a busy I/O server it has waiters. */
static inline bool weft__io_waiting(struct weft__vcore *self)
{
    if (self && atomic_load_explicit(&self->io_waiting, memory_order_relaxed) > 0)
        return true;
    if (atomic_load_explicit(&weft__io_nwaiting, memory_order_relaxed) > 0)
        return true;
    for (int i = 0; i < weft__rt.nvcores; i++)
        if (atomic_load_explicit(&weft__rt.vcores[i].io_waiting, memory_order_relaxed) > 0)
            return true;
    return false;
}

/* weft__stat_add() adds n to one of vc's counters (written by vc only;
 * others read them relaxed). On x86-64 one add to memory: an aligned 8-byte
 * store is single-copy atomic there, so a reader sees the old or the new
 * value, and no other thread writes the word (a relaxed load and store
 * would be three instructions on every switch). TSan builds keep the atomic
 * accesses it can see. */
static inline void weft__stat_add(_Atomic uint64_t *c, uint64_t n)
{
#if defined(__x86_64__) && !defined(WEFT__SPIN_TSAN)
    __asm__("addq %1, %0" : "+m"(*(uint64_t *)c) : "er"(n));
#else
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
#endif
}

/* weft__vcore_chores() handles this vcore's events, runs its due alarms and
 * the paced poll. */
void weft__vcore_chores(struct weft__vcore *vc);

/* weft__vcore_duty_wake(deadline): an alarm due at deadline was added (0: a
 * poller started): wake the duty holder if it sleeps for longer, or a parked
 * vcore to take the duty if nobody holds it. */
void weft__vcore_duty_wake(uint64_t deadline);
/* weft__vcore_heap_armed(owner, deadline): the earliest alarm of owner's heap
 * is now due at deadline: wake whoever must run it (owner itself if it is
 * offline, else as weft__vcore_duty_wake). */
void weft__vcore_heap_armed(struct weft__vcore *owner, uint64_t deadline);

/* weft__stack_leave() is what a switch does, after the save, for a uthread
 * without a guard page: its canary is checked (aborting with the overflow
 * message if gone), or, stack-copy, its stack is copied out (stackcopy.c). */
void weft__stack_leave(struct weft__vcore *vc, struct weft_uthread *t);

/* ---- per-uthread TLS (tls.c) ----------------------------------------------------
 * WEFT_TLS=uthread: each uthread has its own static TLS area and thread
 * pointer. weft__tls_enter(vc, t) installs t's on vc (weft's own words and
 * the vcore's tid carried into it first); weft__tls_leave(vc) installs the
 * kernel thread's own. The switch paths call them through WEFT__TLS_ENTER /
 * WEFT__TLS_LEAVE: one predictable branch each in the default, shared mode. */
extern bool weft__tls_uthread;       /* fixed while the runtime runs */
/* weft__tls_default_uthread: the mode when neither weft_config.tls nor
 * WEFT_TLS says (the pthread layer sets it: threads expect their own TLS). */
WEFT__EXPORT extern bool weft__tls_default_uthread;
int weft__tls_init(void);            /* 0, or ENOTSUP (said on stderr) / ENOMEM */
void weft__tls_fini(void);
void weft__tls_vcore_start(struct weft__vcore *vc);
void weft__tls_enter(struct weft__vcore *vc, struct weft_uthread *t);
void weft__tls_leave(struct weft__vcore *vc);
/* weft__tls_make(t, top) lays t's TLS area out below top (the top of its
 * stack) and returns the new top; weft__tls_exit(t) runs its C++
 * thread_local destructors and frees what glibc allocated for it (t itself,
 * just before it finishes). */
char *weft__tls_make(struct weft_uthread *t, char *top);
/* weft__tls_make_heap(t) gives a stack-copy uthread (no stack of its own)
 * its area from the heap: false without memory; weft__tls_free(t) frees it
 * when t's memory goes back to its pool. */
bool weft__tls_make_heap(struct weft_uthread *t);
void weft__tls_free(struct weft_uthread *t);
void weft__tls_exit(struct weft_uthread *t);
/* weft__tls_flag_mode_refused(): the yield pass's flag mode cannot work
 * (uthread TLS); says so once. */
bool weft__tls_flag_mode_refused(void);
#define WEFT__TLS_ENTER(vc, t)                                   \
    do {                                                         \
        if (WEFT__UNLIKELY(weft__tls_uthread))                   \
            weft__tls_enter(vc, t);                              \
    } while (0)
#define WEFT__TLS_LEAVE(vc)                                      \
    do {                                                         \
        if (WEFT__UNLIKELY(weft__tls_uthread))                   \
            weft__tls_leave(vc);                                 \
    } while (0)

/* weft__vcore_arrive() is the first step on the vcore stack after a uthread
 * switched out: completes the switch and returns the uthread, now saved. */
static inline struct weft_uthread *weft__vcore_arrive(struct weft__vcore *vc)
{
    WEFT__TLS_LEAVE(vc); /* first: vcore context runs on its kernel thread's TLS */
    weft__san_vcore_enter(&vc->san);
    struct weft_uthread *ut = vc->current;
    vc->current = NULL;
    if (WEFT__UNLIKELY(!ut->guarded))
        weft__stack_leave(vc, ut);
    return ut;
}

/* ---- events, notifications, preemption (event.c, preempt.c) ---------------- */

/* weft__events_handle() runs the handlers of everything posted to vc (vcore
 * context). Sets vc->preempt_now if a preemption is due for the uthread that
 * ran last here (nrun unchanged since the tick asked for it), or if a tick's
 * alarm or I/O event woke uthreads (they run first); sets vc->resched for a
 * scheduler's weft_vcore_preempt(). */
void weft__events_handle(struct weft__vcore *vc);
/* weft__resched_check() is notify_entry's after weft__events_handle(): a
 * scheduler asked to reconsider ut, the uthread interrupted here; ask
 * ops->should_preempt and set vc->preempt_now. With here (the caller must
 * resume on the spot) the request is left pending for ut's next safe point. */
void weft__resched_check(struct weft__vcore *vc, struct weft_uthread *ut, bool here);
/* weft__event_post_bits() posts weft's own payload-less events (a mask of
 * 1 << WEFT_EV_* or WEFT__EV_*) to vc without a lock: signal handlers use it. */
static inline void weft__event_post_bits(struct weft__vcore *vc, uint64_t bits)
{
    atomic_fetch_or_explicit(&vc->ev.bits, bits, memory_order_seq_cst);
}
/* weft__notif_deliver() switches ut (running on vc, notifications enabled)
 * into vcore context to handle vc's events; it resumes there at once unless
 * a preemption was due (then it is paused and runs again later, maybe
 * elsewhere). Returns when ut runs again (uthread.c). */
void weft__notif_deliver(struct weft__vcore *vc, struct weft_uthread *ut);
/* weft__yield_flags_wanted(): code compiled with the yield pass in flag mode
 * has registered (weft__yield_register): the ticker sets flags (yield.c). */
bool weft__yield_flags_wanted(void);
/* weft__notif_repoll(): the ticker must reconsider how vcores tick (a flag
 * mode module registered while running). */
void weft__notif_repoll(void);
/* weft__notif_signal() interrupts vc's kernel thread (preempt.c). */
void weft__notif_signal(struct weft__vcore *vc);
/* weft__notif_tell() signals vc for the events posted to it, unless a
 * signal is in flight already (ev.notif_sent; see event.c). */
static inline void weft__notif_tell(struct weft__vcore *vc)
{
    if (!atomic_exchange_explicit(&vc->ev.notif_sent, true, memory_order_seq_cst))
        weft__notif_signal(vc);
}
/* weft__notif_signo() is the notification signal's number (the board tells
 * other processes' vcores with it: from another process it means "look
 * again", WEFT__EV_RESCHED). */
int weft__notif_signo(void);
/* weft__safe_point(): deliver what is pending for the calling uthread, if
 * it may be switched here (a public entry of weft that holds nothing). */
void weft__safe_point_slow(struct weft__vcore *vc);
static inline void weft__safe_point(void)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    if (WEFT__UNLIKELY(vc && atomic_load_explicit(&vc->ev.bits, memory_order_relaxed)))
        weft__safe_point_slow(vc);
}
/* weft__resched_point(): the end of a public call that made uthreads
 * runnable and now holds nothing (not the async-signal-safe ones: a signal
 * handler's call must not switch): under a scheduler with priorities
 * (weft__rt.pi), its weft_vcore_preempt() of this vcore is taken here. */
static inline void weft__resched_point(void)
{
    if (WEFT__UNLIKELY(weft__rt.pi))
        weft__safe_point();
}
/* Process-wide set-up (weft_init / weft_shutdown) and per-vcore set-up on
 * the vcore's own thread (preempt.c); 0 or an errno value where one is returned. */
int weft__notif_init(unsigned preempt_us);
void weft__notif_vcore_start(struct weft__vcore *vc);
/* weft__notif_started(): the vcores run; start the ticker (0 or errno). */
int weft__notif_started(void);
/* weft__notif_stopping(): stop it, before the vcores are freed. */
void weft__notif_stopping(void);
/* weft__notif_sleeping(): vc is about to sleep in the kernel (true) or woke
 * (false): its tick timer stops and starts again. */
void weft__notif_sleeping(struct weft__vcore *vc, bool asleep);
void weft__notif_vcore_stop(struct weft__vcore *vc);
/* The handler stays installed after weft_shutdown(): a notification racing
 * with the shutdown must not meet the default action (terminate). */

/* ---- stacks (stack.c) -------------------------------------------------------- */

int weft__stack_init(void);
void weft__stack_fini(void);
int weft__stack_vcore_init(struct weft__vcore *vc);
void weft__stack_vcore_fini(struct weft__vcore *vc);
/* weft__uthread_alloc() returns a zeroed shell with a stack of size bytes
 * (already rounded), or NULL (ENOMEM). */
struct weft_uthread *weft__uthread_alloc(size_t size);
/* weft__uthread_free() returns t's memory to a cache or to the kernel. */
void weft__uthread_free(struct weft_uthread *t);
size_t weft__stack_round(size_t size);
extern size_t weft__page_size;

/* ---- waiting (sync/wait.c) ------------------------------------------------- */

#define WEFT__WAITING (-1)

/* struct weft__waiter is defined with the uthread, which embeds one. */

/* weft__waiter_init() readies w for a queue: unlinked, no uthread, status
 * WEFT__WAITING. (Inline, as the queue operations below: every block and
 * every wake-up goes through them.) */
static inline void weft__waiter_init(struct weft__waiter *w)
{
    w->next = w->prev = NULL;
    w->ut = NULL;
    w->word = 0;
    w->status = WEFT__WAITING;
    w->data = 0;
}

/* weft__waiter_mine() is the caller's waiter, initialised: its uthread's own
 * (never one on its stack: see struct weft_uthread), or local, on a kernel
 * thread's stack. Call it before anything that may switch. */
static inline struct weft__waiter *weft__waiter_mine(struct weft__waiter *local)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    struct weft__waiter *w = ut ? &ut->wait : local;
    weft__waiter_init(w);
    return w;
}

/* weft__waitq_push() appends w to q; weft__waitq_remove() unlinks w from q.
 * Under q's lock. q->n is written with atomic stores: weft__fd_pass peeks
 * at it without the lock. */
static inline void weft__waitq_push(struct weft__waitq *q, struct weft__waiter *w)
{
    weft__sc_check(w, "a waiter");
    w->next = NULL;
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    atomic_store_explicit(WEFT__AT(&q->n), q->n + 1, memory_order_relaxed);
}

static inline void weft__waitq_remove(struct weft__waitq *q, struct weft__waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->next = w->prev = NULL;
    atomic_store_explicit(WEFT__AT(&q->n), q->n - 1, memory_order_relaxed);
}
/* weft__waitq_pop() unlinks the oldest waiter (status set to 0) or returns NULL. */
struct weft__waiter *weft__waitq_pop(struct weft__waitq *q);

/* weft__waitq_take_all() unlinks every waiter (status 0) and returns them
 * as a list linked by next, for weft__waiter_wake_list(). */
struct weft__waiter *weft__waitq_take_all(struct weft__waitq *q);

/* weft__block_unlock() blocks the calling uthread (not a kernel thread),
 * which holds spinlock *lock and nothing else, queued where a waker that
 * takes *lock finds it: *lock is released once the uthread is saved (by
 * the switch itself, or by a callback after it), and a scheduler with
 * thread_has_blocked hears why. Returns when the uthread runs again
 * (uthread.c). */
void weft__block_unlock(uint32_t *lock, int why);

/* weft__wait() blocks the caller, already queued as w on q, until a waker
 * sets w->status and calls weft__waiter_wake(w), or until deadline (then w is
 * unlinked and ETIMEDOUT returned). The caller holds *lock (the lock that
 * guards q) and no other spinlock; weft__wait releases it. q may be NULL
 * without a deadline. why (enum weft_block_why) is what a scheduler's
 * thread_has_blocked hears. Returns w->status. Uthread or kernel thread;
 * inline for a uthread's untimed wait (weft__block_unlock); weft__wait_slow
 * arms a timed one's timer first. Inline, it reads the vcore as
 * weft__vc_at_entry() does: call it at most once in a function, before
 * anything there that may switch (a function that waits in a loop calls a
 * non-inline function that calls it, as weft__futex_wait_checked). */
int weft__wait_slow(uint32_t *lock, struct weft__waitq *q, struct weft__waiter *w,
                     uint64_t deadline_ns, int why);
static inline int weft__wait(uint32_t *lock, struct weft__waitq *q, struct weft__waiter *w,
                             uint64_t deadline_ns, int why)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* not used after the switch */
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (deadline_ns != WEFT_FOREVER || !ut)
        return weft__wait_slow(lock, q, w, deadline_ns, why);
    w->ut = ut;
    weft__block_unlock(lock, why);
    return w->status;
}

/* weft__waiter_wake() wakes a waiter unlinked by a waker; call it after
 * releasing the queue lock. w must not be touched afterwards. A uthread's
 * inline, a kernel thread's in weft__waiter_wake_kernel (sync/wait.c). */
void weft__waiter_wake_kernel(struct weft__waiter *w);
static inline void weft__waiter_wake(struct weft__waiter *w)
{
    struct weft_uthread *ut = w->ut;
    if (ut)
        weft_uthread_runnable(ut);
    else
        weft__waiter_wake_kernel(w);
}

/* weft__waiter_wake_list() wakes a NULL-terminated list linked by next. */
static inline void weft__waiter_wake_list(struct weft__waiter *w)
{
    while (w) {
        struct weft__waiter *next = w->next; /* read before w can vanish */
        weft__waiter_wake(w);
        w = next;
    }
}

/* weft__futex_wait_checked() is weft_futex_wait() for a caller that has
 * checked what it checks: addr non-NULL and aligned, the deadline valid,
 * and weft__refused_here() false (sem, cond, mutex do so anyway). */
int weft__futex_wait_checked(uint32_t *addr, uint32_t val, uint64_t deadline_ns);

/* Priority inheritance (sync/mutex.c, under a scheduler with
 * thread_prio_changed): weft__futex_wait_pi() is weft_futex_wait(addr, 2,
 * deadline) for a contended mutex whose owner token is *owner; under the
 * bucket lock it lends the caller's priority to the holder.
 * weft__futex_unlock_pi() releases a contended mutex: stores 0 in *addr and
 * wakes its most urgent sleeper, both under the bucket lock. */
int weft__futex_wait_pi(uint32_t *addr, void *const *owner, uint64_t deadline_ns);
void weft__futex_unlock_pi(uint32_t *addr);

/* weft__futex_waiters() counts the sleepers on addr in the futex table. */
int weft__futex_waiters(const uint32_t *addr);

/* weft__deadline_check() validates a deadline: 0 fine, EINVAL if absurd. */
static inline int weft__deadline_check(uint64_t d)
{
    return (d >> 63) && d != WEFT_FOREVER ? 22 /* EINVAL */ : 0;
}

/* weft__self_token() identifies the caller for lock ownership: its uthread,
 * or a per-kernel-thread address, which is odd (a uthread's is not). */
WEFT__EXPORT void *weft__self_token(void);

/* ---- priorities (uthread.c) ----------------------------------------------------- */

/* weft__prio_boost() raises the live uthread t to at least level for as
 * long as it holds mutex m (priority inheritance); weft__prio_unboost()
 * drops what t inherited through m (t itself, after releasing m). The
 * caller keeps t alive (it is m's holder: see mutex.c). Any context. */
void weft__prio_boost(struct weft_uthread *t, const void *m, int level);
void weft__prio_unboost(struct weft_uthread *t, const void *m);
/* weft__prio_init() sets a new uthread's priorities (spawn). */
void weft__prio_init(struct weft_uthread *t, int prio);

/* ---- I/O hooks for the vcore loop (io/fd.c) ----------------------------------- */

/* weft__io_active(): a poller has been started (some descriptor was used). */
bool weft__io_active(void);
/* weft__io_poll() waits for I/O until deadline (0 = just look), wakes the
 * waiters of what it found and returns how many. */
int weft__io_poll(uint64_t deadline);
/* weft__io_stale(): uthreads wait for I/O and nobody has polled for 200 us. */
bool weft__io_stale(uint64_t now);
/* weft__io_poll_if_stale() looks, without blocking, if nobody has for a while. */
void weft__io_poll_if_stale(uint64_t now);
/* weft__io_wakeup() interrupts the vcore blocked in weft__io_poll(). */
void weft__io_wakeup(void);
/* weft__io_wakeup_signal_safe() is weft__io_wakeup() from a signal handler:
 * done (true) if the poller's wake-up takes no lock (epoll's eventfd), else
 * false and nothing done. */
bool weft__io_wakeup_signal_safe(void);

/* ---- timers (alarm.c) ------------------------------------------------------- */

/* weft__alarm_stop_own() is weft_alarm_stop() for an alarm of a uthread's
 * own wait record, called by that uthread: it waits out a running callback
 * without sleeping. A sleep would be a wait, and a wait reuses the
 * uthread's waiter, which that very callback (a timeout) may be reading. */
bool weft__alarm_stop_own(struct weft_alarm *a);

/* weft__alarm_arm() puts a (deadline and cb set, not armed) on the calling
 * vcore's heap (round robin from outside). Returns 0, or ENOMEM (the heap
 * could not grow; a stays unarmed). */
int weft__alarm_arm(struct weft_alarm *a);
/* weft__timers_next() is the earliest deadline of all heaps, or UINT64_MAX. */
uint64_t weft__timers_next(void);
/* weft__timers_run() runs vc's own callbacks due at now; the _all variant
 * those of every heap. True if any ran. Vcore context. */
bool weft__timers_run(struct weft__vcore *vc, uint64_t now);
bool weft__timers_run_all(struct weft__vcore *vc, uint64_t now);
void weft__heap_fini(struct weft__heap *h);

#endif
