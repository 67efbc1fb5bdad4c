/*
 * preempt.c — notifications (the signal that stands in for an IPI), the
 * preemption tick, and the safe-point test.
 *
 * The notification signal (SIGRTMAX-2, or WEFT_NOTIF_SIGNAL) reaches a vcore
 * from: tgkill by any weft call that needs its attention (weft_vcore_notify,
 * weft_vcore_preempt, weft_vcore_poke and the signal-safe calls in event.c;
 * weft_vcores_release in vcore.c); its periodic tick timer, every preemption
 * period, or the ticker's rt_tgsigqueueinfo; its retry timer, once, when a
 * notification had to be put off because the uthread was in unsafe code;
 * and another process's tgkill through the priority board. Every one is
 * aimed at the vcore's own kernel thread (SIGEV_THREAD_ID), never at the
 * process.
 *
 * The handler runs on the interrupted uthread's stack (no SA_ONSTACK), with
 * the signal blocked (never nested, however short the period: a burst of
 * ticks coalesces into the timer's overrun count). If the vcore runs
 * a uthread, something is pending, and it is safe, the handler switches the
 * uthread out like any yield (weft__notif_deliver): the signal frame stays
 * on the uthread's stack, and when the uthread is resumed — maybe on another
 * vcore — the handler returns and sigreturn restores every register,
 * including the FP/vector state, from that frame. Right before the switch
 * the handler unblocks the signal, so vcore context and the uthreads it
 * runs meanwhile take notifications; a signal arriving in that window finds
 * the PC inside weft and is deferred.
 * After the resume the handler rewrites uc_stack in the frame: sigreturn
 * re-installs the alternate stack recorded there, which is the old vcore's.
 *
 * Safe: the interrupted instruction is outside libc (with libpthread, libdl
 * and librt), ld.so, libgcc_s, libstdc++, liburing, the vDSO, the
 * sanitizer runtimes, weft and the program's PLT
 * stubs (the ranges are found once at weft_init), the uthread has notifications enabled and is not
 * inside a scheduler op (in_sched). weft's own code is its ELF section
 * weft_text (cmake/weft-text.sh renames .text of every libweft object), so
 * the range is the same whether libweft is linked statically or shared.
 *
 * The tick decides a preemption: if a uthread runs and nrun has not moved
 * since the previous tick, it has run for at least a whole period. The tick
 * posts WEFT_EV_PREEMPT with tick.preempt_for = nrun, so a preemption that had to
 * wait is dropped if the uthread switched meanwhile. It also posts
 * WEFT_EV_TIMER when an alarm of this vcore is due, and WEFT_EV_IO when
 * uthreads wait for I/O and nobody polled for 200 us: alarms fire and I/O
 * is noticed on time even while one uthread keeps every vcore.
 *
 * The ticker (WEFT_PREEMPT_TICKER=1, the fallback where a vcore cannot have
 * its own timer, and what serves every vcore once the yield pass's flag
 * mode or WEFT_PREEMPT_SIGNALS=0 is in use) is one thread that does the
 * same check from outside and signals only the vcores that need it (the
 * value of nrun it saw rides in the signal, so a stale preemption is
 * dropped as above).
 *
 * Cost: per-vcore timers are the default: no extra thread competing for the
 * cores, and the tick's decision is made on the vcore that owns the state;
 * the handler returns after a few loads when there is nothing to do. Both
 * are measured in bench/ (section fairness, variants "1 ms" and "1 ms,
 * ticker").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <weft/yield.h>

#include "internal.h"

static int notif_sig;                    /* fixed while running */
static bool preempt_signals = true;      /* WEFT_PREEMPT_SIGNALS=0 clears it; fixed while running */
static _Atomic unsigned period_us;       /* weft_set_preempt_period() */

#define RETRY_NS 200000u                 /* a deferred notification is tried again after */
enum { SIGV_TICK = 1, SIGV_RETRY = 2 };  /* sigev_value of the two timers */

/* ---- unsafe code ranges ------------------------------------------------------- */

