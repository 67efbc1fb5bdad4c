/*
 * board.c — the cross-process priority board (<weft/board.h>).
 *
 * The segment, /dev/shm/weft-board.<name>, holds WEFT_BOARD_PROCS slots
 * (one per attached process: its pid, 0 = free) and, for every CPU, one
 * 64-bit word per slot: bit (level + 32) of the most urgent level that
 * process has ready on that CPU, 0 for none. Words are laid out CPU by CPU,
 * so a reader looks at one CPU's row: two cache lines. Only the slot's
 * process writes its words (relaxed stores, only when the value changes);
 * a pid is claimed and freed with a CAS. The creator sizes the segment
 * (zero-filled by the kernel: every slot free) and then stores the magic;
 * others wait for it.
 *
 * Beside each word, the slot's recent peak on that CPU (peak[cpu][slot]):
 * the most urgent level it published there and when (CLOCK_MONOTONIC
 * milliseconds << 8 | level + 33, 0 for none), kept until a more urgent one
 * or WEFT_BOARD_RECENT_MS have passed; weft_board_recent() reads it.
 *
 * When a process's word for a CPU becomes more urgent, it also tells the
 * other processes that have less urgent work ready there: the notification
 * signal (each slot records its number and, per CPU, its vcore's thread)
 * to that vcore. It is delivered as soon as that vcore next gets the CPU,
 * before it runs another instruction of its uthread, and makes it
 * reconsider (WEFT__EV_RESCHED): it cedes at once instead of at its next
 * tick.
 *
 * The mapping is never unmapped while the process lives: a scheduler may be
 * reading it when another thread detaches (detach only clears the slot).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define BOARD_MAGIC 0x7261626f74666577ull /* "weftboar" */
#define BOARD_VERSION 3u
#define BOARD_CPUS CPU_SETSIZE
#define LIVENESS_NS 100000000ull          /* a suspect slot's pid is checked this often */

struct board_seg {
    _Atomic uint64_t magic;              /* BOARD_MAGIC once the creator has set it up */
    uint32_t version, procs, cpus;       /* written before magic */
    _Alignas(64) _Atomic int32_t pid[WEFT_BOARD_PROCS]; /* slot owners; 0 = free */
    _Atomic int32_t sig[WEFT_BOARD_PROCS]; /* their notification signals */
    _Alignas(64) _Atomic uint64_t word[BOARD_CPUS][WEFT_BOARD_PROCS]; /* [cpu][slot] */
    _Atomic int32_t tid[BOARD_CPUS][WEFT_BOARD_PROCS]; /* the slot's vcore thread on the CPU */
    _Atomic uint64_t peak[BOARD_CPUS][WEFT_BOARD_PROCS]; /* recent peak (see the top) */
};

static pthread_mutex_t board_lock = PTHREAD_MUTEX_INITIALIZER; /* attach/detach */
static struct board_seg *_Atomic seg;   /* the attached board, or NULL; mappings are kept */
static int my_slot;                      /* our slot in seg; written before seg */
static _Atomic uint64_t checked_at[WEFT_BOARD_PROCS]; /* last liveness check per slot */

/* board_path() writes "/weft-board.<name>" into buf; 0 or EINVAL/ENAMETOOLONG. */
static int board_path(const char *name, char *buf, size_t cap)
{
    if (!name || !*name)
        return EINVAL;
    size_t n = strlen(name);
    if (n > WEFT_BOARD_NAME_MAX)
        return ENAMETOOLONG;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return EINVAL;
    }
    snprintf(buf, cap, "/weft-board.%s", name);
    return 0;
}

/* slot_clear() zeroes slot s's words and threads. */
static void slot_clear(struct board_seg *b, int s)
{
    for (int c = 0; c < BOARD_CPUS; c++) {
        if (atomic_load_explicit(&b->word[c][s], memory_order_relaxed))
            atomic_store_explicit(&b->word[c][s], 0, memory_order_relaxed);
        if (atomic_load_explicit(&b->tid[c][s], memory_order_relaxed))
            atomic_store_explicit(&b->tid[c][s], 0, memory_order_relaxed);
        if (atomic_load_explicit(&b->peak[c][s], memory_order_relaxed))
            atomic_store_explicit(&b->peak[c][s], 0, memory_order_relaxed);
    }
}

