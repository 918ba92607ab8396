// A measuring tool, never for use: with it, a process's fdatasync and fsync of the files whose
// path ends with one of SKIP_SYNC's comma-separated suffixes (or of every file: SKIP_SYNC=all)
// return at once without syncing — what the path would do if those syncs were free
// (docs/benchmarks.md, session 18: "What the syncs cost the path"). A push acknowledged by a
// process run with it is not durable.
//
//   cc -shared -fPIC -O2 -o /tmp/skip-sync.so Benchmarks/skip-sync.c -ldl
//
// then a wrapper that loads it into the daemon only (the gateway runs as it is), for
// Benchmarks/remote-rounds.sh or TIDINGS= of Benchmarks/remote-processes.sh:
//
//   w='#!/bin/bash\n[ "$1" = daemon ] && export LD_PRELOAD=/tmp/skip-sync.so SKIP_SYNC=device.sqlite-wal\nexec %s "$@"\n'
//   printf "$w" "$PWD/.build-bench/release/tidings" > /tmp/tidings-skip-list && chmod +x /tmp/tidings-skip-list
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int skipped(int fd) {
    const char *list = getenv("SKIP_SYNC");
    if (!list || !*list) return 0;
    if (strcmp(list, "all") == 0) return 1;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    const char *suffix = list;
    while (*suffix) {
        size_t length = strcspn(suffix, ",");
        if (length > 0 && (size_t)n >= length && strncmp(path + n - length, suffix, length) == 0) return 1;
        suffix += length + (suffix[length] == ',');
    }
    return 0;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return skipped(fd) ? 0 : real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return skipped(fd) ? 0 : real(fd);
}
