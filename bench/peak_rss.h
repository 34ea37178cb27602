/* peak_rss.h — this process's peak resident memory, for a bench row's JSON (C and C++).
 * VmHWM, not getrusage's ru_maxrss: a row started by the bench driver would inherit the
 * driver's high-water mark in ru_maxrss (fork copies it and exec keeps it), while VmHWM
 * belongs to the address space exec made. */
#ifndef GPT_BENCH_PEAK_RSS_H
#define GPT_BENCH_PEAK_RSS_H

#include <stdio.h>

/* Peak resident set in MiB, or -1 where /proc/self/status cannot say. */
static inline double peak_rss_mib(void) {
    FILE *status = fopen("/proc/self/status", "r");
    if (!status) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, status))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    fclose(status);
    return kib < 0 ? -1 : (double)kib / 1024;
}

#endif
