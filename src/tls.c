/*
 * tls.c — per-uthread thread-local storage (WEFT_TLS=uthread).
 *
 * In the default (shared) mode a uthread uses the TLS of whichever vcore
 * runs it. In uthread mode each uthread gets its own copy of the static TLS
 * area, laid out as glibc lays out a thread's (learnt from the running
 * process, not assumed):
 *
 *   x86_64 (TLS variant II)          aarch64 (variant I)
 *   [ static TLS blocks ][ TCB ]     [ struct pthread ][ TCB | static TLS blocks ]
 *                        ^ TP                              ^ TP
 *
 * The TCB is glibc's struct pthread (x86_64: its tcbhead_t first: the self
 * pointers, dtv, stack and pointer guards). The area's size is the C
 * library's static TLS size (_dl_get_tls_static_info: the modules loaded at
 * start plus the surplus kept for later ones); each module's block is placed
 * at the offset from the thread pointer that it has in the thread that
 * starts the runtime (dl_iterate_phdr's dlpi_tls_data) and filled from its
 * TLS image. The struct pthread is a copy of that thread's, with the self
 * pointers, dtv and the thread-specific blocks made the uthread's own and
 * rseq's cpu_id set to -1 (the copy is not registered with the kernel, so
 * sched_getcpu asks the system). Its dtv is laid out as glibc's (a capacity
 * word, the generation, one {value, to_free} pair per module), so
 * __tls_get_addr can grow it and allocate blocks for dlopen()ed modules on
 * first use, as it does for threads; those are freed when the uthread ends.
 * The area itself is carved from the top of the uthread's stack mapping (a
 * stack-copy uthread, which has none, gets it from the heap).
 *
 * The thread pointer is switched (tls_set: wrfsbase where the CPU and kernel
 * allow it, arch_prctl(ARCH_SET_FS) otherwise; msr tpidr_el0 on aarch64)
 * whenever a vcore starts running a uthread (weft__tls_enter: in run_on and
 * at the top of the hand-off entries, before the blocking callback publishes
 * the uthread that leaves) and when a vcore enters vcore context
 * (weft__tls_leave, in weft__vcore_arrive): vcore context always runs on its
 * kernel thread's own TLS, so a uthread's TLS is used by one kernel thread at
 * a time.
 *
 * weft's own per-kernel-thread words live in TLS too: weft__tls_vc (the
 * vcore) and weft__tls_crit (what this kernel thread is inside, read by
 * signal handlers). Whatever TLS is installed must hold the kernel thread's
 * values, so each switch carries them into the TLS it installs: the vcore
 * pointer and the crit word are written into the uthread's copy before its
 * thread pointer is loaded, and the crit word is carried back into the
 * kernel thread's own TLS when vcore context is entered. glibc's tid field
 * of the uthread's struct pthread is set to the vcore's tid at each enter
 * (glibc's own locks and raise() use it).
 *
 * Refused (weft_init's ENOTSUP): sanitizer builds (their runtimes keep
 * per-thread state in TLS that a copy would corrupt). Not refused, but
 * without effect in this mode: the yield pass's flag mode (the ticker sets
 * the flag in the vcore thread's TLS, which a uthread no longer reads; weft
 * says so once, weft__tls_flag_mode_refused): counter mode and signals
 * still preempt.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <asm/prctl.h>
#endif

#include "internal.h"

bool weft__tls_uthread;
bool weft__tls_default_uthread;

#define TLS_DTV_UNALLOCATED ((void *)-1l)
#define DTV_SURPLUS 14

/* glibc's dtv entry. */
typedef union {
    size_t counter;
    struct {
        void *val;
        void *to_free;
    } pointer;
} dtv_t;

struct module {
    size_t modid;
    ptrdiff_t off;                   /* block start - TP */
    const void *image;
    size_t filesz, memsz;
};

