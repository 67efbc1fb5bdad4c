/*
 * vcore.c — the scheduler core: vcores, vcore context, idling and waking.
 *
 * Vocabulary
 * ----------
 * vcore          a kernel thread pinned to one CPU of the process's affinity
 *                mask, created by weft_init(). The kernel sees only these.
 * uthread        a user-level thread: a saved context, a stack, a state.
 * vcore context  what a vcore runs between uthreads: this file's loop, the
 *                scheduler's ops, timer callbacks, event handlers. It runs
 *                on the vcore's own small stack, always entered at the top
 *                (nothing is restored), and is never interrupted by weft. It
 *                never runs application code but its callbacks.
 * scheduler      a const struct weft_sched_ops (src/sched/): it owns runnable
 *                uthreads and picks the next one (take_local, sched_entry).
 * local work     what the scheduler can hand this vcore without stealing or
 *                waiting: its own queues (ops->take_local).
 *
 * How a uthread stops running
 * ---------------------------
 * weft_uthread_yield(cb, arg) (and weft_park, weft_yield, exit, which are
 * the same with their own callbacks) saves the uthread's registers on its
 * own stack, leaves that stack, and only then calls cb(uthread, arg). From
 * that moment another vcore may touch the uthread, so a blocking primitive
 * queues itself while holding its queue's spinlock and lets cb release the
 * lock: a waker cannot see the uthread before its context is saved, and no
 * "about to sleep" flag is needed against lost wake-ups. Where cb runs:
 *   1. The direct hand-off (uthread.c, handoff): the scheduler names the
 *      next local uthread first (ops->take_local; for a yield,
 *      ops->take_yield, which may queue the yielder at once where only this
 *      vcore can take it before its next decision, after the save: the one
 *      exception to "publish after the save", invisible to every other
 *      thread; such a yield has no callback left to run and switches with
 *      a plain weft__ctx_swap, yield_swap; a park's one step after the
 *      save, publishing the parker, is done by the switch itself on the
 *      next stack, weft__ctx_swap_park, park_swap, and so is a wait's,
 *      releasing the wait queue's lock, weft__ctx_swap_unlock,
 *      weft__block_unlock); or, for a block, the runtime takes the
 *      scheduler's next slot itself where the scheduler keeps one (struct
 *      weft_next_slot in <weft/sched.h>, ws's `next`): a wake-up here by a
 *      uthread running here, of one that last ran here, fills it without
 *      ops->thread_runnable (uthread.c, slot_wake), and the block takes it
 *      without ops->take_local within the budget the scheduler left
 *      (local_pick, and weft_park's slot_swap_next, after which weft_park
 *      makes no call before the switch); weft__ctx_switch saves
 *      the current one, moves to the next one's stack and runs cb there,
 *      below the next one's saved frame, with vc->current NULL (so it runs
 *      under vcore-context rules: a notification defers, weft_self() is
 *      NULL); then the next uthread resumes. One save, one restore, calls
 *      and returns that pair up (the CPU's return-stack predictor stays
 *      right), and no run-wide state is written. An exit first wakes the
 *      uthread waiting to join it (uthread.c, exit_wake), so the joiner can
 *      be that successor, and a uthread's function is entered by a jump
 *      (weft__ctx_trampoline), so a finished one leaves just the final
 *      switch's return prediction behind.
 *   2. Through vcore context: when the scheduler has no local successor,
 *      when chores are due (events, alarms, the paced poll), or when the
 *      scheduler has no take_local op: the uthread is saved, the vcore
 *      stack entered at its top, cb runs there, and the loop below picks
 *      (sched_entry steals) or idles. Preemption always comes this way, and
 *      so does a hand-off *to* a stack-copy uthread (its stack is a run
 *      stack that may still hold the leaving uthread's frames): cb runs on
 *      the vcore stack, then the successor is copied in and resumed
 *      (vc->copy_next, weft__vcore_next; stackcopy.c). A stack-copy uthread
 *      that leaves is copied out first, on whichever stack cb runs.
 * Rejected: ucontext (a signal-mask syscall per switch); running cb before
 * the save (the next uthread would run before the previous one is safely
 * queued, and every primitive would need the flag dance); always going
 * through vcore context (two half-switches and six calls that never
 * return per block: the return-stack predictor then mispredicts the
 * resumed uthread's returns).
 *
 * Where runnable uthreads go is the scheduler's business; the default one
 * (sched/ws.c) keeps each vcore's work on rings only their owner pushes to
 * (thieves take half with one CAS) and a `next` slot that only the owner
 * touches, filled by a waker on the same vcore without an atomic RMW (by
 * the runtime itself in the common case, above), and sends a woken uthread
 * to its waker's vcore (Go's runnext, tokio's LIFO slot). The core only
 * promises the protocol below.
 *
 * Idle vcores: spinning and parking
 * ---------------------------------
 * A vcore with nothing to run first *looks*: LOOK_ROUNDS rounds of
 * sched_entry (which steals) while it still counts as busy, so the short
 * idle moments of a vcore that waits for another's reply touch no
 * run-wide counter. Then it *spins*: it keeps calling sched_entry until
 * weft__spin_ns have passed, then *parks* on its futex park.word. At
 * most half of the vcores that are not parked spin that long
 * (Go's rule: idle vcores must not crowd the busy ones' queues); one over
 * it spins a tenth as long, and one with pinned uthreads (their work comes
 * back to it only) the full time. Two counters keep wake-ups cheap and
 * exact, read on the wake path and written only when a vcore changes
 * between busy, spinning and parked:
 *   rt.nspinning  vcores spinning, plus vcores woken and not yet running;
 *   rt.nparked    vcores on the idle list.
 * The protocol (Go's, in runtime/proc.go, adapted):
 *   1. Whoever makes work runnable where a parked vcore may be the only one
 *      to look (a shared queue, such as ws's injection queue) queues it, then
 *      calls weft_vcore_kick(): after a full fence, if nparked == 0 or
 *      nspinning != 0, return: a spinner will find the work. Otherwise CAS
 *      nspinning 0 -> 1 (only one kicker wins), take one vcore off the idle
 *      list (the hinted one if it is parked) and wake it; it counts as the
 *      spinner the kicker created. Work queued on the caller's own queues
 *      uses weft_vcore_kick_local(): the same test without the fence, since
 *      the caller looks at its own queues before it can park (a kick lost
 *      to a vcore parking that instant leaves the work to its busy owner,
 *      never stranded).
 *   2. A spinning vcore that finds work leaves the spinning count; if it was
 *      the last spinner it kicks again, so a burst of work fans out to
 *      parked vcores one at a time instead of all at once (no thundering
 *      herd) and never stays behind on one busy vcore.
 *   3. A spinner that gives up puts itself on the idle list (nparked++),
 *      then leaves the spinning count and issues a full fence (an RMW alone
 *      is not one on aarch64 without LSE), then calls sched_entry once
 *      more. Against step 1 this is Dekker's pattern:
 *      either the kicker sees nspinning == 0 with us parked and wakes us, or
 *      our re-check sees its work. If the re-check finds work we take
 *      ourselves off the idle list and kick again as in step 2: kickers
 *      that saw us spinning left their work to us, and the re-check runs
 *      only the first uthread it finds. (If a kicker already took us off
 *      the list, we accept being its spinner and leave as step 2 says.) So
 *      no wake-up is lost and none is counted twice.
 *   4. Work only one vcore may run (a WEFT_PINNED uthread, a uthread placed
 *      in its inbox) uses weft_vcore_wake(id), which wakes that vcore even
 *      if others spin.
 * One parked vcore at a time holds the duty (rt.duty_vcore): it sleeps
 * until the nearest alarm deadline of all heaps, in the poller once any
 * descriptor is in use. A new alarm due earlier wakes it, or wakes a parked
 * vcore to take the duty if nobody has it. Busy vcores run their own due
 * alarms every 16th scheduling decision (weft__chores_due). One parked
 * vcore at a time (rt.watch_vcore) also watches the busy ones while any is
 * awake, waking every 10 ms to poke one that ran a single uthread all
 * along (see vcore_watch below).
 *
 * Vcores at run time (weft_vcores_request/release, a scheduler with
 * vcore_up/down): every CPU of the mask has a vcore thread from weft_init
 * on; those beyond rt.nonline are offline (vcore_offline below): they nap
 * off the idle list, so kicks never count on them, handle only their
 * events and their own alarms, and take no uthreads.
 *
 * Invariants relied on here (numbered as in docs/ARCHITECTURE.md)
 * 1. A uthread is on at most one queue, and touched by another vcore only
 *    after its context is saved: weft_uthread_runnable() aborts otherwise.
 * 2. Per-vcore state is read through weft__vc(), never a cached TLS address.
 * 4. Vcore context blocks in the kernel only in vcore_sleep(), and in
 *    vcore_nap(), which stands for it outside the idle list: a scheduler's
 *    cede (bounded by its deadline, woken by events) and an offline vcore.
 * 5. Spinning is bounded: weft__spin_ns, then park.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

struct weft__runtime weft__rt = { .duty_vcore = -1, .watch_vcore = -1 };
uint64_t weft__spin_ns = 50000;
#define LOOK_ROUNDS 16 /* idle rounds a busy vcore looks for work before it counts as spinning */

