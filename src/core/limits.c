/* limits.c - CPUs and memory this process may use (limits.h). */
#include "core/limits.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The first one or two numbers of a cgroup file into a and b: returns how
 * many were read; "max" (no limit) reads as none. */
static int read_numbers(const char *dir, const char *file, unsigned long long *a,
			unsigned long long *b)
{
	char path[4400];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char first[32];
	int n = 0;
	if (fscanf(f, "%31s", first) == 1 && strcmp(first, "max")) {
		char *end;
		long long v = strtoll(first, &end, 10);
		if (!*end && v > 0) {
			*a = (unsigned long long)v;
			n = 1 + (fscanf(f, "%llu", b) == 1);
		}
	}
	fclose(f);
	return n;
}

/* The limit a cgroup directory sets: CPUs (rounded up) when `cpus`, else
 * bytes of memory; 0 if none. v2 when `v2`, else v1. */
static uint64_t dir_limit(const char *dir, int v2, int cpus)
{
	unsigned long long a = 0, b = 0;
	if (cpus && v2)
		return read_numbers(dir, "cpu.max", &a, &b) == 2 && b ? (a + b - 1) / b : 0;
	if (cpus) {
		unsigned long long period = 0, unused;
		if (read_numbers(dir, "cpu.cfs_quota_us", &a, &unused) < 1 ||
		    read_numbers(dir, "cpu.cfs_period_us", &period, &unused) < 1 || !period)
			return 0;
		return (a + period - 1) / period;
	}
	return read_numbers(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &a, &b) >= 1 ? a : 0;
}

/* The smallest limit (dir_limit) of the process's cgroups, 0 if none. For
 * v2 the cgroup and its ancestors up to the top level (the root sets none;
 * in a cgroup namespace the process's own cgroup is "/" there); for v1 the
 * hierarchy holding `controller`, at /sys/fs/cgroup/<its controllers>. */
static uint64_t cgroup_limit(const char *controller, int cpus)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return 0;
	char line[4096], want[64];
	snprintf(want, sizeof want, ",%s,", controller);
	uint64_t best = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1, *cg = c2 + 1;
		char dir[4200];
		uint64_t q = 0;
		if (!strcmp(line, "0") && !*ctl) { /* v2 */
			char rel[4096];
			snprintf(rel, sizeof rel, "%s", cg);
			for (;;) {
				snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(rel, "/") ? rel : "");
				uint64_t v = dir_limit(dir, 1, cpus);
				if (v && (!q || v < q))
					q = v;
				char *slash = strrchr(rel, '/');
				if (!slash || slash == rel)
					break;
				*slash = '\0';
			}
		} else { /* v1 */
			char ctls[256];
			snprintf(ctls, sizeof ctls, ",%s,", ctl);
			if (!strstr(ctls, want))
				continue;
			snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s", ctl, strcmp(cg, "/") ? cg : "");
			q = dir_limit(dir, 0, cpus);
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
	uint64_t quota = cgroup_limit("cpu", 1);
	if (quota && quota < n)
		n = (unsigned)quota;
	return n ? n : 1;
}

uint64_t wc_memory_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	uint64_t cg = cgroup_limit("memory", 0);
	/* v1 reports "no limit" as a huge page-rounded number */
	if (cg && (!phys || cg < phys))
		return cg;
	return phys;
}
