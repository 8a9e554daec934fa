/*
 * limits.h - how much of the machine this process may use: CPUs for default
 * thread counts, memory for default cache budgets. Both follow what a
 * container or a job scheduler grants, not only what the machine has: the
 * affinity mask (sched_getaffinity(2): taskset, cpusets) and the cgroup
 * limits of the process (cgroup v2 cpu.max and memory.max of its cgroup and
 * its ancestors; v1 cpu.cfs_quota_us / cpu.cfs_period_us and
 * memory.limit_in_bytes), read from /proc/self/cgroup and /sys/fs/cgroup.
 */
#ifndef WC_LIMITS_H
#define WC_LIMITS_H

#include <stdint.h>

/* CPUs this process may keep busy: the CPUs of its affinity mask, lowered
 * to a cgroup CPU quota rounded up (a container started with --cpus=2 on a
 * 64-core host gets 2). Falls back to the online CPUs (sysconf) where the
 * mask cannot be read. At least 1. */
unsigned wc_cpu_count(void);

/* Bytes of memory this process may use: the physical memory (sysconf),
 * lowered to the smallest cgroup memory limit of the process; 0 if unknown. */
uint64_t wc_memory_limit(void);

#endif /* WC_LIMITS_H */