/* initial-exec: a plain %fs/tpidr load, no __tls_get_addr (also in the SIGSEGV handler). */
__thread struct weft__vcore *weft__tls_vc __attribute__((tls_model("initial-exec")));
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- small services (the spinlock and futex wrappers: spin.c; weft__panic: sys.c) -- */

WEFT__NOINLINE struct weft__vcore *weft__vc(void)
{
    struct weft__vcore *vc = weft__tls_vc;
    __asm__ volatile("" : "+r"(vc)); /* not pure: never CSE'd across a switch */
    return vc;
}

uint64_t weft_now_ns(void)
{
    weft__safe_point(); /* a public entry: the caller holds nothing of ours */
    return weft__now_ns();
}

int weft_vcore_id(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* an exported call: nothing cached across */
    return vc ? vc->id : -1;
}

int weft_num_vcores(void)
{
    return atomic_load_explicit(&weft__rt.state, memory_order_acquire) == WEFT__RUNNING_RT
               ? atomic_load_explicit(&weft__rt.nonline, memory_order_relaxed) : 0;
}

int weft_vcore_cpu(int id)
{
    struct weft__runtime *rt = &weft__rt;
    return atomic_load_explicit(&rt->state, memory_order_acquire) == WEFT__RUNNING_RT && id >= 0 &&
                   id < rt->nvcores
               ? rt->vcores[id].cpu : -1;
}

/* dump_line() formats one line into fd; async-signal-safe but for the
 * formatting (no locks, no allocation). */
static void dump_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dump_line(int fd, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1;
    for (int off = 0; n > 0 && off < n;) {
        ssize_t w = write(fd, buf + off, (size_t)(n - off));
        if (w <= 0)
            break;
        off += (int)w;
    }
}

void weft_dump(int fd)
{
    struct weft__runtime *rt = &weft__rt;
    static const char *const idle_names[] = { "busy", "spinning", "parking", "offline" };
    static const char *const kinds[] = { "?", "park", "woke", "kick", "wake", "busy" };
    int state = atomic_load_explicit(&rt->state, memory_order_acquire);
    if (state != WEFT__RUNNING_RT) {
        /* Scalars only: the vcores may be being freed. What a hung
         * weft_shutdown (or weft_init) waits for is among these. */
        dump_line(fd, "weft: not running (%s)%s, %u uthreads live, %d outside calls, %d outside "
                      "wake-ups\n",
                  state == WEFT__STOPPING ? "stopping" : "off",
                  atomic_load_explicit(&rt->closing, memory_order_relaxed) ? ", closing" : "",
                  atomic_load_explicit(WEFT__AT(&rt->live), memory_order_relaxed),
                  atomic_load_explicit(&rt->outside_calls, memory_order_relaxed),
                  atomic_load_explicit(&rt->outside_wakers, memory_order_relaxed));
        return;
    }
    uint64_t now = weft__now_ns();
    dump_line(fd, "weft: %d vcores, scheduler %s, %u uthreads live, %d spinning, %d parked, "
                  "timer duty vcore %d\n",
              rt->nvcores, rt->ops->name, atomic_load_explicit(WEFT__AT(&rt->live), memory_order_seq_cst),
              atomic_load_explicit(&rt->nspinning, memory_order_relaxed),
              atomic_load_explicit(&rt->nparked, memory_order_relaxed),
              atomic_load_explicit(WEFT__ATOMIC(int, &rt->duty_vcore), memory_order_relaxed));
    for (int i = 0; i < rt->nvcores; i++) {
        struct weft__vcore *vc = &rt->vcores[i];
        int idle = atomic_load_explicit(&vc->idle, memory_order_relaxed);
        struct weft_vcore_stats st;
        if (weft_stats(i, &st) != 0)
            memset(&st, 0, sizeof st);
        dump_line(fd, "  vcore %d: %s%s, decisions %llu, kicks sent %llu, parks %llu, events "
                      "pending %#llx, park word %u\n",
                  i, idle >= 0 && idle < 4 ? idle_names[idle] : "?",
                  atomic_load_explicit(&vc->park.parked, memory_order_relaxed) ? " (on the idle list)" : "",
                  (unsigned long long)st.decisions, (unsigned long long)st.kicks,
                  (unsigned long long)st.parks,
                  (unsigned long long)atomic_load_explicit(&vc->ev.bits, memory_order_relaxed),
                  atomic_load_explicit(WEFT__AT(&vc->park.word), memory_order_relaxed));
        unsigned n = atomic_load_explicit(&vc->park.trace_n, memory_order_acquire);
        for (unsigned k = n > WEFT__TRACE ? n - WEFT__TRACE : 0; k < n; k++) {
            struct weft__trace *e = &vc->park.trace[k % WEFT__TRACE];
            int kind = atomic_load_explicit(&e->kind, memory_order_relaxed);
            uint64_t t = atomic_load_explicit(&e->t_ns, memory_order_relaxed);
            dump_line(fd, "    %10.3f ms ago: %s %d\n", t <= now ? (double)(now - t) / 1e6 : 0.0,
                      kind > 0 && kind < 6 ? kinds[kind] : "?",
                      atomic_load_explicit(&e->arg, memory_order_relaxed));
        }
    }
}

/* affinity_cpus() fills cpus[] with the CPUs of our affinity mask. */
static int affinity_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        for (int i = 0; i < c && n < max; i++)
            cpus[n++] = i;
        return n > 0 ? n : 1;
    }
    for (int i = 0; i < CPU_SETSIZE && n < max; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    return n;
}

int weft_max_vcores(void)
{
    int cpus[CPU_SETSIZE];
    return affinity_cpus(cpus, CPU_SETSIZE);
}

/* vc->idle is written by its own vcore only, read by schedulers on others
 * (weft_vcore_busy): relaxed atomics, plain loads and stores in the code. */
static int idle_of(struct weft__vcore *vc)
{
    return atomic_load_explicit(&vc->idle, memory_order_relaxed);
}

static void set_idle(struct weft__vcore *vc, int state)
{
    atomic_store_explicit(&vc->idle, state, memory_order_relaxed);
}

int weft_vcore_parking(void)
{
    struct weft__vcore *vc = weft__vc();
    return vc && idle_of(vc) == WEFT__PARKING;
}

int weft_vcore_next_slot_set(int vcore, struct weft_next_slot *slot)
{
    if (vcore < 0 || vcore >= weft__rt.nvcores || !weft__rt.vcores)
        return EINVAL;
    if (slot && atomic_load_explicit(&weft__rt.state, memory_order_acquire) == WEFT__RUNNING_RT)
        return EBUSY; /* vcores run: a slot may only be taken away */
    if (slot && !weft__rt.take_local)
        return ENOTSUP; /* the slot is take_local's: no take_local, no slot */
    __atomic_store_n(&weft__rt.vcores[vcore].nslot, slot, __ATOMIC_RELAXED);
    return 0;
}

int weft_vcore_busy(int id)
{
    return id >= 0 && id < weft__rt.nvcores && idle_of(&weft__rt.vcores[id]) == WEFT__BUSY;
}

uint32_t weft_sched_rand(void)
{
    struct weft__vcore *vc = weft__vc();
    if (!vc)
        return (uint32_t)weft__now_ns() * 2654435761u;
    uint32_t x = vc->rand; /* xorshift32 */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return vc->rand = x;
}

/* ---- the scheduler registry ---------------------------------------------- */

extern const struct weft_sched_ops weft__sched_ws, weft__sched_fifo, weft__sched_prio;

#define MAX_SCHEDS 16
static const struct weft_sched_ops *scheds[MAX_SCHEDS] = { &weft__sched_ws, &weft__sched_fifo,
                                                           &weft__sched_prio };
static int nscheds = 3;

int weft_sched_register(const struct weft_sched_ops *ops)
{
    if (!ops || !ops->name || !ops->name[0] || !ops->sched_entry || !ops->thread_runnable ||
        !ops->thread_paused)
        return EINVAL;
    weft__sys.pthread_mutex_lock(&init_lock);
    int r = 0;
    for (int i = 0; i < nscheds; i++)
        if (strcmp(scheds[i]->name, ops->name) == 0)
            r = EEXIST;
    if (!r && nscheds == MAX_SCHEDS)
        r = ENOSPC;
    if (!r)
        scheds[nscheds++] = ops;
    weft__sys.pthread_mutex_unlock(&init_lock);
    return r;
}

static const struct weft_sched_ops *sched_find(const char *name)
{
    for (int i = 0; i < nscheds; i++)
        if (strcmp(scheds[i]->name, name) == 0)
            return scheds[i];
    return NULL;
}

/* ---- configuration --------------------------------------------------------- */

struct settings {
    int vcores;
    size_t stack_size;
    unsigned preempt_us;
    const struct weft_sched_ops *ops;
    bool stack_copy;
    bool tls_uthread;
    bool tls_asked;                  /* by cfg or WEFT_TLS, not by weft__tls_default_uthread */
};