static struct {
    char *tmpl;                      /* the template area */
    size_t size, align;              /* the area */
    ptrdiff_t tp_off;                /* TP - area start */
    ptrdiff_t pd_off;                /* struct pthread - TP */
    size_t pd_size;
    ptrdiff_t tid_off, dtv_off, spec_off; /* in struct pthread */
    ptrdiff_t spec1_off;             /* specific_1stblock in struct pthread */
    size_t spec_count, spec1_size;
    ptrdiff_t rseq_cpu_off;          /* rseq's cpu_id - TP, or 0: none */
    ptrdiff_t crit_off, vc_off;      /* weft__tls_crit, weft__tls_vc - TP */
    ptrdiff_t malloc_off[4];         /* the C library's per-thread malloc words - TP (probe) */
    int nmalloc;
    struct module *mods;
    size_t nmods, maxmod, gen;
    bool wrfsbase;
    void (*call_tls_dtors)(void);
} L;

static void *tp_now(void)
{
    return __builtin_thread_pointer();
}

/* tls_set(): load the thread pointer. */
static inline void tls_set(void *tp)
{
#if defined(__x86_64__)
    if (WEFT__LIKELY(L.wrfsbase))
        __asm__ volatile("wrfsbase %0" ::"r"(tp) : "memory");
    else
        syscall(SYS_arch_prctl, ARCH_SET_FS, tp);
#elif defined(__aarch64__)
    __asm__ volatile("msr tpidr_el0, %0" ::"r"(tp) : "memory");
#endif
}

/* Reads and writes of weft's own words through the TLS installed now: not
 * inlined, so that no TLS address computed before a switch is reused. */
static WEFT__NOINLINE unsigned crit_get(void)
{
    return WEFT__CRIT_LOAD();
}
static WEFT__NOINLINE void crit_put(unsigned v)
{
    atomic_store_explicit(WEFT__ATOMIC(unsigned, &weft__tls_crit), v, memory_order_relaxed);
}

void weft__tls_enter(struct weft__vcore *vc, struct weft_uthread *t)
{
    char *tp = t->tls;
    for (int i = 0; i < L.nmalloc; i++) /* malloc's cache and arena stay the vcore's */
        *(void **)(void *)(tp + L.malloc_off[i]) = *(void **)(void *)((char *)vc->thread_tp + L.malloc_off[i]);
    *(int *)(void *)(tp + L.pd_off + L.tid_off) = atomic_load_explicit(&vc->tid, memory_order_relaxed);
    *(struct weft__vcore **)(void *)(tp + L.vc_off) = vc;
    *(unsigned *)(void *)(tp + L.crit_off) = crit_get();
    atomic_signal_fence(memory_order_seq_cst); /* a handler sees the copy ready */
    tls_set(tp);
}

void weft__tls_leave(struct weft__vcore *vc)
{
    unsigned crit = crit_get();
    char *tp = tp_now();
    for (int i = 0; i < L.nmalloc; i++) /* malloc may have set them up meanwhile */
        *(void **)(void *)((char *)vc->thread_tp + L.malloc_off[i]) = *(void **)(void *)(tp + L.malloc_off[i]);
    tls_set(vc->thread_tp);
    crit_put(crit);
}

/* ---- set-up ------------------------------------------------------------------------ */

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_TLS || ph->p_memsz == 0)
            continue;
        struct module *m = &L.mods[L.nmods++];
        m->modid = info->dlpi_tls_modid;
        m->off = info->dlpi_tls_data ? (char *)info->dlpi_tls_data - (char *)tp_now() : 0;
        m->image = (const char *)info->dlpi_addr + ph->p_vaddr;
        m->filesz = ph->p_filesz;
        m->memsz = ph->p_memsz;
        if (!info->dlpi_tls_data)
            m->image = NULL; /* dynamic TLS: glibc allocates it on first use */
        if (m->modid > L.maxmod)
            L.maxmod = m->modid;
        break;
    }
    return L.nmods == 256; /* stop when full */
}

static int count_tls(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS)
            ++*(size_t *)arg;
    return 0;
}