struct range {
    uintptr_t lo, hi;
};
#define MAX_RANGES 64
static struct range ranges[MAX_RANGES];  /* written at init, read by the handler */
static int nranges;
static uintptr_t main_bias;              /* load address of the program itself */
static bool main_seen;

extern const char __start_weft_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_weft_text[] __attribute__((weak, visibility("hidden")));

static void add_range(uintptr_t lo, uintptr_t hi)
{
    if (nranges < MAX_RANGES && lo < hi)
        ranges[nranges++] = (struct range){ lo, hi };
}

static bool unsafe_object(const char *path)
{
    static const char *const names[] = { "libc.so", "ld-linux", "ld64.so", "linux-vdso",
                                         "linux-gate", "libpthread", "libgcc_s", "libstdc++",
                                         "libasan", "libtsan", "libubsan", "liblsan",
                                         "libweft", "libdl", "librt", "liburing" };
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(base, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size; (void)data;
    if (!main_seen) { /* the program comes first */
        main_seen = true;
        main_bias = info->dlpi_addr;
    }
    if (!info->dlpi_name || !unsafe_object(info->dlpi_name))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
            add_range(info->dlpi_addr + ph->p_vaddr, info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
    }
    return 0;
}

/* program_ranges(): the unsafe parts of the program itself, read once from
 * its file.
 *  - Its PLT stubs (.plt, .plt.got, .plt.sec, .iplt). Code linked into the
 *    program calls libc through them: a statically linked libweft, and a
 *    sanitizer runtime (ASan's free() reaches pthread_getspecific there, in
 *    the middle of its per-thread quarantine work). A stub is a jump on the
 *    way into a library, and its caller may hold a lock, so the handler
 *    never switches there (the application's own calls lose nothing: the
 *    callee is unsafe anyway).
 *  - A sanitizer runtime: clang links it into the program as one block of
 *    whole archives ahead of the program's own objects, so its range runs
 *    from its lowest to its highest function (checked on the tests: main and
 *    the tests' functions lie above it). Only when the program has one (its
 *    init function is exported), whether or not weft itself was built with
 *    it. */
static bool sanitizer_linked(void)
{
    return dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init") ||
           dlsym(RTLD_DEFAULT, "__ubsan_handle_add_overflow");
}

static void sanitizer_block(const unsigned char *m, const ElfW(Shdr) *sym_sh,
                            const ElfW(Shdr) *str_sh)
{
    /* Plain and mangled (namespaces __asan, __sanitizer, ...) names. */
    static const char *const marks[] = { "__asan", "__lsan", "__ubsan", "__tsan", "__sanitizer",
                                         "__interceptor_", "__interception" };
    const ElfW(Sym) *sym = (const void *)(m + sym_sh->sh_offset);
    const char *str = (const char *)(m + str_sh->sh_offset);
    size_t n = sym_sh->sh_size / sizeof *sym;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (size_t k = 0; k < n; k++) {
        if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_value)
            continue;
        const char *name = str + sym[k].st_name;
        for (size_t p = 0; p < sizeof marks / sizeof marks[0]; p++)
            if (strstr(name, marks[p])) {
                if (sym[k].st_value < lo)
                    lo = sym[k].st_value;
                if (sym[k].st_value + sym[k].st_size > hi)
                    hi = sym[k].st_value + sym[k].st_size;
                break;
            }
    }
    if (lo < hi)
        add_range(lo + main_bias, hi + main_bias);
}

static void program_ranges(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    const unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return;
    const ElfW(Ehdr) *eh = (const void *)m;
    const ElfW(Shdr) *sh = (const void *)(m + eh->e_shoff);
    if ((size_t)st.st_size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh > (size_t)st.st_size ||
        eh->e_shstrndx >= eh->e_shnum)
        goto out;
    const char *names = (const char *)(m + sh[eh->e_shstrndx].sh_offset);
    bool san = sanitizer_linked();
    for (int i = 0; i < eh->e_shnum; i++) {
        const char *name = names + sh[i].sh_name;
        if ((sh[i].sh_flags & SHF_EXECINSTR) &&
            (strncmp(name, ".plt", 4) == 0 || strcmp(name, ".iplt") == 0))
            add_range(sh[i].sh_addr + main_bias, sh[i].sh_addr + sh[i].sh_size + main_bias);
        if (san && sh[i].sh_type == SHT_SYMTAB && sh[i].sh_link < eh->e_shnum)
            sanitizer_block(m, &sh[i], &sh[sh[i].sh_link]);
    }
out:
    munmap((void *)m, (size_t)st.st_size);
}