/* settings_from() merges cfg, the environment and defaults; 0 or errno. */
static int settings_from(const struct weft_config *cfg, int maxv, struct settings *s)
{
    struct weft_config c = { 0 };
    if (cfg)
        c = *cfg;
    if (c.vcores < 0 || c.vcores > maxv)
        return EINVAL;
    if (c.stack_size > ((size_t)1 << 30) || c.stack_copy < 0 || c.stack_copy > 1)
        return EINVAL;

    s->vcores = c.vcores;
    if (!s->vcores) {
        long long v = weft__cfg_num(WEFT__CFG_VCORES, 0);
        if (v > maxv) {
            fprintf(stderr, "weft: WEFT_VCORES=%lld is above the %d CPUs we may use; using %d\n",
                    v, maxv, maxv);
            v = maxv;
        }
        s->vcores = v > 0 ? (int)v : maxv;
    }
    size_t ss = c.stack_size;
    if (!ss)
        ss = (size_t)weft__cfg_num(WEFT__CFG_STACK_SIZE, 0);
    if (!ss)
        ss = 256 * 1024;
    s->stack_size = weft__stack_round(ss);
    s->preempt_us = c.preempt_us;
    if (!s->preempt_us) {
        long long v = weft__cfg_num(WEFT__CFG_PREEMPT_US, -1);
        if (v > 0 && v < 10) {
            fprintf(stderr, "weft: WEFT_PREEMPT_US=%lld is below 10 us; using 10\n", v);
            v = 10;
        }
        s->preempt_us = v >= 0 ? (unsigned)v : weft_preempt_period();
    } else if (s->preempt_us < 10 || s->preempt_us > 10000000) {
        return EINVAL;
    }
    s->stack_copy = c.stack_copy == 1;
    if (!c.stack_copy)
        s->stack_copy = weft__cfg_num(WEFT__CFG_STACK_COPY, 0) == 1;
    const char *name = c.sched;
    if (!name || !*name)
        name = weft__cfg_str(WEFT__CFG_SCHED);
    if (!name || !*name)
        name = "ws";
    s->ops = sched_find(name);
    if (!s->ops) {
        fprintf(stderr, "weft: unknown scheduler \"%s\"\n", name);
        return EINVAL;
    }
    if (c.tls != 0 && c.tls != WEFT_TLS_SHARED && c.tls != WEFT_TLS_UTHREAD)
        return EINVAL;
    s->tls_uthread = c.tls == WEFT_TLS_UTHREAD;
    s->tls_asked = c.tls != 0;
    if (!c.tls) {
        const char *t = weft__cfg_str(WEFT__CFG_TLS); /* shared or uthread */
        if (t) {
            s->tls_uthread = strcmp(t, "uthread") == 0;
            s->tls_asked = true;
        }
        if (!s->tls_asked)
            s->tls_uthread = weft__tls_default_uthread;
    }
    return 0;
}

/* ---- vcore threads ------------------------------------------------------- */

static void vcore_first_entry(void *arg);

static void *vcore_thread(void *arg)
{
    struct weft__vcore *vc = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(vc->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    weft__tls_vc = vc;
    vc->errno_addr = &errno;
    weft__tls_vcore_start(vc);
    weft__san_thread(&vc->san);
    stack_t ss = { .ss_sp = vc->altstack, .ss_size = WEFT__ALTSTACK_SIZE, .ss_flags = 0 };
    sigaltstack(&ss, NULL);
    weft__notif_vcore_start(vc); /* without its own timers, the ticker serves it */

    /* Enter vcore context; weft__vcore_loop comes back here to exit. */
    weft__san_switch(&vc->san, &vc->san, vc->stack_lo, vc->stack_size);
    weft__ctx_save_and_call(&vc->thread_ctx, vc->stack_top, vcore_first_entry, vc);
    weft__san_arrive(&vc->san, NULL, NULL);
    weft__san_vcore_done(&vc->san);
    weft__notif_vcore_stop(vc);

    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    weft__tls_vc = NULL;
    return NULL;
}

/* vcore_first_entry() starts vcore context on a fresh vcore thread. */
static void vcore_first_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    const void *old_lo = NULL;
    size_t old_size = 0;
    weft__san_arrive(NULL, &old_lo, &old_size);
    vc->thread_stack_lo = old_lo; /* ASan: where vcore_exit() goes back to */
    vc->thread_stack_size = old_size;
    weft__vcore_loop(vc);
}

/* weft__vcore_entry() is the top of vcore context after a uthread switched
 * out through weft_uthread_yield(): run its callback, then schedule. */
void weft__vcore_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    /* Saved: from here on others may touch it, once cb publishes it. */
    atomic_store_explicit(&ut->state, WEFT__BLOCKED, memory_order_relaxed);
    vc->in_cb = true;
    vc->cb(ut, vc->cb_arg);
    vc->in_cb = false;
    weft__vcore_next(vc);
}

/* vcore_exit() returns to the kernel thread's own stack (vcore_thread). */
static _Noreturn void vcore_exit(struct weft__vcore *vc)
{
    struct weft__san thread = weft__san_thread_ctx(&vc->san);
    weft__san_switch(NULL, &thread, vc->thread_stack_lo, vc->thread_stack_size);
    weft__ctx_restore(&vc->thread_ctx);
}

/* ---- idling and waking ------------------------------------------------------- */

static void idle_remove_locked(struct weft__vcore *vc)
{
    struct weft__vcore **pp = &weft__rt.idle;
    while (*pp && *pp != vc)
        pp = &(*pp)->park.next;
    if (!*pp)
        weft__panic("vcore %d marked parked but not on the idle list", vc->id);
    *pp = vc->park.next;
    vc->park.next = NULL;
    atomic_store_explicit(&vc->park.parked, false, memory_order_relaxed);
    atomic_fetch_sub_explicit(&weft__rt.nparked, 1, memory_order_seq_cst);
}

/* vcore_signal_how() wakes vc from its park: its futex, or the poller if it
 * sleeps there. Dekker with vcore_sleep(): we set park.word then read
 * park.in_poller, it sets park.in_poller then reads park.word (both
 * seq_cst), so either it does not go to sleep or we interrupt the poller.
 * in_handler: the caller is a signal handler, which may take the poller's
 * own wake-up path only where that takes no lock (epoll's eventfd write);
 * else (io_uring) it interrupts the poller with the notification signal,
 * which is lost if it lands before the poller blocks (in_poller set, the
 * system call not yet entered): the handler's retry timer then ends the
 * wait within 200 us. vcore_signal() is the usual call. */
static void vcore_signal_how(struct weft__vcore *vc, bool in_handler)
{
    atomic_store_explicit(WEFT__AT(&vc->park.word), 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&vc->park.in_poller, memory_order_seq_cst))
        weft__futex_wake(&vc->park.word, 1);
    else if (in_handler) {
        if (!weft__io_wakeup_signal_safe())
            weft__notif_signal(vc); /* EINTR: the poller's own wake-up may take a lock */
    }
    else
        weft__io_wakeup();
}

static void vcore_signal(struct weft__vcore *vc)
{
    vcore_signal_how(vc, false);
}

/* ---- the decision trace (weft_dump) --------------------------------------- */

enum weft__trace_kind {
    WEFT__TR_PARK = 1,   /* parks: arg 1 with the timer/poller duty */
    WEFT__TR_WOKE,       /* left its sleep: arg 1 kicked, 2 an event, 0 deadline/poller */
    WEFT__TR_KICK,       /* woke parked vcore arg for work nobody spun for */
    WEFT__TR_WAKE,       /* woke parked vcore arg for work only it may run */
    WEFT__TR_BUSY,       /* found work after spinning (arg: was on the idle list) */
};

/* trace_note() records one decision of vc (its own kernel thread). */
static inline void trace_note(struct weft__vcore *vc, int kind, int arg)
{
    unsigned n = atomic_load_explicit(&vc->park.trace_n, memory_order_relaxed);
    struct weft__trace *e = &vc->park.trace[n % WEFT__TRACE];
    atomic_store_explicit(&e->t_ns, weft__now_ns(), memory_order_relaxed);
    atomic_store_explicit(&e->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&e->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&vc->park.trace_n, n + 1, memory_order_release);
}

/* The watch. A uthread woken into a busy vcore's private slot (ws's and
 * prio's `next`) waits for that vcore's next decision: no kick, since the
 * waker usually blocks at once and runs it. Spinning vcores watch for a
 * waker that computes on instead and poke its vcore (ops->poked: the
 * scheduler makes such work stealable), and a vcore about to park takes a
 * last look; but a wake-up after the last vcore parked had nobody to see
 * it, and without preemption it waited for as long as the waker computed.
 * So one parked vcore, the watcher (rt.watch_vcore), sleeps at most
 * WATCH_NS at a time while other vcores are awake, and at each wake-up
 * pokes the busy vcores whose run count has not moved since the last one
 * (they run one uthread for WATCH_NS or more), then sleeps again, still
 * parked. Once no vcore is busy it gives the role up and sleeps untimed: a
 * vcore that goes busy from parked kicks another (step 2), which takes the
 * role when it parks again. Go's sysmon plays this part for runnext. */
#define WATCH_NS 10000000ull /* 10 ms: Go's forcePreemptNS */

/* vcore_watch() is one look of the watcher vc; false when no vcore was
 * busy (the watch ends). */
