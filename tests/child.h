/*
 * child.h — run this test program again as a child process and collect its
 * stderr and exit status (for tests whose child is expected to crash, or
 * needs a different environment).
 */
#ifndef WEFT_TESTS_CHILD_H
#define WEFT_TESTS_CHILD_H

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "check.h"

extern char **environ;

struct child_result {
    int status;          /* from waitpid */
    char err[65536];     /* its stderr, NUL-terminated (truncated if longer) */
};

/* run_child() runs /proc/self/exe with argv, the current environment plus
 * the NULL-terminated extra "NAME=value" strings (one replaces a variable
 * of the same name), and waits for it. */
static void run_child(char *const argv[], char *const extra_env[], struct child_result *res)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (extra_env && extra_env[m])
        m++;
    char **env = calloc(n + m + 1, sizeof *env);
    CHECK(env != NULL, "calloc");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < m && !replaced; j++) {
            size_t len = strcspn(extra_env[j], "=");
            replaced = strncmp(environ[i], extra_env[j], len) == 0 && environ[i][len] == '=';
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t i = 0; i < m; i++)
        env[k++] = extra_env[i];

    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env);
    CHECK(rc == 0, "posix_spawn: %s", strerror(rc));
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    free(env);

    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t room = sizeof res->err - 1 - len;
        size_t take = (size_t)got < room ? (size_t)got : room;
        memcpy(res->err + len, buf, take);
        len += take;
    }
    res->err[len] = '\0';
    close(fds[0]);
    while (waitpid(pid, &res->status, 0) < 0)
        CHECK(errno == EINTR, "waitpid: %s", strerror(errno));
}

/* describe_status() renders a waitpid status for messages. */
static const char *describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "status 0x%x", status);
    return buf;
}

#endif /* WEFT_TESTS_CHILD_H */
