// How late a thread that sleeps 1 ms at a time wakes up, over SECONDS (default 10): a count per
// lateness bucket, each wake-up 5 ms or more late on a line of its own, and the worst. Run on an
// idle machine it shows the host's own pauses of this VM; beside a benchmark round, those plus
// how long a thread that wakes up waits for a core (docs/benchmarks.md, session 18: none of
// 5 ms or more in 20 s idle, nor during daemon rounds whose p99 was 61–80 ms — the build-ups are
// not the host stopping the VM).
//
//   cc -O2 -o /tmp/hiccup Benchmarks/hiccup.c && /tmp/hiccup 20
//
// beside a daemon round (its 100,000 pushes take ≈ 5–7 s once the reference line is out):
//
//   DELIVERED_LIMIT=1000 RATE=20000 Benchmarks/remote-processes.sh 100000 0 1 > round.log 2>&1 &
//   until grep -q "round 1, reference" round.log; do sleep 0.1; done; /tmp/hiccup 6
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    if (!(seconds > 0 && seconds <= 3600)) {
        fprintf(stderr, "hiccup: SECONDS must be in (0, 3600]\n");
        return 2;
    }
    double start = now(), end = start + seconds * 1000, worst = 0;
    const double bounds[] = {1, 2, 5, 10, 20, 50, 100, 1e12};
    long sleeps = 0, late[8] = {0};
    struct timespec millisecond = {0, 1000000};
    while (now() < end) {
        double before = now();
        nanosleep(&millisecond, NULL);
        double over = now() - before - 1.0;
        sleeps++;
        if (over > worst) worst = over;
        for (int i = 0; i < 8; i++) if (over < bounds[i]) { late[i]++; break; }
        if (over >= 5) printf("  %.1f s: %.1f ms late\n", (before - start) / 1000, over);
    }
    printf("%ld sleeps; late by <1 ms %ld, 1-2 %ld, 2-5 %ld, 5-10 %ld, 10-20 %ld, 20-50 %ld, 50-100 %ld, >100 %ld; worst %.1f ms\n",
           sleeps, late[0], late[1], late[2], late[3], late[4], late[5], late[6], late[7], worst);
    return 0;
}