static bool vcore_watch(struct weft__vcore *vc)
{
    struct weft__runtime *rt = &weft__rt;
    bool busy = false;
    int n = atomic_load_explicit(&rt->nonline, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        struct weft__vcore *v = &rt->vcores[i];
        if (v == vc || idle_of(v) != WEFT__BUSY)
            continue;
        busy = true;
        if (atomic_load_explicit(&v->napping, memory_order_relaxed)) {
            /* Ceding its CPU (prio, for the board): it runs nothing on
             * purpose; a poke would end the cede. Two looks in a row that
             * find it running are needed. */
            atomic_store_explicit(&v->park.watch_nrun, UINT64_MAX, memory_order_relaxed);
            continue;
        }
        uint64_t nrun = atomic_load_explicit(&v->nrun, memory_order_relaxed);
        if (atomic_exchange_explicit(&v->park.watch_nrun, nrun, memory_order_relaxed) == nrun)
            weft_vcore_poke(i);
    }
    return busy;
}

/* watch_take() makes vc, about to sleep parked, the watcher if there is
 * none and another vcore is awake; watch_drop() gives the role up. Both
 * under idle_lock. */
static bool watch_take(struct weft__vcore *vc)
{
    struct weft__runtime *rt = &weft__rt;
    if (rt->watch_vcore >= 0 || !rt->ops->poked)
        return false;
    int awake = atomic_load_explicit(&rt->nonline, memory_order_relaxed) -
                atomic_load_explicit(&rt->nparked, memory_order_relaxed);
    if (awake <= 0)
        return false;
    rt->watch_vcore = vc->id;
    return true;
}

static void watch_drop(struct weft__vcore *vc)
{
    if (weft__rt.watch_vcore == vc->id)
        weft__rt.watch_vcore = -1;
}

/* watch_end() is the watcher vc finding no vcore busy: it gives the role up,
 * then looks once more (a vcore that went busy meanwhile may have kicked a
 * vcore that parked again seeing the role taken); true if it keeps it. */
static bool watch_end(struct weft__vcore *vc)
{
    weft__spin_lock(&weft__rt.idle_lock);
    watch_drop(vc);
    weft__spin_unlock(&weft__rt.idle_lock);
    atomic_thread_fence(memory_order_seq_cst);
    if (!vcore_watch(vc))
        return false;
    weft__spin_lock(&weft__rt.idle_lock);
    bool kept = watch_take(vc);
    weft__spin_unlock(&weft__rt.idle_lock);
    return kept;
}

/* vcore_sleep() is where a parked vcore blocks (invariant 4; vcore_nap(),
 * for cedes and offline vcores, is the other place): on
 * the park futex, or, for the vcore with the timer duty once I/O is in use,
 * in the poller. Returns when kicked, at deadline, at shutdown, or when the
 * poller found work. The watcher (watch) wakes every WATCH_NS meanwhile to
 * look at the busy vcores, and sleeps on. */
static void vcore_sleep(struct weft__vcore *vc, bool duty, bool watch, uint64_t deadline)
{
    struct weft__runtime *rt = &weft__rt;
    bool poll = duty && weft__io_active();
    uint64_t look = watch ? weft__now_ns() + WATCH_NS : UINT64_MAX;
    /* An event posted to us (ev.bits, an RMW) pairs with our fence in
     * vcore_park like a kick does: we see it here or its sender sees us
     * parked and wakes us. */
    while (atomic_load_explicit(WEFT__AT(&vc->park.word), memory_order_acquire) == 0 &&
           atomic_load_explicit(&vc->ev.bits, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&rt->state, memory_order_relaxed) == WEFT__RUNNING_RT) {
        uint64_t until = look < deadline ? look : deadline;
        if (!poll) {
            if (weft__futex_wait(&vc->park.word, 0, until) != ETIMEDOUT)
                continue;
        } else {
            atomic_store_explicit(&vc->park.in_poller, true, memory_order_seq_cst);
            int woke = 0;
            if (atomic_load_explicit(WEFT__AT(&vc->park.word), memory_order_seq_cst) == 0)
                woke = weft__io_poll(until);
            atomic_store_explicit(&vc->park.in_poller, false, memory_order_relaxed);
            if (woke > 0)
                return;
        }
        uint64_t now = until != UINT64_MAX ? weft__now_ns() : 0;
        if (deadline != UINT64_MAX && now >= deadline)
            return;
        if (look != UINT64_MAX && now >= look)
            look = vcore_watch(vc) || watch_end(vc) ? now + WATCH_NS : UINT64_MAX;
    }
}

static WEFT__NOINLINE void kick_slow(int hint)
{
    int zero = 0;
    weft_sched_note_shared(1);
    if (!atomic_compare_exchange_strong_explicit(&weft__rt.nspinning, &zero, 1, memory_order_seq_cst, memory_order_seq_cst))
        return; /* someone else just started spinning */
    weft_sched_note_shared(3); /* the idle lock, its release, nparked */
    weft__spin_lock(&weft__rt.idle_lock);
    struct weft__vcore *vc = NULL;
    if (hint >= 0 && hint < weft__rt.nvcores &&
        atomic_load_explicit(&weft__rt.vcores[hint].park.parked, memory_order_relaxed))
        vc = &weft__rt.vcores[hint];
    else
        vc = weft__rt.idle;
    if (vc)
        idle_remove_locked(vc);
    else /* nobody to wake: uncount before anyone can join the idle list, or
          * a kicker could mistake our count for a spinner while it parks */
        atomic_fetch_sub_explicit(&weft__rt.nspinning, 1, memory_order_seq_cst);
    weft__spin_unlock(&weft__rt.idle_lock);
    if (vc) {
        struct weft__vcore *me = weft__vc_at_entry();
        if (me) {
            weft__stat_add(&me->st.kicks, 1);
            trace_note(me, WEFT__TR_KICK, vc->id);
        }
        vcore_signal(vc); /* it wakes as the spinner we counted */
    }
}

/* kick_needed(): a parked vcore could take work nobody spins for. */
static inline bool kick_needed(void)
{
    return atomic_load_explicit(&weft__rt.nparked, memory_order_relaxed) != 0 &&
           atomic_load_explicit(&weft__rt.nspinning, memory_order_relaxed) == 0;
}

void weft_vcore_kick_local(void)
{
    /* No fence: the work is on the caller's own queues, which it looks at
     * before it can park, so a kick lost to a vcore parking this instant
     * only leaves the work to its busy owner (step 1 of the protocol needs
     * the fence for work that only a parked vcore would find). */
    if (weft__rt.nvcores > 1 && WEFT__UNLIKELY(kick_needed()))
        kick_slow(-1);
}

void weft_vcore_kick(int hint)
{
    /* A uthread running on the only vcore: that vcore is busy (off the
     * idle list), and it looks at its queue at its next decision. (Not its
     * vcore context: that may be the designated poller, counted parked.) */
    if (weft__rt.nvcores == 1) {
        struct weft__vcore *vc = weft__vc_at_entry();
        if (vc && vc->current)
            return;
    }
    atomic_thread_fence(memory_order_seq_cst); /* partner: the fetch_sub in vcore_park */
    if (kick_needed())
        kick_slow(hint);
}

uint64_t weft_vcore_decisions(int id)
{
    if (id < 0 || id >= weft__rt.nvcores)
        return 0;
    return atomic_load_explicit(&weft__rt.vcores[id].nrun, memory_order_relaxed);
}

void weft_sched_note_shared(unsigned n)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    if (vc)
        weft__stat_add(&vc->st.shared_rmw, n);
}

/* kidle_ok: whether this process's threads may leave SCHED_IDLE again (an
 * unprivileged process whose RLIMIT_NICE does not cover its nice value may
 * not); 1 yes, 0 no, -1 not tried yet. */
static _Atomic int kidle_ok = -1;

/* kidle_try() is a helper thread: SCHED_IDLE and back; *arg = 1 if both worked. */
static void *kidle_try(void *arg)
{
    struct sched_param old, idle = { 0 };
    int pol = sched_getscheduler(0);
    *(int *)arg = pol >= 0 && sched_getparam(0, &old) == 0 &&
                  sched_setscheduler(0, SCHED_IDLE, &idle) == 0 &&
                  sched_setscheduler(0, pol, &old) == 0;
    return NULL;
}

/* kidle_leave() puts vc's thread (the caller) back under the policy it had
 * before weft_vcore_kernel_idle(1); 0 or errno. */
static int kidle_leave(struct weft__vcore *vc)
{
    struct sched_param sp = { .sched_priority = vc->kidle_prio };
    return sched_setscheduler(0, vc->kidle_policy, &sp) == 0 ? 0 : errno;
}

int weft_vcore_kernel_idle(int on)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    if (!vc)
        return EPERM;
    if ((on != 0) == vc->kidle)
        return 0;
    int saved = errno, r = 0;
    if (on) {
        int ok = atomic_load_explicit(&kidle_ok, memory_order_relaxed);
        if (ok < 0) {
            pthread_t th;
            int res = 0;
            ok = pthread_create(&th, NULL, kidle_try, &res) == 0 && pthread_join(th, NULL) == 0 &&
                 res;
            atomic_store_explicit(&kidle_ok, ok, memory_order_relaxed);
        }
        struct sched_param old, idle = { 0 };
        if (!ok)
            r = ENOTSUP;
        else if ((vc->kidle_policy = sched_getscheduler(0)) < 0 || sched_getparam(0, &old) != 0 ||
                 sched_setscheduler(0, SCHED_IDLE, &idle) != 0)
            r = errno;
        else
            vc->kidle_prio = old.sched_priority;
    } else {
        r = kidle_leave(vc);
    }
    if (!r)
        vc->kidle = on != 0;
    errno = saved;
    return r;
}