static void find_ranges(void)
{
    nranges = 0;
    main_seen = false;
    if (__start_weft_text && __stop_weft_text)
        add_range((uintptr_t)__start_weft_text, (uintptr_t)__stop_weft_text);
    dl_iterate_phdr(phdr_cb, NULL);
    program_ranges();
}

static uintptr_t interrupted_pc(const void *ucv)
{
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
#error "interrupted_pc: unsupported architecture"
#endif
}

/* mask_bits(): signals 1..64 of a signal mask, bit n-1 for signal n: the
 * kernel's own mask, all a signal frame's uc_sigmask holds (the rest of
 * glibc's larger sigset_t lies past the frame's mask). */
static uint64_t mask_bits(const sigset_t *set)
{
    uint64_t m;
    memcpy(&m, set, sizeof m);
    return m;
}

/* in_handler(): the interrupted code runs with signals blocked that its vcore
 * thread did not block: inside an application's signal handler (the kernel
 * blocks the handled signal and the handler's sa_mask while it runs), or
 * where the uthread blocked them itself. Not a place to switch out: vcore
 * context and the uthreads run next would inherit that mask (the handled
 * signal stayed blocked on the vcore for good once the uthread moved), and a
 * handler resumed on another vcore returns through its frame there, whose
 * sigreturn installs the first vcore's signal stack on the second's thread
 * (two threads on one signal stack: their SA_ONSTACK frames overwrite each
 * other). A handler installed with SA_NODEFER and an empty sa_mask is not
 * seen. */
static bool in_handler(const struct weft__vcore *vc, const void *ucv)
{
    const ucontext_t *uc = ucv;
    return (mask_bits(&uc->uc_sigmask) & ~vc->tick.sigmask) != 0;
}

static bool pc_safe(const void *ucv)
{
    uintptr_t pc = interrupted_pc(ucv);
    for (int i = 0; i < nranges; i++)
        if (pc >= ranges[i].lo && pc < ranges[i].hi)
            return false;
    return true;
}

/* ---- the handler ------------------------------------------------------------ */

static void counter_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* post_due(): an alarm of vc is due, or I/O waits and nobody polled: ask
 * vcore context to look, without preempting the uthread. */
static void post_due(struct weft__vcore *vc, uint64_t now)
{
    if (atomic_load_explicit(&vc->heap.min, memory_order_relaxed) <= now)
        weft__event_post_bits(vc, 1ull << WEFT_EV_TIMER);
    if (weft__io_stale(now))
        weft__event_post_bits(vc, 1ull << WEFT_EV_IO);
}

/* tick(): a period passed on vc (its own thread, in the handler). */
static void tick(struct weft__vcore *vc)
{
    uint64_t now = clock_ns();
    uint64_t n = atomic_load_explicit(&vc->nrun, memory_order_relaxed);
    if (vc->current && n == vc->tick.nrun) {
        /* Never negative, whatever the order two ticks read the clock in. */
        uint64_t stretch = now > vc->tick.stretch_start ? now - vc->tick.stretch_start : 0;
        if (stretch > atomic_load_explicit(&vc->st.longest, memory_order_relaxed))
            atomic_store_explicit(&vc->st.longest, stretch, memory_order_relaxed);
        if (preempt_signals) {
            vc->tick.preempt_for = n;
            weft__event_post_bits(vc, 1ull << WEFT_EV_PREEMPT);
        }
    } else {
        vc->tick.nrun = n;
        vc->tick.stretch_start = now;
    }
    post_due(vc, now);
}

/* retry_later(): look again soon at a notification that landed in unsafe
 * code: after a quarter period (at most RETRY_NS), so a uthread that spends
 * most of its time in libc is still caught in its own code within about a
 * period. */
