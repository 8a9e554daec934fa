/*
 * cpu.h - what the CPU the process runs on can do, for the code paths that
 * pick an instruction set at run time (rANS round loops, XXH3), and how many
 * CPUs it may use, for default thread counts.
 */
#ifndef WC_CPU_H
#define WC_CPU_H

enum {
	WC_CPU_AVX2 = 1u << 0,    /* AVX2 (with POPCNT, which every AVX2 CPU has) */
	WC_CPU_AVX512F = 1u << 1, /* AVX-512 Foundation */
};

/* The WC_CPU_* bits this CPU supports, from CPUID (checked once; cheap
 * after). 0 on non-x86 builds. Thread-safe. */
unsigned wc_cpu_features(void);

/* CPUs this process may keep busy, for default thread counts: the CPUs of
 * its affinity mask (sched_getaffinity(2): taskset, cpusets), lowered to a
 * cgroup's CPU quota rounded up (cgroup v2 cpu.max of the process's cgroup
 * and its ancestors, or v1 cpu.cfs_quota_us / cpu.cfs_period_us: a
 * container started with --cpus=2 on a 64-core host gets 2). Falls back to
 * the online CPUs (sysconf) where those cannot be read. At least 1. */
unsigned wc_cpu_count(void);

#endif /* WC_CPU_H */
