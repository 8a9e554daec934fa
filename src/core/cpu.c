/* cpu.c - run-time CPU feature detection and usable CPU count (cpu.h). */
#include "core/cpu.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned wc_cpu_features(void)
{
	/* bit 31 marks "known"; racing first calls store the same value */
	static unsigned known;
	unsigned v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (!v) {
		v = 1u << 31;
#if defined(__x86_64__) && defined(__GNUC__)
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"))
			v |= WC_CPU_AVX2;
		if (__builtin_cpu_supports("avx512f"))
			v |= WC_CPU_AVX512F;
#endif
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v & ~(1u << 31);
}

/* CPUs of the affinity mask, 0 if unknown. */
static unsigned affinity_cpus(void)
{
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	size_t n = conf > CPU_SETSIZE ? (size_t)conf : CPU_SETSIZE;
	cpu_set_t *set = CPU_ALLOC(n);
	if (!set)
		return 0;
	size_t bytes = CPU_ALLOC_SIZE(n);
	unsigned count = 0;
	if (sched_getaffinity(0, bytes, set) == 0)
		count = (unsigned)CPU_COUNT_S(bytes, set);
	CPU_FREE(set);
	return count;
}

/* ceil(quota / period) of a cgroup v2 cpu.max file ("max 100000" or
 * "200000 100000"), 0 if none or unreadable. */
static unsigned cpu_max_quota(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char quota[32];
	unsigned long long period = 0;
	unsigned cpus = 0;
	if (fscanf(f, "%31s %llu", quota, &period) == 2 && period > 0 && strcmp(quota, "max")) {
		unsigned long long q = strtoull(quota, NULL, 10);
		if (q > 0)
			cpus = (unsigned)((q + period - 1) / period);
	}
	fclose(f);
	return cpus;
}

/* The same from cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us in dir. */
static unsigned cfs_quota(const char *dir)
{
	char path[4300]; /* dir is at most 4200 bytes (cgroup_cpus) */
	long long quota = -1, period = 0;
	snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%lld", &quota) != 1)
		quota = -1;
	fclose(f);
	snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
	if (!(f = fopen(path, "re")))
		return 0;
	if (fscanf(f, "%lld", &period) != 1)
		period = 0;
	fclose(f);
	return quota > 0 && period > 0 ? (unsigned)((quota + period - 1) / period) : 0;
}

/* The smallest CPU quota of the process's cgroup (and, for v2, its
 * ancestors up to the top level: the root has no cpu.max), 0 if none:
 * /proc/self/cgroup names the cgroup, assumed mounted at /sys/fs/cgroup
 * (v2; in a cgroup namespace the process's own cgroup is "/" there) or
 * /sys/fs/cgroup/<controllers> (v1). */
static unsigned cgroup_cpus(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return 0;
	char line[4096];
	unsigned best = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1, *cg = c2 + 1;
		char path[4200];
		unsigned q = 0;
		if (!strcmp(line, "0") && !*ctl) { /* v2: the cgroup and its ancestors */
			char dir[4096];
			snprintf(dir, sizeof dir, "%s", cg);
			for (;;) {
				snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max",
					 strcmp(dir, "/") ? dir : "");
				unsigned v = cpu_max_quota(path);
				if (v && (!q || v < q))
					q = v;
				char *slash = strrchr(dir, '/');
				if (!slash || slash == dir)
					break;
				*slash = '\0';
			}
		} else { /* v1: a hierarchy holding the cpu controller */
			char ctls[256];
			snprintf(ctls, sizeof ctls, ",%s,", ctl);
			if (!strstr(ctls, ",cpu,"))
				continue;
			snprintf(path, sizeof path, "/sys/fs/cgroup/%s%s", ctl, strcmp(cg, "/") ? cg : "");
			q = cfs_quota(path);
		}
		if (q && (!best || q < best))
			best = q;
	}
	fclose(f);
	return best;
}

unsigned wc_cpu_count(void)
{
	unsigned n = affinity_cpus();
	if (!n) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		n = online > 0 ? (unsigned)online : 1;
	}
	unsigned quota = cgroup_cpus();
	if (quota && quota < n)
		n = quota;
	return n ? n : 1;
}