static void retry_later(struct weft__vcore *vc)
{
    vc->tick.retry_pending = true;
    uint64_t ns = (uint64_t)atomic_load_explicit(&period_us, memory_order_relaxed) * 250u;
    if (!ns || ns > RETRY_NS)
        ns = RETRY_NS;
    struct itimerspec its = { .it_value = { 0, (long)ns } };
    timer_settime((timer_t)vc->tick.rtimer, 0, &its, NULL);
}

/* from_ticker(): the ticker thread saw nrun == seen on vc for a whole period
 * (preempt) or found an alarm due (handler, on vc's thread). */
static void from_ticker(struct weft__vcore *vc, uintptr_t v)
{
    uint64_t seen = v >> 1;
    if ((v & 1) && vc->current && atomic_load_explicit(&vc->nrun, memory_order_relaxed) == seen) {
        vc->tick.preempt_for = seen;
        weft__event_post_bits(vc, 1ull << WEFT_EV_PREEMPT);
    }
    post_due(vc, clock_ns());
}

static void notif_handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    struct weft__vcore *vc = weft__tls_vc;
    if (!vc)
        return;
    /* Nested in an application's signal handler that interrupted weft (a
     * lock held, a switch under way, or on the signal stack): the PC test
     * below would see the handler's code and call it safe. And while we run,
     * a handler nested in us must see weft's code running (crit). */
    bool nested = WEFT__CRIT_LOAD() || weft__on_altstack(vc);
    weft__crit_enter();
    int saved = errno;
    counter_add(&vc->st.notifs, 1);
    if (si->si_code == SI_TIMER && si->si_value.sival_int == SIGV_RETRY)
        vc->tick.retry_pending = false;
    if (si->si_code == SI_TIMER && si->si_value.sival_int == SIGV_TICK)
        tick(vc);
    else if (si->si_code == SI_QUEUE && si->si_pid == getpid())
        from_ticker(vc, (uintptr_t)si->si_value.sival_ptr);
    else if (si->si_code == SI_TKILL && si->si_pid != getpid())
        /* Another process on the priority board has more urgent work on
         * this CPU now (board.c): let the scheduler reconsider. */
        weft__event_post_bits(vc, 1ull << WEFT__EV_RESCHED);
    struct weft_uthread *ut = vc->current;
    uint64_t bits = atomic_load_explicit(&vc->ev.bits, memory_order_relaxed);
    if (!bits) {
        /* Signalled for events a decision took meanwhile (it cleared
         * ev.notif_sent before taking them; the poster set it again after):
         * clear it, or the next post would count on a signal never sent.
         * Then look once more, for a post that saw it still set. */
        atomic_store_explicit(&vc->ev.notif_sent, false, memory_order_seq_cst);
        bits = atomic_load_explicit(&vc->ev.bits, memory_order_seq_cst);
        if (!bits)
            goto out;
    }
    if (!ut) {
        /* Vcore context handles events at its next decision, unless it has
         * looked already and is about to run a uthread, which may run on
         * without deciding: ev.notif_sent stays set until the events are
         * handled, so no other signal would come. Look again soon. */
        if (!vc->tick.retry_pending && atomic_load_explicit(&vc->tick.has_timers, memory_order_relaxed))
            retry_later(vc);
        goto out;
    }
#ifdef WEFT_TSAN
    bool safe = false; /* TSan runs us late, from inside its runtime: see event.h */
    (void)pc_safe;
    (void)in_handler;
#else
    bool safe = !nested && ut->notif_depth == 0 && ut->in_sched == 0 && pc_safe(ucv) &&
                !in_handler(vc, ucv);