void weft_vcore_wake(int id)
{
    if (id < 0 || id >= weft__rt.nvcores)
        return;
    struct weft__vcore *vc = &weft__rt.vcores[id];
    atomic_thread_fence(memory_order_seq_cst); /* partner: the fetch_sub in vcore_park */
    if (!atomic_load_explicit(&vc->park.parked, memory_order_relaxed)) {
        /* Busy or spinning: it will look at its queue. Asleep outside the
         * idle list (a cede, offline): its nap looks at park.word
         * (partner: the fence in vcore_nap). */
        if (atomic_load_explicit(&vc->napping, memory_order_relaxed))
            vcore_signal(vc);
        return;
    }
    weft__spin_lock(&weft__rt.idle_lock);
    bool took = atomic_load_explicit(&vc->park.parked, memory_order_relaxed);
    if (took) {
        idle_remove_locked(vc);
        atomic_fetch_add_explicit(&weft__rt.nspinning, 1, memory_order_seq_cst);
    }
    weft__spin_unlock(&weft__rt.idle_lock);
    if (took) {
        struct weft__vcore *me = weft__vc_at_entry();
        if (me)
            trace_note(me, WEFT__TR_WAKE, id);
        vcore_signal(vc);
    }
}

void weft__vcore_wake_signal_safe(struct weft__vcore *vc)
{
    atomic_thread_fence(memory_order_seq_cst); /* partner: the fence in vcore_park */
    if (atomic_load_explicit(&vc->park.parked, memory_order_relaxed) ||
        atomic_load_explicit(&vc->napping, memory_order_relaxed))
        vcore_signal_how(vc, true); /* it leaves the idle list itself */
}

/* events_after_idle(): vc has just said it is busy and is about to run a
 * uthread without another look at its events. A poster (attention(),
 * weft_vcore_preempt, weft_vcores_release) that read it idle sent no signal
 * and counts on that look: Dekker with the poster (it posts with an RMW, then
 * fences in weft_vcore_wake and reads idle; we store idle, fence, read the
 * bits), so one of us sees the other. Events we see now are told the way a
 * poster tells a busy vcore: the notification signal, which lands here in
 * vcore context and looks again once the uthread runs (the handler's retry). */
static void events_after_idle(struct weft__vcore *vc)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&vc->ev.bits, memory_order_relaxed))
        weft__notif_tell(vc);
}

/* weft__vcore_became_busy() runs when an idle vcore found work (step 2/3). */
void weft__vcore_became_busy(struct weft__vcore *vc)
{
    if (idle_of(vc) == WEFT__PARKING) {
        weft__spin_lock(&weft__rt.idle_lock);
        bool was_parked = atomic_load_explicit(&vc->park.parked, memory_order_relaxed);
        if (was_parked)
            idle_remove_locked(vc);
        weft__spin_unlock(&weft__rt.idle_lock);
        trace_note(vc, WEFT__TR_BUSY, was_parked);
        if (was_parked) {
            /* We left the spinning count before finding this work, so the
             * step 2 kick is ours to make: other work queued while we spun
             * may be waiting on a parked vcore's queue. */
            set_idle(vc, WEFT__BUSY);
            weft_vcore_kick(-1);
            events_after_idle(vc);
            return;
        }
        /* A kicker took us off the list and counted us as its spinner. */
        atomic_store_explicit(WEFT__AT(&vc->park.word), 0, memory_order_relaxed);
        set_idle(vc, WEFT__SPINNING);
    }
    set_idle(vc, WEFT__BUSY);
    weft__stat_add(&vc->st.shared_rmw, 1);
    if (atomic_fetch_sub_explicit(&weft__rt.nspinning, 1, memory_order_seq_cst) == 1)
        weft_vcore_kick(-1);
    events_after_idle(vc);
}

static void vcore_park(struct weft__vcore *vc)
{
    struct weft__runtime *rt = &weft__rt;
    weft__stat_add(&vc->st.parks, 1);
    weft__stat_add(&vc->st.shared_rmw, 4); /* idle lock, nparked, unlock, nspinning */
    /* Step 3: announce, stop spinning (full fence), re-check. */
    weft__spin_lock(&rt->idle_lock);
    vc->park.next = rt->idle;
    rt->idle = vc;
    atomic_store_explicit(&vc->park.parked, true, memory_order_relaxed);
    atomic_fetch_add_explicit(&rt->nparked, 1, memory_order_seq_cst);
    weft__spin_unlock(&rt->idle_lock);
    set_idle(vc, WEFT__PARKING);
    atomic_fetch_sub_explicit(&rt->nspinning, 1, memory_order_seq_cst);
    /* A full fence on every architecture (an aarch64 RMW without LSE is not
     * one); partner: the fence in weft_vcore_kick / weft_vcore_wake. */
    atomic_thread_fence(memory_order_seq_cst);

    rt->ops->sched_entry(); /* returns only if there is still nothing */

    /* Timer and poller duty: the sleeper and the deadline it sleeps for
     * change together under idle_lock, and the deadline published is exactly
     * the one we sleep for (partner: weft__vcore_duty_wake). Once any
     * descriptor is in use the duty is always taken: its holder sleeps in
     * the poller. */
    uint64_t deadline = UINT64_MAX;
    bool duty = false;
    weft__spin_lock(&rt->idle_lock);
    if (rt->duty_vcore < 0) {
        deadline = weft__timers_next();
        if (deadline != UINT64_MAX || weft__io_active()) {
            duty = true;
            rt->duty_vcore = vc->id;
            rt->duty_until = deadline;
        }
    }
    bool watch = watch_take(vc);
    weft__spin_unlock(&rt->idle_lock);
    weft__notif_sleeping(vc, true); /* no preemption ticks while asleep */
    trace_note(vc, WEFT__TR_PARK, duty);
    vcore_sleep(vc, duty, watch, deadline);
    trace_note(vc, WEFT__TR_WOKE,
               atomic_load_explicit(WEFT__AT(&vc->park.word), memory_order_relaxed) ? 1
               : atomic_load_explicit(&vc->ev.bits, memory_order_relaxed)          ? 2
                                                                                   : 0);
    weft__notif_sleeping(vc, false);
    struct weft__vcore *heir = NULL; /* who takes over the duty */
    weft__spin_lock(&rt->idle_lock);
    watch_drop(vc);
    if (rt->duty_vcore == vc->id) {
        rt->duty_vcore = -1;
        rt->duty_until = UINT64_MAX;
        /* Kicked awake for work while timers or I/O wait: hand the duty on,
         * or they would wait for our next scheduling decision. */
        if (atomic_load_explicit(&vc->park.parked, memory_order_relaxed) == false &&
            (weft__timers_next() != UINT64_MAX || weft__io_waiting(vc)) &&
            (heir = rt->idle) != NULL) {
            idle_remove_locked(heir);
            atomic_fetch_add_explicit(&rt->nspinning, 1, memory_order_seq_cst);
        }
    }
    weft__spin_unlock(&rt->idle_lock);
    if (heir)
        vcore_signal(heir); /* it spins, then parks with the duty */

    weft__spin_lock(&rt->idle_lock);
    bool still_parked = atomic_load_explicit(&vc->park.parked, memory_order_relaxed);
    if (still_parked)
        idle_remove_locked(vc); /* timer or shutdown, not a kick */
    weft__spin_unlock(&rt->idle_lock);
    if (still_parked)
        atomic_fetch_add_explicit(&rt->nspinning, 1, memory_order_seq_cst);
    atomic_store_explicit(WEFT__AT(&vc->park.word), 0, memory_order_relaxed);
    set_idle(vc, WEFT__SPINNING);
    vc->spin.until = weft__now_ns() + weft__spin_ns;
    if (duty) /* any heap's due alarms, not just ours */
        weft__timers_run_all(vc, vc->spin.until - weft__spin_ns);
}

void weft__vcore_heap_armed(struct weft__vcore *owner, uint64_t deadline)
{
    /* An offline vcore runs its own heap (vcore_offline): it naps until its
     * earliest alarm, so an earlier one must wake it. */
    atomic_thread_fence(memory_order_seq_cst); /* partner: the fence in vcore_nap */
    if (!atomic_load_explicit(&owner->up, memory_order_relaxed) &&
        atomic_load_explicit(&owner->napping, memory_order_relaxed))
        vcore_signal(owner);
    weft__vcore_duty_wake(deadline);
}

void weft__vcore_duty_wake(uint64_t deadline)
{
    struct weft__runtime *rt = &weft__rt;
    struct weft__vcore *sleeper = NULL;
    weft__spin_lock(&rt->idle_lock); /* partner: the duty section of vcore_park */
    int s = rt->duty_vcore;
    if (s >= 0 && deadline < rt->duty_until)
        sleeper = &rt->vcores[s];
    weft__spin_unlock(&rt->idle_lock);
    if (sleeper)
        vcore_signal(sleeper); /* it re-reads the nearest deadline */
    else if (s < 0)
        weft_vcore_kick(-1); /* a parked vcore wakes and takes the duty */
}

/* vcore_idle(): nothing to run; spin for a while, then park. Not inlined:
 * weft__vcore_loop is entered afresh after every switch, and its prologue
 * should stay that of a small function. */
