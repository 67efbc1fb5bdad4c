/*
 * managed.h — the two calls the I/O shim (src/shim) needs from the
 * descriptor table (fd.c), exported from libweft for it.
 */
#ifndef WEFT_IO_MANAGED_H
#define WEFT_IO_MANAGED_H

#include "../spin.h" /* WEFT__EXPORT */

/* weft__fd_drop() forgets fd (generation bump, poller removal) and wakes
 * every waiter on it with EBADF. */
WEFT__EXPORT void weft__fd_drop(int fd);

/* weft__fd_managed() is 1 if weft made fd non-blocking and polls it (the
 * shim then routes plain calls on it through weft from any thread). */
WEFT__EXPORT int weft__fd_managed(int fd);

#endif