/* probe(): what glibc sets up in a new thread's TLS beyond the images, at
 * offsets it does not publish, learnt by installing a fresh copy of the
 * template on this thread for a moment (signals blocked) and noting which
 * pointer-sized words change (errno and the struct pthread aside):
 *  - __ctype_init(), which start_thread calls for every thread, points the
 *    ctype tables' TLS words at the locale's tables: the same values for
 *    every thread, so they go into the template;
 *  - malloc keeps a per-thread cache and arena in TLS, which it frees only
 *    when a kernel thread exits. A uthread must use its vcore's, as in the
 *    shared mode (no uthread is preempted inside libc, so one cache per
 *    kernel thread is safe), or every uthread that ends would leak its own:
 *    weft__tls_enter/leave carry those words. */
static int probe_diff(char *area, const char *before, ptrdiff_t errno_off, ptrdiff_t *offs,
                      int max)
{
    int n = 0;
    for (size_t o = 0; o + sizeof(void *) <= L.size; o += sizeof(void *)) {
        ptrdiff_t off = (ptrdiff_t)o - L.tp_off;
        if (off >= L.pd_off && off < L.pd_off + (ptrdiff_t)L.pd_size)
            continue; /* the struct pthread (tid, ...) */
        if (off == errno_off || off == (errno_off & ~(ptrdiff_t)7))
            continue;
        if (memcmp(area + o, before + o, sizeof(void *)) != 0) {
            if (n == max)
                return max + 1;
            offs[n++] = off;
        }
    }
    return n;
}

static int probe(char *tp)
{
    char *area = aligned_alloc(L.align, L.size);
    char *copy = aligned_alloc(L.align, L.size);
    if (!area || !copy) {
        free(area);
        free(copy);
        return ENOMEM;
    }
    memcpy(area, L.tmpl, L.size);
    char *ptp = area + L.tp_off;
    char *ppd = ptp + L.pd_off;
#if defined(__x86_64__)
    ((void **)(void *)ptp)[0] = ptp;
    ((void **)(void *)ptp)[2] = ptp;
#endif
    ((void **)(void *)(ppd + L.spec_off))[0] = ppd + L.spec1_off;
    memcpy(copy, area, L.size);
    ptrdiff_t errno_off = (char *)&errno - tp;
    void (*ctype_init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "__ctype_init");
    sigset_t all, old;
    sigfillset(&all);
    weft__sys.pthread_sigmask(SIG_SETMASK, &all, &old); /* no handler on the probe's TLS */
    tls_set(ptp);
    if (ctype_init)
        ctype_init();
    tls_set(tp);
    ptrdiff_t ctype_off[8];
    int nctype = probe_diff(area, copy, errno_off, ctype_off, 8);
    memcpy(copy, area, L.size);
    tls_set(ptp);
    void *volatile p = malloc(24);
    free(p);
    tls_set(tp);
    weft__sys.pthread_sigmask(SIG_SETMASK, &old, NULL);
    L.nmalloc = probe_diff(area, copy, errno_off, L.malloc_off, 3);
    for (int i = 0; i < nctype && nctype <= 8; i++) /* the same for every thread */
        memcpy(L.tmpl + L.tp_off + ctype_off[i], area + L.tp_off + ctype_off[i], sizeof(void *));
    /* the probe's own malloc cache stays allocated: once per process */
    free(copy);
    free(area);
    return L.nmalloc > 0 && L.nmalloc <= 3 && (!ctype_init || (nctype > 0 && nctype <= 8)) ? 0
                                                                                   : EINVAL;
}

static int refuse(const char *why)
{
    fprintf(stderr, "weft: WEFT_TLS=uthread refused: %s\n", why);
    return ENOTSUP;
}