static WEFT__NOINLINE void vcore_idle(struct weft__vcore *vc)
{
    if (vc->sc.held)
        weft__sc_release(vc); /* stack-copy protocol, step 4 (stackcopy.c) */
    if (vc->live_credit)
        weft__live_return(vc, vc->live_credit); /* weft_shutdown may be waiting for 0 */
    if (atomic_load_explicit(&weft__rt.state, memory_order_relaxed) != WEFT__RUNNING_RT) {
        if (idle_of(vc) == WEFT__SPINNING)
            atomic_fetch_sub_explicit(&weft__rt.nspinning, 1, memory_order_seq_cst);
        set_idle(vc, WEFT__BUSY);
        vcore_exit(vc);
    }
    bool io = weft__io_waiting(vc);
    if (idle_of(vc) == WEFT__BUSY) {
        /* First look, uncounted, for LOOK_ROUNDS rounds: most idle moments
         * of a busy vcore are a wait for a reply from another vcore, shorter
         * than that, and counting them (nspinning up, then down, and the
         * last spinner's kick) would put two run-wide RMWs and a fence on
         * every cross-vcore hand-off. A kicker that misses a vcore looking
         * may wake a parked one needlessly, never too few: the looker still
         * runs sched_entry, and it parks only through the counted spin. */
        uint64_t nrun = atomic_load_explicit(&vc->nrun, memory_order_relaxed);
        if (nrun != vc->spin.look_nrun) { /* a new idle moment */
            vc->spin.look_nrun = nrun;
            vc->spin.look_rounds = 0;
            if (io)
                weft__io_poll(0); /* the work we ran out of may be waiting on I/O */
        }
        if (vc->spin.look_rounds++ < LOOK_ROUNDS) {
            weft__cpu_relax();
            return;
        }
        /* Go's rule: at most half of the vcores that are not parked spin
         * the full WEFT_SPIN_NS, so idle vcores do not crowd the busy ones'
         * queues. One over that spins a tenth of it, short enough that a
         * crowd of idle vcores stops probing soon. A vcore with pinned
         * uthreads spins in full anyway: work only it may run comes back to
         * it (a pinned uthread's partner answering), and a futex wake-up
         * costs more than the spin. */
        int spinning = atomic_load_explicit(&weft__rt.nspinning, memory_order_relaxed);
        int awake = atomic_load_explicit(&weft__rt.nonline, memory_order_relaxed) -
                    atomic_load_explicit(&weft__rt.nparked, memory_order_relaxed);
        bool full = 2 * spinning < awake || atomic_load_explicit(&vc->npinned, memory_order_relaxed);
        set_idle(vc, WEFT__SPINNING);
        atomic_fetch_add_explicit(&weft__rt.nspinning, 1, memory_order_seq_cst);
        weft__stat_add(&vc->st.shared_rmw, 1);
        vc->spin.until = weft__now_ns() + (full ? weft__spin_ns : weft__spin_ns / 10);
        return;
    }
    /* Look at the clock (and the poller) only every 32 rounds: in a VM a
     * clock read costs more than a round, and a round's length is the
     * latency of noticing new work. */
    weft__cpu_relax();
    if (++vc->spin.rounds & 31)
        return;
    if (io && weft__io_poll(0) > 0)
        return;
    if (weft__now_ns() < vc->spin.until)
        return;
    vcore_park(vc);
}

/* weft__chores_late() is weft__chores_due() at the d-th decision (a 16th)
 * with an alarm or an I/O waiter pending: is the alarm due, or (a 64th) the
 * poll stale. */
WEFT__NOINLINE bool weft__chores_late(struct weft__vcore *vc, uint64_t d)
{
    uint64_t next = atomic_load_explicit(&vc->heap.min, memory_order_relaxed);
    bool io = (d & 63) == 0 && weft__io_waiting(vc);
    if (next == UINT64_MAX && !io)
        return false;
    uint64_t now = weft__now_ns();
    return next <= now || (io && weft__io_stale(now));
}

void weft__vcore_chores(struct weft__vcore *vc)
{
    if (atomic_load_explicit(&vc->ev.bits, memory_order_relaxed)) {
        weft__events_handle(vc);
        vc->resched = false; /* a decision follows anyway */
        /* Told to go offline: keep every decision coming through vcore
         * context (no direct hand-off) until weft__vcore_loop takes it. */
        if (WEFT__UNLIKELY(atomic_load_explicit(&vc->online, memory_order_relaxed) != 1))
            weft__event_post_bits(vc, 1ull << WEFT__EV_RESCHED);
    }
    uint64_t next = atomic_load_explicit(&vc->heap.min, memory_order_acquire);
    bool poll = ((vc->decisions + 1) & 63) == 0 && weft__io_waiting(vc);
    if (next == UINT64_MAX && !poll)
        return;
    uint64_t now = weft__now_ns();
    if (next <= now)
        weft__timers_run(vc, now);
    if (poll)
        weft__io_poll_if_stale(now);
}

static void vcore_restart_entry(void *arg)
{
    weft__vcore_loop(arg);
}

_Noreturn void weft__vcore_restart(struct weft__vcore *vc)
{
    struct weft__ctx abandoned; /* never resumed */
    weft__san_vcore_restart(&vc->san);
    weft__ctx_save_and_call(&abandoned, vc->stack_top, vcore_restart_entry, vc);
    __builtin_unreachable();
}

/* ---- run-time vcore counts and cedes -------------------------------------------- */

/* vcore_nap() sleeps on park.word outside the idle list until deadline, a
 * weft_vcore_wake()/vcore_signal(), an event, or the runtime stopping.
 * Dekker with the wakers (weft_vcore_wake, the signal-safe wake, an event's
 * attention, weft__vcore_heap_armed): we publish napping, fence, then look;
 * they post or queue, fence, then look at napping. True if an event is
 * pending. */
static bool vcore_nap(struct weft__vcore *vc, uint64_t deadline)
{
    struct weft__runtime *rt = &weft__rt;
    weft__notif_sleeping(vc, true); /* no preemption ticks while asleep */
    atomic_store_explicit(&vc->napping, true, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    /* An offline vcore's own reasons to stay awake, read after the fence
     * (vcore_offline read them before it, when napping was not yet set):
     * a request to come online (weft_vcores_request stores online, then
     * signals), or an alarm armed on its heap earlier than deadline
     * (weft__vcore_heap_armed). Read only before the fence, an arming that
     * saw napping still false went unsignalled and we slept past its alarm;
     * and our clearing of park.word after the last nap could overwrite a
     * request's signal. */
    bool offline = !atomic_load_explicit(&vc->up, memory_order_relaxed);
    while (atomic_load_explicit(WEFT__AT(&vc->park.word), memory_order_acquire) == 0 &&
           atomic_load_explicit(&vc->ev.bits, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&rt->state, memory_order_relaxed) == WEFT__RUNNING_RT &&
           !(offline && (atomic_load_explicit(&vc->online, memory_order_relaxed) != 0 ||
                         atomic_load_explicit(&vc->heap.min, memory_order_relaxed) < deadline)))
        if (weft__futex_wait(&vc->park.word, 0, deadline) == ETIMEDOUT)
            break;
    atomic_store_explicit(&vc->napping, false, memory_order_relaxed);
    atomic_store_explicit(WEFT__AT(&vc->park.word), 0, memory_order_relaxed);
    weft__notif_sleeping(vc, false);
    return atomic_load_explicit(&vc->ev.bits, memory_order_relaxed) != 0;
}

int weft_vcore_cede(uint64_t deadline_ns)
{
    struct weft__vcore *vc = weft__vc();
    if (!vc || vc->current || idle_of(vc) != WEFT__BUSY)
        return 0; /* vcore context of a busy vcore only */
    uint64_t now = weft__now_ns();
    if (deadline_ns <= now)
        return 0;
    if (deadline_ns - now > 100000000u)
        deadline_ns = now + 100000000u;
    return vcore_nap(vc, deadline_ns);
}

/* vcore_offline() takes vc offline (its online word says 0) and keeps it
 * there until it is wanted again or the runtime stops: the scheduler hands
 * its uthreads away (vcore_down), then it naps, waking only to handle its
 * events and run its own heap's alarms (its sleepers' wake-ups), whose
 * uthreads the scheduler places on online vcores. Back online, vcore_up. */
static WEFT__NOINLINE void vcore_offline(struct weft__vcore *vc)
{
    struct weft__runtime *rt = &weft__rt;
    if (atomic_load_explicit(&vc->up, memory_order_relaxed)) {
        if (idle_of(vc) == WEFT__SPINNING) /* woken from a park to go */
            atomic_fetch_sub_explicit(&rt->nspinning, 1, memory_order_seq_cst);
        set_idle(vc, WEFT__OFFLINE);
        /* Let go of a run stack first: a stack-copy uthread bound to it
         * would otherwise be forwarded (pinned) to this offline vcore. */
        weft__sc_release(vc);
        rt->ops->vcore_down(vc->id);
        atomic_store_explicit(&vc->up, false, memory_order_release); /* partner: release */
    }
    if (vc->live_credit) /* it spawns nothing now; weft_shutdown may wait for 0 */
        weft__live_return(vc, vc->live_credit);
    set_idle(vc, WEFT__OFFLINE);
    while (atomic_load_explicit(&vc->online, memory_order_acquire) == 0 &&
           atomic_load_explicit(&rt->state, memory_order_relaxed) == WEFT__RUNNING_RT) {
        if (atomic_load_explicit(&vc->ev.bits, memory_order_relaxed)) {
            weft__events_handle(vc);
            vc->resched = false;
        }
        uint64_t next = atomic_load_explicit(&vc->heap.min, memory_order_acquire);
        if (next <= weft__now_ns()) {
            weft__timers_run(vc, weft__now_ns());
            continue;
        }
        vcore_nap(vc, next);
    }
    set_idle(vc, WEFT__BUSY);
    if (atomic_load_explicit(&rt->state, memory_order_relaxed) != WEFT__RUNNING_RT)
        vcore_exit(vc);
    vc->spin.look_nrun = ~0ull; /* a fresh idle moment when it finds nothing */
    rt->ops->vcore_up(vc->id);
    atomic_store_explicit(&vc->up, true, memory_order_release);
}

/* resize_enter(): the gate and the checks both calls share; 0 or errno. */
static int resize_enter(bool *outside)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    *outside = vc == NULL;
    if (vc && !vc->current)
        return EDEADLK; /* vcore context may not wait */
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK;
    if (*outside && weft__outside_enter(WEFT__GATE_USE))
        return EAGAIN;
    if (!weft__rt.resizable) {
        if (*outside)
            weft__outside_leave();
        return ENOTSUP;
    }
    return 0;
}