/* pid_gone(): pid has exited (kill says ESRCH; EPERM means it lives). */
static bool pid_gone(int32_t pid)
{
    int saved = errno;
    bool gone = kill(pid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return gone;
}

/* map_board() opens (or creates) the segment and maps it; NULL with *err. */
static struct board_seg *map_board(const char *path, int *err)
{
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool creator = fd >= 0;
    if (!creator && errno == EEXIST)
        fd = shm_open(path, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    if (creator && ftruncate(fd, sizeof(struct board_seg)) != 0) {
        *err = errno;
        close(fd);
        shm_unlink(path);
        return NULL;
    }
    /* Another process may be creating it: wait (at most a second) for its
     * size and magic. */
    struct stat st;
    for (int i = 0; !creator; i++) {
        if (fstat(fd, &st) != 0) {
            *err = errno;
            close(fd);
            return NULL;
        }
        if ((size_t)st.st_size >= sizeof(struct board_seg))
            break;
        if (i == 1000) {
            *err = EPROTO;
            close(fd);
            return NULL;
        }
        usleep(1000);
    }
    struct board_seg *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (b == MAP_FAILED) {
        *err = e;
        return NULL;
    }
    if (creator) {
        b->version = BOARD_VERSION;
        b->procs = WEFT_BOARD_PROCS;
        b->cpus = BOARD_CPUS;
        atomic_store_explicit(&b->magic, BOARD_MAGIC, memory_order_release);
    }
    for (int i = 0; atomic_load_explicit(&b->magic, memory_order_acquire) != BOARD_MAGIC; i++) {
        if (i == 1000) {
            *err = EPROTO;
            munmap(b, sizeof *b);
            return NULL;
        }
        usleep(1000);
    }
    if (b->version != BOARD_VERSION || b->procs != WEFT_BOARD_PROCS || b->cpus != BOARD_CPUS) {
        *err = EPROTO; /* another weft's layout */
        munmap(b, sizeof *b);
        return NULL;
    }
    return b;
}

/* claim_slot() takes a free slot, or one whose process is gone; -1 if full. */
static int claim_slot(struct board_seg *b)
{
    int32_t me = (int32_t)getpid();
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < WEFT_BOARD_PROCS; s++) {
            int32_t p = atomic_load_explicit(&b->pid[s], memory_order_seq_cst);
            if (p == 0 || (pass == 1 && p != me && pid_gone(p))) {
                if (atomic_compare_exchange_strong_explicit(&b->pid[s], &p, me, memory_order_seq_cst, memory_order_seq_cst)) {
                    slot_clear(b, s); /* a dead owner's words */
                    return s;
                }
            }
        }
    return -1;
}

/* attach_locked() is weft_board_attach() under board_lock. */
static int attach_locked(const char *name)
{
    char path[WEFT_BOARD_NAME_MAX + 16];
    int r = board_path(name, path, sizeof path);
    if (r)
        return r;
    if (atomic_load_explicit(&seg, memory_order_seq_cst))
        return EBUSY;
    struct board_seg *b = map_board(path, &r);
    if (!b)
        return r;
    int s = claim_slot(b);
    if (s < 0) {
        munmap(b, sizeof *b);
        return ENOSPC;
    }
    my_slot = s;
    atomic_store_explicit(&b->sig[s], weft__notif_signo(), memory_order_seq_cst);
    for (int i = 0; i < WEFT_BOARD_PROCS; i++)
        atomic_store_explicit(&checked_at[i], 0, memory_order_relaxed);
    atomic_store_explicit(&seg, b, memory_order_release);
    return 0;
}

/* tell_vcores(): a scheduler that follows the board re-reads
 * weft_board_attached() when poked. */
static void tell_vcores(void)
{
    int n = weft__vc_at_entry() || weft_num_vcores() ? weft__rt.nvcores : 0;
    for (int i = 0; i < n; i++)
        weft_vcore_poke(i);
}

int weft_board_attach(const char *name)
{
    pthread_mutex_lock(&board_lock);
    int r = attach_locked(name);
    pthread_mutex_unlock(&board_lock);
    if (!r)
        tell_vcores();
    return r;
}

void weft__board_attach_env(void)
{
    const char *name = weft__cfg_str(WEFT__CFG_BOARD);
    if (!name || weft_board_attached())
        return;
    pthread_mutex_lock(&board_lock);
    int r = attach_locked(name);
    pthread_mutex_unlock(&board_lock);
    if (r)
        fprintf(stderr, "weft: WEFT_BOARD=%s: %s; running without the board\n", name, strerror(r));
}

int weft_board_detach(void)
{
    pthread_mutex_lock(&board_lock);
    struct board_seg *b = atomic_load_explicit(&seg, memory_order_seq_cst);
    if (b) {
        atomic_store_explicit(&seg, NULL, memory_order_release);
        slot_clear(b, my_slot);
        atomic_store_explicit(&b->pid[my_slot], 0, memory_order_seq_cst);
    }
    pthread_mutex_unlock(&board_lock);
    if (b)
        tell_vcores();
    return b ? 0 : EINVAL;
}

int weft_board_remove(const char *name)
{
    char path[WEFT_BOARD_NAME_MAX + 16];
    int r = board_path(name, path, sizeof path);
    if (r)
        return r;
    int saved = errno;
    r = shm_unlink(path) == 0 ? 0 : errno;
    errno = saved;
    return r;
}

int weft_board_attached(void)
{
    return atomic_load_explicit(&seg, memory_order_acquire) != NULL;
}

void weft__board_forked(void)
{
    /* The slot is the parent's: the child was never attached. */
    atomic_store_explicit(&seg, NULL, memory_order_relaxed);
    pthread_mutex_init(&board_lock, NULL);
}

static int cpu_of(int vcore)
{
    if (vcore < 0 || vcore >= weft__rt.nvcores)
        return -1;
    int c = weft__rt.vcores[vcore].cpu;
    return c >= 0 && c < BOARD_CPUS ? c : -1;
}

void weft_board_publish(int vcore, int level)
{
    struct board_seg *b = atomic_load_explicit(&seg, memory_order_acquire);
    int c = cpu_of(vcore);
    if (!b || c < 0)
        return;
    uint64_t w = level >= WEFT_PRIO_MIN && level <= WEFT_PRIO_MAX ? 1ull << (level + 32) : 0;
    uint64_t old = atomic_load_explicit(&b->word[c][my_slot], memory_order_relaxed);
    if (old == w)
        return;
    int32_t tid = atomic_load_explicit(&weft__rt.vcores[vcore].tid, memory_order_relaxed);
    if (atomic_load_explicit(&b->tid[c][my_slot], memory_order_relaxed) != tid)
        atomic_store_explicit(&b->tid[c][my_slot], tid, memory_order_relaxed);
    atomic_store_explicit(&b->word[c][my_slot], w, memory_order_relaxed);
    if (w) { /* the recent peak: this level, unless a more urgent one is recent */
        uint64_t now_ms = weft__now_ns() / 1000000u;
        uint64_t pk = atomic_load_explicit(&b->peak[c][my_slot], memory_order_relaxed);
        if (!pk || (uint64_t)(level + 33) >= (pk & 255) || now_ms - (pk >> 8) > WEFT_BOARD_RECENT_MS)
            atomic_store_explicit(&b->peak[c][my_slot], now_ms << 8 | (uint64_t)(level + 33),
                                  memory_order_relaxed);
    }
    if (w <= old)
        return;
    /* More urgent now: tell the processes with less urgent work ready on
     * this CPU (see the top of this file). */
    int saved = errno;
    for (int s = 0; s < WEFT_BOARD_PROCS; s++) {
        uint64_t o = atomic_load_explicit(&b->word[c][s], memory_order_relaxed);
        int32_t p = atomic_load_explicit(&b->pid[s], memory_order_relaxed);
        int32_t t = atomic_load_explicit(&b->tid[c][s], memory_order_relaxed);
        int sig = atomic_load_explicit(&b->sig[s], memory_order_relaxed);
        if (s != my_slot && o && o < w && p > 0 && t > 0 && sig > 0)
            syscall(SYS_tgkill, p, t, sig);
    }
    errno = saved;
}

int weft_board_foreign(int vcore)
{
    struct board_seg *b = atomic_load_explicit(&seg, memory_order_acquire);
    int c = cpu_of(vcore);
    if (!b || c < 0)
        return WEFT_BOARD_NONE;
    for (;;) {
        uint64_t acc = 0;
        int top_slot = -1, top = -1;
        for (int s = 0; s < WEFT_BOARD_PROCS; s++) {
            uint64_t w = atomic_load_explicit(&b->word[c][s], memory_order_relaxed);
            if (s == my_slot || !w)
                continue;
            acc |= w;
            int t = 63 - __builtin_clzll(w);
            if (t > top) {
                top = t;
                top_slot = s;
            }
        }
        if (!acc)
            return WEFT_BOARD_NONE;
        /* Before anyone cedes to it: is that process still there? */
        uint64_t now = weft__now_ns();
        uint64_t last = atomic_load_explicit(&checked_at[top_slot], memory_order_relaxed);
        if (now - last < LIVENESS_NS)
            return top - 32;
        atomic_store_explicit(&checked_at[top_slot], now, memory_order_relaxed);
        int32_t p = atomic_load_explicit(&b->pid[top_slot], memory_order_seq_cst);
        if (p == 0 || !pid_gone(p))
            return top - 32; /* alive (or a slot changing hands: looked at again later) */
        if (atomic_compare_exchange_strong_explicit(&b->pid[top_slot], &p, 0, memory_order_seq_cst, memory_order_seq_cst))
            slot_clear(b, top_slot); /* its process died attached */
    }
}

int weft_board_recent(int vcore)
{
    struct board_seg *b = atomic_load_explicit(&seg, memory_order_acquire);
    int c = cpu_of(vcore);
    if (!b || c < 0)
        return WEFT_BOARD_NONE;
    uint64_t now_ms = 0;
    int top = 0; /* level + 33 */
    for (int s = 0; s < WEFT_BOARD_PROCS; s++) {
        if (s == my_slot)
            continue;
        uint64_t w = atomic_load_explicit(&b->word[c][s], memory_order_relaxed);
        if (w && 63 - __builtin_clzll(w) + 1 > top) /* ready now */
            top = 63 - __builtin_clzll(w) + 1;
        uint64_t pk = atomic_load_explicit(&b->peak[c][s], memory_order_relaxed);
        if (!pk || (int)(pk & 255) <= top)
            continue;
        if (!now_ms)
            now_ms = weft__now_ns() / 1000000u;
        if ((int64_t)(now_ms - (pk >> 8)) <= WEFT_BOARD_RECENT_MS) /* written just now: recent */
            top = (int)(pk & 255);
    }
    return top ? top - 33 : WEFT_BOARD_NONE;
}