#endif
    (void)nested;
    if (!safe) {
        if (bits & (1ull << WEFT_EV_PREEMPT))
            counter_add(&vc->st.deferred, 1);
        /* Disabled: weft_notifs_enable delivers. Unsafe code: look again
         * soon, one retry at a time. */
        if (ut->notif_depth == 0 && !vc->tick.retry_pending &&
            atomic_load_explicit(&vc->tick.has_timers, memory_order_relaxed))
            retry_later(vc);
        goto out;
    }
    /* The signal is blocked while we run; vcore context and the uthreads it
     * runs next must not inherit that. (When ut resumes, sigreturn restores
     * the mask it was interrupted with.) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, notif_sig);
    weft__sys.pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    errno = saved; /* weft__notif_deliver saves it into ut and restores it on resume */
    weft__crit_leave();
    weft__notif_deliver(vc, ut);
    /* Resumed, maybe on another vcore: sigreturn must re-install that
     * vcore's alternate stack, not the one recorded when we were
     * interrupted. */
    struct weft__vcore *now = weft__vc();
    ucontext_t *uc = ucv;
    uc->uc_stack.ss_sp = now->altstack;
    uc->uc_stack.ss_size = WEFT__ALTSTACK_SIZE;
    uc->uc_stack.ss_flags = 0;
    return;
out:
    weft__crit_leave();
    errno = saved;
}

int weft__notif_signo(void)
{
    return notif_sig;
}

void weft__notif_signal(struct weft__vcore *vc)
{
    int saved = errno;
    syscall(SYS_tgkill, getpid(), atomic_load_explicit(&vc->tid, memory_order_relaxed), notif_sig);
    errno = saved;
}

/* ---- the ticker: one thread instead of per-vcore tick timers -------------------- */

/* Used for every vcore with WEFT_PREEMPT_TICKER=1, and for a vcore whose
 * tick timer could not be made (qemu-user has no SIGEV_THREAD_ID timers).
 * It wakes every period, and signals only the vcores that need it: one busy
 * with the same uthread since its last look, or with an alarm due. */
static bool ticker_for_all;              /* WEFT_PREEMPT_TICKER=1; fixed while running */
static pthread_t ticker;
static bool ticker_started;              /* weft_init / weft_shutdown (init lock) */
static _Atomic bool ticker_stop;
static uint32_t ticker_word;             /* futex: bumped when the ticker must look again */
/* The ticker's per-vcore bookkeeping; the ticker's own (made and freed by
 * it). Globals, not locals, so that a fork child still reaches them. */
static uint64_t *tk_seen, *tk_since;
static unsigned *tk_looks;
static void *volatile tk_parents[3]; /* a fork child: the parent ticker's, kept reachable */

static void ticker_poke(void)
{
    atomic_fetch_add_explicit(WEFT__AT(&ticker_word), 1, memory_order_seq_cst);
    weft__futex_wake(&ticker_word, 1);
}

static void ticker_send(struct weft__vcore *vc, uint64_t seen, bool preempt)
{
    siginfo_t si = { 0 };
    si.si_signo = notif_sig;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = (void *)(uintptr_t)(seen << 1 | preempt);
    syscall(SYS_rt_tgsigqueueinfo, getpid(), atomic_load_explicit(&vc->tid, memory_order_relaxed),
            notif_sig, &si);
}

/* use_ticker(): the ticker serves every vcore: asked for, or code compiled
 * with the yield pass wants flags set (a write, no signal), or the clock
 * must send no signals at all (a per-vcore tick is one). */
static bool use_ticker(void)
{
    return ticker_for_all || weft__yield_flags_wanted() || !preempt_signals;
}

static bool ticks_itself(struct weft__vcore *vc)
{
    return !use_ticker() && atomic_load_explicit(&vc->tick.has_timers, memory_order_acquire);
}

/* set_flag(): ask the yield pass's checks on vc to yield, for run r. */
static void set_flag(struct weft__vcore *vc, uint64_t r)
{
    atomic_store_explicit(&vc->tick.yield_for, r, memory_order_release);
    if (vc->tick.yield_flagp)
        atomic_store_explicit(WEFT__ATOMIC(unsigned char, vc->tick.yield_flagp), 1, memory_order_release);
}

/* ticker_place() pins the ticker to the CPUs of our affinity mask that no
 * vcore is pinned to, when there are any: there it never has to wait behind
 * a busy vcore's uthread (on a shared CPU the kernel may let a freshly woken
 * thread wait for the running one's slice, milliseconds: the report's
 * yieldpass section shows quanta stretched that way), and its wake-ups cost the vcores nothing.
 * With a vcore on every CPU it stays unpinned. */