int weft_vcores_request(int n)
{
    struct weft__runtime *rt = &weft__rt;
    bool outside;
    int r = resize_enter(&outside);
    if (r)
        return r;
    weft__spin_lock(&rt->resize_lock);
    int cur = atomic_load_explicit(&rt->nonline, memory_order_relaxed);
    if (n < 1 || n > rt->nvcores - cur) {
        r = EINVAL;
    } else {
        for (int i = cur; i < cur + n; i++) /* seq_cst: partner the fence in vcore_nap */
            atomic_store_explicit(&rt->vcores[i].online, 1, memory_order_seq_cst);
        atomic_store_explicit(&rt->nonline, cur + n, memory_order_relaxed);
    }
    weft__spin_unlock(&rt->resize_lock);
    for (int i = cur; !r && i < cur + n; i++)
        vcore_signal(&rt->vcores[i]); /* its nap looks at park.word, then at online */
    if (outside)
        weft__outside_leave();
    return r;
}

int weft_vcores_release(int n)
{
    struct weft__runtime *rt = &weft__rt;
    bool outside;
    int r = resize_enter(&outside);
    if (r)
        return r;
    weft__spin_lock(&rt->resize_lock);
    int cur = atomic_load_explicit(&rt->nonline, memory_order_relaxed);
    if (n < 1 || n >= cur)
        r = EINVAL;
    for (int i = cur - n; !r && i < cur; i++)
        if (atomic_load_explicit(&rt->vcores[i].npinned, memory_order_relaxed))
            r = EBUSY; /* its pinned uthreads could run nowhere else */
    if (!r) {
        for (int i = cur - n; i < cur; i++)
            atomic_store_explicit(&rt->vcores[i].online, 0, memory_order_relaxed);
        atomic_store_explicit(&rt->nonline, cur - n, memory_order_relaxed);
    }
    weft__spin_unlock(&rt->resize_lock);
    if (!r) {
        /* Each one notices at its next decision: a parked one is woken, a
         * busy one interrupted (the uthread it runs is preempted: see
         * weft__resched_check). Then wait until each is down, unless it is
         * wanted again meanwhile. */
        for (int i = cur - n; i < cur; i++) {
            struct weft__vcore *vc = &rt->vcores[i];
            weft__event_post_bits(vc, 1ull << WEFT__EV_RESCHED);
            weft_vcore_wake(i);
            if (vc != weft__vc_at_entry() && weft_vcore_busy(i))
                weft__notif_tell(vc); /* our own vcore: our wait below leaves it */
        }
        for (int i = cur - n; i < cur; i++) {
            struct weft__vcore *vc = &rt->vcores[i];
            while (atomic_load_explicit(&vc->up, memory_order_acquire) &&
                   atomic_load_explicit(&vc->online, memory_order_relaxed) == 0)
                weft_sleep_ns(20000); /* a uthread on vc moves on meanwhile */
        }
    }
    if (outside)
        weft__outside_leave();
    return r;
}

_Noreturn void weft__vcore_loop(struct weft__vcore *vc)
{
    const struct weft_sched_ops *ops = weft__rt.ops;
    for (;;) {
        if (weft__chores_due(vc))
            weft__vcore_chores(vc);
        if (WEFT__UNLIKELY(!atomic_load_explicit(&vc->up, memory_order_relaxed) ||
                           atomic_load_explicit(&vc->online, memory_order_relaxed) != 1))
            vcore_offline(vc); /* or online (again) */
        vc->decisions++;
        ops->sched_entry(); /* returns only when there is nothing to run */
        vcore_idle(vc);
    }
}

/* ---- start and stop --------------------------------------------------------- */

static void vcores_free(int n)
{
    for (int i = 0; i < n; i++) {
        struct weft__vcore *vc = &weft__rt.vcores[i];
        weft__stack_vcore_fini(vc);
        weft__sc_vcore_fini(vc);
        weft__heap_fini(&vc->heap);
        if (vc->stack_lo)
            munmap(vc->stack_lo - weft__page_size, vc->stack_size + weft__page_size);
        if (vc->altstack)
            munmap(vc->altstack - weft__page_size, WEFT__ALTSTACK_SIZE + weft__page_size);
    }
    free(weft__rt.vcores);
    weft__rt.vcores = NULL;
}

