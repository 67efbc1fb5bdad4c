/*
 * board.h — the cross-process priority board.
 *
 * SharedScheduler shares its priority bitmap so that other processes (and
 * its kernel) see which one holds the most urgent work. The board is weft's
 * version without kernel changes: a small shared-memory segment
 * (/dev/shm/weft-board.<name>) that processes attach to by name. Each
 * attached process publishes, for every CPU it runs a vcore on, one 64-bit
 * word: bit (level + 32) of the most urgent priority level it has ready
 * there (running or queued), 0 for none, written only when it changes. A
 * scheduler that honours the board (the prio scheduler) gives its CPU away
 * rather than run a uthread less urgent than what another attached process
 * has ready on the same CPU: its vcore sleeps in the kernel for a while
 * (weft_vcore_cede), so the kernel runs the other process's vcore, and looks
 * again when its own work gets more urgent or after a period (the
 * preemption period, or 1 ms). A ceding vcore can only step aside once it
 * runs, and a vcore that wakes with urgent work (from a timer, say) would
 * wait for the running one's kernel time slice to end (milliseconds) before
 * it can publish: so each process also keeps, per CPU, the most urgent level
 * it published in the last WEFT_BOARD_RECENT_MS, ready now or not, and a
 * vcore that runs anything less urgent than another process's recent level
 * on its CPU runs its kernel thread under SCHED_IDLE (weft_vcore_kernel_idle
 * in <weft/sched.h>): the kernel then gives the CPU to the other process's
 * vcore the moment it wakes, and to this one whatever is left (also to any
 * other thread of the system while it lasts). The kernel's scheduler still
 * decides between the processes otherwise. WEFT_BOARD=<name> attaches at
 * weft_init (a failure is reported on
 * stderr and the runtime runs without the board).
 *
 * A process that dies attached leaves its words behind: readers check the
 * pid of a slot whose words would make them cede (kill(pid, 0)) at most
 * every 100 ms and clear it when the process is gone. At most
 * WEFT_BOARD_PROCS processes share a board.
 */
#ifndef WEFT_BOARD_H
#define WEFT_BOARD_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_BOARD_NAME_MAX 32   /* bytes of a board name, without the NUL */
#define WEFT_BOARD_PROCS 16      /* processes attached to one board at most */
#define WEFT_BOARD_NONE (-64)    /* "no level": weft_board_foreign() found nothing */
#define WEFT_BOARD_RECENT_MS 1000 /* how long a published level counts as recent */

/* weft_board_attach() attaches the process to the board called name (made
 * if it does not exist; letters, digits, '-', '_' and '.', at most
 * WEFT_BOARD_NAME_MAX bytes). Returns 0, EINVAL (name NULL, empty, or with
 * another character), ENAMETOOLONG, EBUSY (already attached: detach first),
 * ENOSPC (WEFT_BOARD_PROCS processes are attached), or the error of
 * shm_open/ftruncate/mmap (EACCES, ENOMEM, ...). Any thread; not from vcore
 * context or a signal handler. */
int weft_board_attach(const char *name);

/* weft_board_detach() clears this process's words and leaves the board.
 * Returns 0, or EINVAL if not attached. */
int weft_board_detach(void);

/* weft_board_remove() deletes the board called name from /dev/shm (attached
 * processes keep their mapping). Returns 0, EINVAL/ENAMETOOLONG as for
 * attach, or ENOENT. */
int weft_board_remove(const char *name);

/* weft_board_attached() is 1 while the process is attached, else 0. */
int weft_board_attached(void);

/* For schedulers. weft_board_publish() sets the word of the CPU vcore runs
 * on to level (WEFT_PRIO_MIN..WEFT_PRIO_MAX), or clears it (WEFT_BOARD_NONE);
 * a no-op when not attached. Call it when the value changes. Vcore context
 * or a scheduler op of that vcore. */
void weft_board_publish(int vcore, int level);

/* weft_board_foreign() returns the most urgent level another attached
 * process has ready on the CPU vcore runs on, or WEFT_BOARD_NONE (also when
 * not attached). A few loads; any context. */
int weft_board_foreign(int vcore);

/* weft_board_recent() returns the most urgent level another attached
 * process has ready on the CPU vcore runs on or published there in the last
 * WEFT_BOARD_RECENT_MS milliseconds (ready now or not), or WEFT_BOARD_NONE
 * (also when not attached). A few loads and a clock read; any context. */
int weft_board_recent(int vcore);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_BOARD_H */