static void ticker_place(const struct weft__runtime *rt)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    for (int i = 0; i < rt->nvcores; i++)
        if (rt->vcores[i].cpu >= 0 && rt->vcores[i].cpu < CPU_SETSIZE)
            CPU_CLR(rt->vcores[i].cpu, &set);
    if (CPU_COUNT(&set) > 0)
        sched_setaffinity(0, sizeof set, &set); /* best effort */
}

static void *ticker_main(void *arg)
{
    (void)arg;
    /* Wake on time: the default 50 us timer slack stretched a 100 us
     * quantum's flagged runs to ~240 us (bench section yieldpass). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    struct weft__runtime *rt = &weft__rt;
    ticker_place(rt);
    int n = rt->nvcores;
    uint64_t *seen = tk_seen = calloc((size_t)n, sizeof *seen);
    uint64_t *since = tk_since = calloc((size_t)n, sizeof *since);
    unsigned *looks = tk_looks = calloc((size_t)n, sizeof *looks);
    uint64_t prev_look = 0;                  /* time of the previous look */
    for (int i = 0; seen && i < n; i++)
        seen[i] = UINT64_MAX; /* not looked at yet */
    for (;;) {
        /* The word before the stop flag (both seq_cst; the stopper stores
         * the flag, then bumps the word): a stop we do not see here bumped
         * the word after we read it, so the wait below returns at once.
         * Read the other way round, a stop landing between the two reads
         * left us waiting for good (weft_shutdown hung in the join). */
        uint32_t word = atomic_load_explicit(WEFT__AT(&ticker_word), memory_order_seq_cst);
        if (atomic_load_explicit(&ticker_stop, memory_order_seq_cst))
            break;
        unsigned us = atomic_load_explicit(&period_us, memory_order_seq_cst);
        bool needed = false; /* a period, and a vcore that does not tick itself */
        for (int i = 0; us && seen && since && looks && !needed && i < n; i++)
            needed = !ticks_itself(&rt->vcores[i]);
        if (!needed) { /* every vcore ticks itself, or no period: sleep until poked */
            weft__futex_wait(&ticker_word, word, UINT64_MAX);
            continue;
        }
        /* With flags, look twice a period: a run is flagged after 1 to 1.5
         * periods (1 when it follows a flagged one), and signalled a period
         * later if it did not yield. */
        bool flags = weft__yield_flags_wanted();
        unsigned k = flags ? 2 : 1;
        weft__futex_wait(&ticker_word, word, clock_ns() + (uint64_t)us * 1000u / k);
        uint64_t now = clock_ns();
        uint64_t last_look = prev_look ? prev_look : now;
        prev_look = now;
        for (int i = 0; i < n; i++) {
            struct weft__vcore *vc = &rt->vcores[i];
            if (ticks_itself(vc) || !atomic_load_explicit(&vc->tid, memory_order_relaxed))
                continue;
            uint64_t r = atomic_load_explicit(&vc->nrun, memory_order_relaxed);
            bool busy = weft_vcore_busy(i);
            bool same = busy && r == seen[i];
            if (!same) {
                /* A run that follows one we flagged or signalled at the
                 * previous look began right after it (the flag is taken
                 * within microseconds): count it from there. Otherwise it
                 * began at some point since, and counts from now. */
                bool cut = busy && (looks[i] == k || (flags && looks[i] == 2 * k));
                seen[i] = r;
                since[i] = cut ? last_look : now;
                looks[i] = 0;
                same = cut;
            }
            if (same) {
                looks[i]++;
                if (looks[i] >= k &&
                    now - since[i] > atomic_load_explicit(&vc->st.longest, memory_order_relaxed))
                    atomic_store_explicit(&vc->st.longest, now - since[i], memory_order_relaxed);
                if (flags && looks[i] == k)
                    set_flag(vc, r);
                if (preempt_signals && looks[i] >= (flags ? 2 * k : k)) {
                    ticker_send(vc, r, true);
                    continue;
                }
            }
            if (busy && preempt_signals &&
                (atomic_load_explicit(&vc->heap.min, memory_order_relaxed) <= now ||
                 weft__io_stale(now) || atomic_load_explicit(&vc->ev.bits, memory_order_relaxed)))
                ticker_send(vc, r, false); /* alarm or poll due, or a deferred notification */
        }
    }
    free(seen);
    free(since);
    free(looks);
    tk_seen = tk_since = NULL;
    tk_looks = NULL;
    return NULL;
}