/* vcore_setup() gives vc its stacks; 0 or ENOMEM. */
static int vcore_setup(struct weft__vcore *vc, int id, int cpu)
{
    vc->id = id;
    vc->cpu = cpu;
    vc->rand = 0x9e3779b9u * (uint32_t)(id + 1);
    atomic_store_explicit(&vc->heap.min, UINT64_MAX, memory_order_relaxed);
    vc->stack_size = 256 * 1024;
    char *m = mmap(NULL, vc->stack_size + weft__page_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
        return ENOMEM;
    mprotect(m, weft__page_size, PROT_NONE);
    vc->stack_lo = m + weft__page_size;
    vc->stack_top = vc->stack_lo + vc->stack_size;
    /* The signal stack: its own mapping, not the heap (a signal frame the
     * kernel writes there can never land on a heap chunk), with a guard page
     * (a handler that overflows it, an application's SA_ONSTACK one or
     * nested signals, faults there and the kernel ends the process instead
     * of writing into what lies below). */
    char *alt = mmap(NULL, WEFT__ALTSTACK_SIZE + weft__page_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    vc->altstack = NULL;
    if (alt != MAP_FAILED) {
        mprotect(alt, weft__page_size, PROT_NONE);
        vc->altstack = alt + weft__page_size;
    }
    if (!vc->altstack)
        return ENOMEM;
    weft__sigq_init(vc);
    return weft__stack_vcore_init(vc);
}

int weft_init(const struct weft_config *cfg)
{
    struct weft__runtime *rt = &weft__rt;
    int cpus[CPU_SETSIZE];
    int maxv = affinity_cpus(cpus, CPU_SETSIZE);
    struct settings s = { 0 };
    int r, started = 0, setup = 0;

    weft__sys.pthread_mutex_lock(&init_lock);
    if (atomic_load_explicit(&rt->state, memory_order_seq_cst) != WEFT__OFF) {
        r = EBUSY;
        goto out;
    }
    weft__cfg_load(); /* every WEFT_* variable, once (config.c) */
    r = settings_from(cfg, maxv, &s);
    if (r)
        goto out;
    if (s.tls_uthread && (r = weft__tls_init()) != 0) {
        if (s.tls_asked)
            goto out;
        fprintf(stderr, "weft: using shared TLS\n"); /* only the pthread layer's default */
        s.tls_uthread = false;
        r = 0;
    }
    r = weft__notif_init(s.preempt_us);
    if (r)
        goto out;
    r = weft__stack_init();
    if (r)
        goto out;
    weft__spin_ns = (uint64_t)weft__cfg_num(WEFT__CFG_SPIN_NS, 50000);

    rt->maxvcores = maxv;
    rt->resizable = s.ops->vcore_up && s.ops->vcore_down;
    rt->nvcores = rt->resizable ? maxv : s.vcores; /* resizable: a thread per CPU */
    atomic_store_explicit(&rt->nonline, s.vcores, memory_order_seq_cst);
    rt->resize_lock = 0;
    rt->pi = s.ops->thread_prio_changed != NULL;
    rt->gen++;
    rt->stack_size = s.stack_size;
    weft__sc_size = s.stack_size > (2u << 20) ? s.stack_size : (2u << 20);
    weft__sc_default = s.stack_copy;
    rt->ops = s.ops;
    rt->sched_foreign = s.ops != &weft__sched_ws && s.ops != &weft__sched_fifo &&
                        s.ops != &weft__sched_prio;
    weft__sched_resolve(rt);
    rt->idle = NULL;
    atomic_store_explicit(&rt->nspinning, 0, memory_order_seq_cst);
    atomic_store_explicit(&rt->nparked, 0, memory_order_seq_cst);
    rt->duty_vcore = -1;
    rt->duty_until = UINT64_MAX;
    rt->watch_vcore = -1;
    int nv = rt->nvcores;
    rt->vcores = aligned_alloc(WEFT__CACHELINE, sizeof *rt->vcores * (size_t)nv);
    if (!rt->vcores) {
        r = ENOMEM;
        goto fail_stack;
    }
    memset(rt->vcores, 0, sizeof *rt->vcores * (size_t)nv);
    for (; setup < nv; setup++) {
        struct weft__vcore *vc = &rt->vcores[setup];
        r = vcore_setup(vc, setup, cpus[setup]);
        if (r) {
            setup++;
            goto fail_vcores;
        }
        atomic_store_explicit(&vc->online, setup < s.vcores, memory_order_seq_cst);
        atomic_store_explicit(&vc->up, setup < s.vcores, memory_order_seq_cst);
    }
    weft__board_attach_env(); /* before init: a scheduler reads weft_board_attached() */
    if (rt->ops->init) {
        r = rt->ops->init(nv);
        if (r)
            goto fail_vcores;
    }
    /* A resizable scheduler hears of each vcore online: from here for these
     * first ones (no vcore runs yet), later on the vcore (vcore_offline). */
    for (int i = 0; rt->resizable && i < s.vcores; i++)
        rt->ops->vcore_up(i);
    /* Running before the threads start: they check the state in vcore_idle. */
    atomic_store_explicit(&rt->state, WEFT__RUNNING_RT, memory_order_release);
    for (; started < nv; started++) {
        r = weft__sys.pthread_create(&rt->vcores[started].thread, NULL, vcore_thread, &rt->vcores[started]);
        if (r)
            goto fail_threads;
    }
    r = weft__notif_started();
    if (r)
        goto fail_threads;
    goto out;

fail_threads:
    atomic_store_explicit(&rt->state, WEFT__STOPPING, memory_order_seq_cst);
    for (int i = 0; i < started; i++) {
        vcore_signal(&rt->vcores[i]);
        weft__sys.pthread_join(rt->vcores[i].thread, NULL);
    }
    if (rt->ops->fini)
        rt->ops->fini();
    atomic_store_explicit(&rt->state, WEFT__OFF, memory_order_seq_cst);
fail_vcores:
    vcores_free(setup);
fail_stack:
    weft__stack_fini();
out:
    if (r && s.tls_uthread)
        weft__tls_fini();
    weft__sys.pthread_mutex_unlock(&init_lock);
    return r;
}

/* ---- fork ----------------------------------------------------------------------- */

/* After fork() the child has one kernel thread, the caller, as with pthreads.
 * The parent's vcores, uthreads, timers, scheduler queues and poller do not
 * exist in the child; their memory is left as the fork found it (other
 * threads may have been changing it), and every piece of weft's process-wide
 * state is put back to "never started": the next call that needs the runtime
 * starts a fresh one (new vcores, new poller). A uthread that called fork()
 * goes on in the child as a plain kernel thread on its own stack: weft_self()
 * is NULL, blocking calls block the thread, the weft mutexes it held are
 * still its own, and returning from its function (or weft_exit) ends the
 * process with status 0, as the last thread's exit does. Only stores,
 * close/munmap and the calling thread's policy here: the child may be about
 * to exec. */
static struct weft__vcore *volatile forked_vcores; /* the parent's, kept reachable (leak checkers) */

static void atfork_child(void)
{
    struct weft__runtime *rt = &weft__rt;
    struct weft__vcore *vc = weft__tls_vc;
    if (vc && vc->kidle) { /* the child's only thread: not under SCHED_IDLE for a board */
        int saved = errno;
        kidle_leave(vc);
        errno = saved;
    }
    weft__uthread_forked(vc ? vc->current : NULL);
    weft__tls_vc = NULL;
    weft__sys.pthread_mutex_init(&init_lock, NULL);
    if (atomic_load_explicit(&rt->state, memory_order_relaxed) != WEFT__OFF) {
        forked_vcores = rt->vcores; /* left mapped: the caller may be on a vcore's stack */
        rt->vcores = NULL;
        rt->nvcores = 0;
        atomic_store_explicit(&rt->nonline, 0, memory_order_relaxed);
        rt->resize_lock = 0;
        rt->idle = NULL;
        rt->idle_lock = 0;
        atomic_store_explicit(&rt->nspinning, 0, memory_order_relaxed);
        atomic_store_explicit(&rt->nparked, 0, memory_order_relaxed);
        rt->duty_vcore = -1;
        rt->duty_until = UINT64_MAX;
        rt->watch_vcore = -1;
        atomic_store_explicit(WEFT__AT(&rt->live), 0, memory_order_relaxed);
        atomic_store_explicit(&rt->outside_wakers, 0, memory_order_relaxed);
        atomic_store_explicit(&rt->outside_calls, 0, memory_order_relaxed);
        atomic_store_explicit(&rt->closing, false, memory_order_relaxed);
        weft__notif_forked();
        weft__stack_forked();
        weft__sc_forked();
        atomic_store_explicit(&rt->state, WEFT__OFF, memory_order_relaxed);
    }
    weft__futex_forked();
    weft__io_forked();
    weft__board_forked();
}

__attribute__((constructor)) static void atfork_register(void)
{
    /* Through a pointer: in a shared library pthread_atfork is a local stub
     * (libc_nonshared), and weft_text may only call local code of its own
     * (cmake/check-weft-text.sh). This runs once, with no lock held. */
    int (*volatile reg)(void (*)(void), void (*)(void), void (*)(void)) = pthread_atfork;
    reg(NULL, NULL, atfork_child);
}

int weft__outside_enter(int how)
{
    struct weft__runtime *rt = &weft__rt;
    for (;;) {
        /* seq_cst both sides (Dekker with weft_shutdown): we see its flags,
         * or it sees our count and waits for us. */
        atomic_fetch_add_explicit(&rt->outside_calls, 1, memory_order_seq_cst);
        int st = atomic_load_explicit(&rt->state, memory_order_seq_cst);
        if (st == WEFT__RUNNING_RT && !(how == WEFT__GATE_SPAWN && atomic_load_explicit(&rt->closing, memory_order_seq_cst)))
            return 0;
        weft__outside_leave();
        if (st != WEFT__OFF) /* stopping, or closing to spawns */
            return ESHUTDOWN;
        if (how == WEFT__GATE_USE)
            return EAGAIN;
        int r = weft_init(NULL);
        if (r && r != EBUSY) /* EBUSY: someone else started it meanwhile */
            return r;
    }
}

void weft_shutdown(void)
{
    struct weft__runtime *rt = &weft__rt;
    if (weft__vc()) {
        fprintf(stderr, "weft: weft_shutdown() called from a vcore or uthread; ignored\n");
        return;
    }
    weft__sys.pthread_mutex_lock(&init_lock);
    if (atomic_load_explicit(&rt->state, memory_order_seq_cst) != WEFT__RUNNING_RT) {
        weft__sys.pthread_mutex_unlock(&init_lock);
        return;
    }
    /* No more spawns from outside; those admitted add to live before we
     * count it. (seq_cst: see weft__outside_enter.) */
    atomic_store_explicit(&rt->closing, true, memory_order_seq_cst);
    while (atomic_load_explicit(&rt->outside_calls, memory_order_seq_cst))
        weft__sys.sched_yield(); /* admitted calls are short: no blocking inside */
    weft__shutdown_waiting(true); /* partner: weft__live_return() in uthread.c */
    for (;;) { /* wait for every uthread to finish */
        uint32_t live = atomic_load_explicit(WEFT__AT(&rt->live), memory_order_seq_cst);
        if (!live)
            break;
        weft__futex_wait(&rt->live, live, UINT64_MAX);
    }
    weft__shutdown_waiting(false);
    while (atomic_load_explicit(&rt->outside_wakers, memory_order_acquire))
        weft__sys.sched_yield(); /* a kernel thread is finishing a wake-up: a few instructions */
    atomic_store_explicit(&rt->state, WEFT__STOPPING, memory_order_seq_cst); /* seq_cst: see weft__outside_enter */
    while (atomic_load_explicit(&rt->outside_calls, memory_order_seq_cst))
        weft__sys.sched_yield(); /* an alarm start, a notify, ... admitted before: let it finish */
    weft__notif_stopping(); /* no more ticks aimed at the vcores */
    for (int i = 0; i < rt->nvcores; i++)
        vcore_signal(&rt->vcores[i]);
    for (int i = 0; i < rt->nvcores; i++)
        weft__sys.pthread_join(rt->vcores[i].thread, NULL);
    for (int i = 0; i < rt->nvcores; i++)
        weft__sigq_drain(&rt->vcores[i], false); /* the wake-ups still queued */
    if (rt->ops->fini)
        rt->ops->fini();
    vcores_free(rt->nvcores);
    weft__stack_fini();
    weft__tls_fini();
    rt->nvcores = 0;
    atomic_store_explicit(&rt->nonline, 0, memory_order_seq_cst);
    atomic_store_explicit(&rt->closing, false, memory_order_seq_cst);
    atomic_store_explicit(&rt->state, WEFT__OFF, memory_order_seq_cst);
    weft__sys.pthread_mutex_unlock(&init_lock);
}