int weft__tls_init(void)
{
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
    (void)collect;
    (void)count_tls;
    (void)probe;
    return refuse("sanitizer runtimes keep per-thread state in TLS");
#elif !defined(__x86_64__) && !defined(__aarch64__)
    return refuse("no thread-pointer switch for this CPU");
#else
    if (L.tmpl)
        goto ready; /* learnt by an earlier weft_init */
    void *libc = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
    void (*static_info)(size_t *, size_t *) =
        (void (*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
    const unsigned *sizeof_pd = libc ? dlsym(libc, "_thread_db_sizeof_pthread") : NULL;
    const uint32_t *tid_d = libc ? dlsym(libc, "_thread_db_pthread_tid") : NULL;
    const uint32_t *dtv_d = libc ? dlsym(libc, "_thread_db_pthread_dtvp") : NULL;
    const uint32_t *spec_d = libc ? dlsym(libc, "_thread_db_pthread_specific") : NULL;
    const unsigned *keydata = libc ? dlsym(libc, "_thread_db_sizeof_pthread_key_data") : NULL;
    const ptrdiff_t *rseq_off = dlsym(RTLD_DEFAULT, "__rseq_offset");
    const unsigned *rseq_size = dlsym(RTLD_DEFAULT, "__rseq_size");
    L.call_tls_dtors = (void (*)(void))(libc ? dlsym(libc, "__call_tls_dtors") : NULL);
    if (!static_info || !sizeof_pd || !tid_d || !dtv_d || !spec_d || !keydata)
        return refuse("this C library does not describe its thread layout (glibc's "
                      "_dl_get_tls_static_info and _thread_db_* symbols)");
    size_t static_size, static_align;
    static_info(&static_size, &static_align);
    L.pd_size = *sizeof_pd;
    char *tp = tp_now();
#if defined(__x86_64__)
    L.pd_off = 0;                       /* struct pthread at TP ... */
    L.size = static_size;               /* ... inside the static size, at its end */
    L.tp_off = (ptrdiff_t)(static_size - L.pd_size);
    L.wrfsbase = (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
    if (weft__cfg_num(WEFT__CFG_TLS_ARCH_PRCTL, 0) == 1) /* for the benchmark: the other way */
        L.wrfsbase = false;
#else
    L.pd_off = -(ptrdiff_t)L.pd_size;   /* struct pthread just below TP */
    L.size = L.pd_size + static_size;
    L.tp_off = (ptrdiff_t)L.pd_size;
#endif
    L.align = static_align > 64 ? static_align : 64;
    L.size = (L.size + L.align - 1) & ~(L.align - 1);
    L.tid_off = tid_d[2];
    L.dtv_off = dtv_d[2];
    L.spec_off = spec_d[2];
    L.spec_count = spec_d[1];
    char *pd = tp + L.pd_off;
    L.spec1_off = *(char **)(void *)(pd + L.spec_off) - pd; /* specific[0] = &specific_1stblock */
    L.spec1_size = (size_t)*keydata * 32;
    if (L.spec1_off < 0 || (size_t)L.spec1_off + L.spec1_size > L.pd_size)
        return refuse("glibc's struct pthread is not laid out as expected");
    L.rseq_cpu_off = rseq_off && rseq_size && *rseq_size ? *rseq_off + 4 : 0;
    L.crit_off = (char *)&weft__tls_crit - tp;
    L.vc_off = (char *)&weft__tls_vc - tp;
    size_t nmods = 0;
    dl_iterate_phdr(count_tls, &nmods);
    if (!(L.mods = calloc(nmods ? nmods : 1, sizeof *L.mods)))
        return ENOMEM;
    dl_iterate_phdr(collect, NULL);
    dtv_t *dtv = *(dtv_t **)(void *)(pd + L.dtv_off);
    L.gen = dtv[0].counter;
    /* The template: the TLS images at their offsets, zeros elsewhere, and a
     * copy of this thread's struct pthread. */
    char *t = aligned_alloc(L.align, L.size);
    if (!t)
        return ENOMEM;
    memset(t, 0, L.size);
    char *ttp = t + L.tp_off;
    for (size_t i = 0; i < L.nmods; i++) {
        struct module *m = &L.mods[i];
        if (!m->image)
            continue;
        if (ttp + m->off < t || ttp + m->off + (ptrdiff_t)m->memsz > t + L.size) {
            free(t);
            return refuse("a module's TLS block lies outside the static TLS area");
        }
        memcpy(ttp + m->off, m->image, m->filesz);
    }
    memcpy(ttp + L.pd_off, pd, L.pd_size);
    L.tmpl = t;
    if (probe(tp) != 0) {
        L.tmpl = NULL;
        free(t);
        return refuse("cannot find the C library's per-thread ctype and malloc state");
    }
ready:
    weft__tls_uthread = true;
    return 0;
#endif
}

void weft__tls_fini(void)
{
    weft__tls_uthread = false;
}

bool weft__tls_flag_mode_refused(void)
{
    if (!weft__tls_uthread)
        return false;
    static _Atomic bool said;
    if (!atomic_exchange_explicit(&said, true, memory_order_seq_cst))
        fprintf(stderr, "weft: the yield pass's flag mode needs WEFT_TLS=shared; with "
                        "WEFT_TLS=uthread only signals preempt\n");
    return true;
}

/* ---- per uthread ------------------------------------------------------------------------- */

char *weft__tls_make(struct weft_uthread *t, char *top)
{
    char *area = (char *)(((uintptr_t)top - L.size) & ~(uintptr_t)(L.align - 1));
    memcpy(area, L.tmpl, L.size);
    char *tp = area + L.tp_off;
    char *pd = tp + L.pd_off;
    size_t n = (L.maxmod > L.nmods ? L.maxmod : L.nmods) + DTV_SURPLUS;
    dtv_t *raw = calloc(n + 2, sizeof *raw);
    if (raw) {
        raw[0].counter = n;
        dtv_t *dtv = raw + 1;
        dtv[0].counter = L.gen;
        for (size_t i = 1; i <= n; i++)
            dtv[i].pointer.val = TLS_DTV_UNALLOCATED;
        for (size_t i = 0; i < L.nmods; i++)
            if (L.mods[i].image)
                dtv[L.mods[i].modid].pointer.val = tp + L.mods[i].off;
        *(dtv_t **)(void *)(pd + L.dtv_off) = dtv;
    } else {
        *(dtv_t **)(void *)(pd + L.dtv_off) = NULL; /* __tls_get_addr would fault: say so */
        weft__panic("no memory for uthread %llu's dtv", (unsigned long long)t->id);
    }
#if defined(__x86_64__)
    ((void **)(void *)tp)[0] = tp; /* tcbhead_t.tcb */
    ((void **)(void *)tp)[2] = tp; /* tcbhead_t.self */
#endif
    /* its own thread-specific data: specific[0] -> its first block, empty */
    void **spec = (void **)(void *)(pd + L.spec_off);
    memset(pd + L.spec1_off, 0, L.spec1_size);
    spec[0] = pd + L.spec1_off;
    for (size_t i = 1; i < L.spec_count; i++)
        spec[i] = NULL;
    if (L.rseq_cpu_off)
        *(int32_t *)(void *)(tp + L.rseq_cpu_off) = -1; /* not registered: ask the system */
    t->tls = tp;
    return area;
}

bool weft__tls_make_heap(struct weft_uthread *t)
{
    char *area = aligned_alloc(L.align, L.size);
    if (!area)
        return false;
    weft__tls_make(t, area + L.size);
    return true;
}

void weft__tls_free(struct weft_uthread *t)
{
    if (t->tls) {
        free((char *)t->tls - L.tp_off);
        t->tls = NULL;
    }
}

void weft__tls_exit(struct weft_uthread *t)
{
    if (L.call_tls_dtors)
        L.call_tls_dtors(); /* C++ thread_local destructors, this uthread's */
    char *pd = (char *)t->tls + L.pd_off;
    dtv_t *dtv = *(dtv_t **)(void *)(pd + L.dtv_off); /* glibc may have grown it */
    if (!dtv)
        return;
    for (size_t i = 1; i <= dtv[-1].counter; i++)
        free(dtv[i].pointer.to_free); /* blocks of dlopen()ed modules */
    *(dtv_t **)(void *)(pd + L.dtv_off) = NULL;
    free(dtv - 1);
}

void weft__tls_vcore_start(struct weft__vcore *vc)
{
    vc->thread_tp = tp_now();
}