int weft__notif_started(void)
{
    sigset_t all, old;
    sigfillset(&all);
    weft__sys.pthread_sigmask(SIG_SETMASK, &all, &old); /* the ticker takes no signals */
    atomic_store_explicit(&ticker_stop, false, memory_order_seq_cst);
    int r = weft__sys.pthread_create(&ticker, NULL, ticker_main, NULL);
    weft__sys.pthread_sigmask(SIG_SETMASK, &old, NULL);
    ticker_started = r == 0;
    return r;
}

void weft__notif_forked(void)
{
    tk_parents[0] = tk_seen, tk_parents[1] = tk_since, tk_parents[2] = tk_looks;
    tk_seen = tk_since = NULL;
    tk_looks = NULL;
    ticker_started = false; /* threads and POSIX timers are not inherited */
    atomic_store_explicit(WEFT__ATOMIC(unsigned char, &weft__yield_flag), 0, memory_order_relaxed);
    atomic_store_explicit(&ticker_stop, false, memory_order_relaxed);
    atomic_store_explicit(WEFT__AT(&ticker_word), 0, memory_order_relaxed);
}

void weft__notif_stopping(void)
{
    if (!ticker_started)
        return;
    atomic_store_explicit(&ticker_stop, true, memory_order_seq_cst);
    ticker_poke();
    weft__sys.pthread_join(ticker, NULL);
    ticker_started = false;
}

/* ---- the period ---------------------------------------------------------------- */

static void arm_tick(struct weft__vcore *vc, unsigned us)
{
    struct itimerspec its = { 0 };
    if (us) {
        its.it_value.tv_sec = us / 1000000u;
        its.it_value.tv_nsec = (long)(us % 1000000u) * 1000;
        its.it_interval = its.it_value;
    }
    timer_settime((timer_t)vc->tick.ptimer, 0, &its, NULL);
}

/* arm_current() arms vc's own tick for the current period (off: disarms
 * it). A weft_set_preempt_period() between our read of the period and our
 * arming may have armed us first: arm until the period we armed for is the
 * current one (else a vcore waking up could re-arm a period just turned
 * off). */
static void arm_current(struct weft__vcore *vc, bool off)
{
    unsigned us;
    do {
        us = atomic_load_explicit(&period_us, memory_order_seq_cst);
        arm_tick(vc, off ? 0 : us);
    } while (us != atomic_load_explicit(&period_us, memory_order_seq_cst));
}

static bool period_ok(unsigned us)
{
    return us == 0 || (us >= 10 && us <= 10000000u);
}

int weft_set_preempt_period(unsigned us)
{
    if (!period_ok(us))
        return EINVAL;
    atomic_store_explicit(&period_us, us, memory_order_seq_cst);
    struct weft__runtime *rt = &weft__rt;
    bool outside = !weft__vc_at_entry();
    if (!outside || weft__outside_enter(WEFT__GATE_USE) == 0) {
        for (int i = 0; i < rt->nvcores; i++)
            if (atomic_load_explicit(&rt->vcores[i].tick.has_timers, memory_order_seq_cst))
                arm_tick(&rt->vcores[i], use_ticker() ? 0 : us);
        if (outside)
            weft__outside_leave();
    }
    ticker_poke();
    return 0;
}

void weft__notif_repoll(void)
{
    weft_set_preempt_period(atomic_load_explicit(&period_us, memory_order_seq_cst));
}

unsigned weft_preempt_period(void)
{
    return atomic_load_explicit(&period_us, memory_order_seq_cst);
}

/* ---- set-up ---------------------------------------------------------------------- */

