/*
 * poll_epoll.c — the epoll poller (the default).
 *
 * One epoll instance for the process. A descriptor is added once, edge-
 * triggered, for input, output, hang-up and errors; its event data carries
 * (generation << 32 | fd) so events for a descriptor closed since are
 * dropped. An eventfd, level-triggered, interrupts a blocked epoll_pwait2;
 * only a blocking caller drains it.
 * Several vcores may call wait() at once (epoll allows it; each event goes
 * to one of them); only the duty vcore ever blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "poller.h"

#define WAKE_TAG UINT64_MAX
#define BATCH 128

static int epfd = -1, evfd = -1;
static _Atomic bool have_pwait2 = true; /* epoll_pwait2: ns timeouts */

static int init_epoll(void)
{
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return errno;
    evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (evfd < 0) {
        int e = errno;
        syscall(SYS_close, epfd);
        epfd = -1;
        return e;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = WAKE_TAG };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &ev) < 0) {
        int e = errno;
        syscall(SYS_close, evfd);
        syscall(SYS_close, epfd);
        epfd = evfd = -1;
        return e;
    }
    return 0;
}

static int add_epoll(struct weft__fd *f)
{
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
        .data.u64 = (uint64_t)atomic_load_explicit(&f->gen, memory_order_relaxed) << 32 | (uint32_t)f->fd,
    };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, f->fd, &ev) == 0)
        return 0;
    if (errno == EEXIST) /* left by a close weft did not see: take it over */
        return epoll_ctl(epfd, EPOLL_CTL_MOD, f->fd, &ev) == 0 ? 0 : errno;
    return errno;
}

static void arm_epoll(struct weft__fd *f, int dir)
{
    (void)f;
    (void)dir; /* registered for both directions once and for all */
}

static void del_epoll(struct weft__fd *f)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, f->fd, NULL);
}

static int wait_epoll(uint64_t deadline)
{
    struct epoll_event evs[BATCH];
    struct timespec ts = { 0, 0 }, *tp = &ts;
    if (deadline == UINT64_MAX) {
        tp = NULL;
    } else if (deadline) {
        uint64_t now = weft__now_ns();
        uint64_t d = deadline > now ? deadline - now : 0;
        ts.tv_sec = (time_t)(d / 1000000000u);
        ts.tv_nsec = (long)(d % 1000000000u);
    }
    int saved = errno;
    long n = -1;
    weft__san_blocking_begin();
    if (atomic_load_explicit(&have_pwait2, memory_order_relaxed)) {
        n = syscall(SYS_epoll_pwait2, epfd, evs, BATCH, tp, NULL, (size_t)0);
        if (n < 0 && errno == ENOSYS) /* before Linux 5.11, or an emulator */
            atomic_store_explicit(&have_pwait2, false, memory_order_relaxed);
    }
    if (!atomic_load_explicit(&have_pwait2, memory_order_relaxed)) {
        /* milliseconds, rounded up so that a deadline is never missed early */
        int ms = !tp ? -1 : (int)(((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 999999u) / 1000000u);
        n = syscall(SYS_epoll_pwait, epfd, evs, BATCH, ms, NULL, (size_t)8);
    }
    weft__san_blocking_end();
    errno = saved;
    if (n <= 0)
        return 0;
    struct weft__waiter *list = NULL;
    for (long i = 0; i < n; i++) {
        uint64_t data = evs[i].data.u64;
        if (data == WAKE_TAG) {
            /* Only the blocking (duty) caller drains the eventfd: a quick
             * poll that took the wake-up meant for it would leave it asleep.
             * The eventfd is level-triggered, so the duty vcore sees it. */
            uint64_t v;
            if (deadline && syscall(SYS_read, evfd, &v, sizeof v) < 0) {
                /* EAGAIN: nothing left to drain */
            }
            continue;
        }
        uint32_t e = evs[i].events;
        unsigned ev = 0;
        if (e & (EPOLLIN | EPOLLRDHUP))
            ev |= WEFT__READY_RD;
        if (e & EPOLLOUT)
            ev |= WEFT__READY_WR;
        if (e & (EPOLLERR | EPOLLHUP))
            ev |= WEFT__READY_ERR;
        weft__fd_event((int)(uint32_t)data, (uint32_t)(data >> 32), ev, &list);
    }
    int woken = 0;
    for (struct weft__waiter *w = list; w; w = w->next)
        woken++;
    weft__waiter_wake_list(list);
    return woken;
}

static void forget_epoll(void)
{
    /* The instance and its registrations are the parent's too: only our
     * descriptors go (no EPOLL_CTL_DEL, which would remove them for it). */
    syscall(SYS_close, epfd);
    syscall(SYS_close, evfd);
    epfd = evfd = -1;
}

static void wakeup_epoll(void)
{
    uint64_t one = 1;
    int saved = errno;
    if (syscall(SYS_write, evfd, &one, sizeof one) < 0) {
        /* the counter is full: it is readable anyway */
    }
    errno = saved;
}

const struct weft__poller_ops weft__poll_epoll = {
    .name = "epoll",
    .init = init_epoll,
    .add = add_epoll,
    .arm = arm_epoll,
    .del = del_epoll,
    .wait = wait_epoll,
    .forget = forget_epoll,
    .wakeup = wakeup_epoll,
    .wakeup_signal_safe = true, /* one write(2) to the eventfd */
    .file_rw = NULL,
};