/* signal_number(): WEFT_NOTIF_SIGNAL if valid, else SIGRTMAX-2 (not -1:
 * qemu-user cannot deliver a guest's SIGRTMAX-1 on aarch64). */
static int signal_number(void)
{
    long long v = weft__cfg_num(WEFT__CFG_NOTIF_SIGNAL, 0);
    if (v >= SIGRTMIN && v <= SIGRTMAX)
        return (int)v;
    if (v)
        fprintf(stderr, "weft: ignoring WEFT_NOTIF_SIGNAL=%lld (not a real-time signal %d..%d)\n",
                v, SIGRTMIN, SIGRTMAX);
    return SIGRTMAX - 2;
}

int weft__notif_init(unsigned preempt_us)
{
    if (!period_ok(preempt_us))
        return EINVAL;
    notif_sig = signal_number();
    struct sigaction sa = { 0 };
    sa.sa_sigaction = notif_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* blocked while it runs: no nesting */
    sigemptyset(&sa.sa_mask);
    struct sigaction old;
    if (sigaction(notif_sig, NULL, &old) != 0)
        return EINVAL;
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != notif_handler
                                    : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
        fprintf(stderr, "weft: signal %d (the notification signal) already has a handler; "
                        "set WEFT_NOTIF_SIGNAL to a free real-time signal\n", notif_sig);
        return EBUSY;
    }
    ticker_for_all = weft__cfg_num(WEFT__CFG_PREEMPT_TICKER, 0) == 1;
    preempt_signals = weft__cfg_num(WEFT__CFG_PREEMPT_SIGNALS, 1) == 1;
    find_ranges();
    if (sigaction(notif_sig, &sa, NULL) != 0)
        return EINVAL;
    atomic_store_explicit(&period_us, preempt_us, memory_order_seq_cst);
    return 0;
}

void weft__notif_vcore_start(struct weft__vcore *vc)
{
    atomic_store_explicit(WEFT__ATOMIC(unsigned char, &weft__yield_flag), 0, memory_order_relaxed);
    weft__yield_count = 0;
    vc->tick.yield_flagp = &weft__yield_flag; /* published by the tid store */
    atomic_store_explicit(&vc->tick.yield_for, UINT64_MAX, memory_order_seq_cst);
    atomic_store_explicit(&vc->tid, (int)syscall(SYS_gettid), memory_order_seq_cst);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, notif_sig);
    weft__sys.pthread_sigmask(SIG_UNBLOCK, &set, &set);
    sigdelset(&set, notif_sig);
    vc->tick.sigmask = mask_bits(&set);
    timer_t t[2];
    for (int i = 0; i < 2; i++) {
        struct sigevent sev = { 0 };
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = notif_sig;
        sev.sigev_value.sival_int = i == 0 ? SIGV_TICK : SIGV_RETRY;
        sev._sigev_un._tid = atomic_load_explicit(&vc->tid, memory_order_seq_cst);
        if (timer_create(CLOCK_MONOTONIC, &sev, &t[i]) != 0) {
            if (i)
                timer_delete(t[0]);
            ticker_poke(); /* the ticker covers this vcore */
            return;
        }
    }
    vc->tick.ptimer = (void *)t[0];
    vc->tick.rtimer = (void *)t[1];
    atomic_store_explicit(&vc->tick.has_timers, true, memory_order_release);
    arm_current(vc, use_ticker());
    ticker_poke();
}

void weft__notif_sleeping(struct weft__vcore *vc, bool asleep)
{
    if (atomic_load_explicit(&period_us, memory_order_relaxed) && !use_ticker() &&
        atomic_load_explicit(&vc->tick.has_timers, memory_order_relaxed))
        arm_current(vc, asleep);
}

void weft__notif_vcore_stop(struct weft__vcore *vc)
{
    if (!atomic_load_explicit(&vc->tick.has_timers, memory_order_seq_cst))
        return;
    atomic_store_explicit(&vc->tick.has_timers, false, memory_order_seq_cst);
    timer_delete((timer_t)vc->tick.ptimer);
    timer_delete((timer_t)vc->tick.rtimer);
}
