/*
 * randread.c - random-read latency benchmark with byte-exact verification.
 *
 * Usage: randread [-n COUNT] [-b BYTES] [-t THREADS] [-s SEED] [-u] FILE [REFERENCE]
 *
 * Issues COUNT preads of BYTES (default 1000 x 4096) at uniformly random
 * offsets of FILE, aligned to BYTES unless -u, spread over THREADS threads
 * (default 1), each read timed with CLOCK_MONOTONIC. If REFERENCE is given
 * (the same bytes from somewhere else, e.g. the original safetensors file),
 * every byte of every read is compared with it (the compare is not timed),
 * and FILE and REFERENCE must have the same size.
 *
 * Prints one line of key=value pairs (latencies in microseconds, percentiles
 * by nearest rank over all reads):
 *   reads=1000 bytes=4096 threads=1 p50_us=.. p99_us=.. max_us=.. mean_us=.. mismatches=0
 * Exit status: 0 all reads complete and equal, 1 a short read, an I/O error
 * or a mismatch (the first is described on stderr), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct job {
	int fd, ref_fd;
	uint64_t file_size;
	size_t block;
	int unaligned;
	uint64_t seed;
	size_t count;       /* reads this thread does */
	uint64_t *lat_ns;   /* count entries */
	uint64_t mismatches;
	int failed;         /* I/O error or short read */
};

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

/* splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): small, seedable, good enough for offsets. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* pread until len bytes or EOF/error; returns bytes read or -1. */
static ssize_t pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void *run_job(void *arg)
{
	struct job *j = arg;
	uint8_t *buf = malloc(j->block), *ref = malloc(j->block);
	if (!buf || !ref) {
		fprintf(stderr, "randread: out of memory\n");
		j->failed = 1;
		goto out;
	}
	uint64_t span = j->file_size - j->block + 1; /* valid start offsets */
	for (size_t i = 0; i < j->count; i++) {
		uint64_t off;
		if (j->unaligned)
			off = splitmix64(&j->seed) % span;
		else
			off = (splitmix64(&j->seed) % (j->file_size / j->block)) * j->block;
		uint64_t t0 = now_ns();
		ssize_t n = pread(j->fd, buf, j->block, (off_t)off);
		uint64_t t1 = now_ns();
		j->lat_ns[i] = t1 - t0;
		if (n < 0) {
			pthread_mutex_lock(&report_lock);
			fprintf(stderr, "randread: pread at %" PRIu64 ": %s\n", off, strerror(errno));
			pthread_mutex_unlock(&report_lock);
			j->failed = 1;
			break;
		}
		if ((size_t)n != j->block) {
			/* A regular file answers a whole in-range pread at once. */
			pthread_mutex_lock(&report_lock);
			fprintf(stderr, "randread: short read at %" PRIu64 ": %zd of %zu bytes\n", off, n,
				j->block);
			pthread_mutex_unlock(&report_lock);
			j->failed = 1;
			break;
		}
		if (j->ref_fd >= 0) {
			if (pread_full(j->ref_fd, ref, j->block, off) != (ssize_t)j->block) {
				pthread_mutex_lock(&report_lock);
				fprintf(stderr, "randread: reference read at %" PRIu64 " failed\n", off);
				pthread_mutex_unlock(&report_lock);
				j->failed = 1;
				break;
			}
			if (memcmp(buf, ref, j->block) != 0) {
				size_t k = 0;
				while (buf[k] == ref[k])
					k++;
				pthread_mutex_lock(&report_lock);
				if (j->mismatches == 0)
					fprintf(stderr,
						"randread: mismatch at byte %" PRIu64 ": got 0x%02x, want 0x%02x\n",
						off + k, buf[k], ref[k]);
				pthread_mutex_unlock(&report_lock);
				j->mismatches++;
			}
		}
	}
out:
	free(buf);
	free(ref);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile p (0..100] of n sorted values. */
static uint64_t percentile(const uint64_t *v, size_t n, double p)
{
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static void usage(FILE *f)
{
	fprintf(f, "usage: randread [-n COUNT] [-b BYTES] [-t THREADS] [-s SEED] [-u] FILE [REFERENCE]\n"
		   "  -n COUNT    reads in all (default 1000)\n"
		   "  -b BYTES    bytes per read (default 4096)\n"
		   "  -t THREADS  concurrent readers (default 1)\n"
		   "  -s SEED     random seed (default 1)\n"
		   "  -u          offsets not aligned to BYTES\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*v = x;
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t count = 1000, block = 4096, threads = 1, seed = 1;
	int unaligned = 0, c;
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	while ((c = getopt_long(argc, argv, "n:b:t:s:uh", longopts, NULL)) != -1) {
		uint64_t *dst = NULL;
		switch (c) {
		case 'n': dst = &count; break;
		case 'b': dst = &block; break;
		case 't': dst = &threads; break;
		case 's': dst = &seed; break;
		case 'u': unaligned = 1; continue;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (parse_u64(optarg, dst) != 0) {
			fprintf(stderr, "randread: -%c needs a non-negative integer, got '%s'\n", c, optarg);
			return 2;
		}
	}
	if (argc - optind < 1 || argc - optind > 2 || count == 0 || block == 0 || block > (64u << 20) ||
	    threads == 0 || threads > 256) {
		usage(stderr);
		return 2;
	}
	const char *path = argv[optind], *ref_path = argc - optind == 2 ? argv[optind + 1] : NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ref_fd = -1;
	if (fd < 0) {
		fprintf(stderr, "randread: %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct stat st, rst;
	if (fstat(fd, &st) != 0) {
		fprintf(stderr, "randread: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if ((uint64_t)st.st_size < block) {
		fprintf(stderr, "randread: %s: %lld bytes, smaller than one read of %" PRIu64 "\n", path,
			(long long)st.st_size, block);
		return 1;
	}
	if (ref_path) {
		ref_fd = open(ref_path, O_RDONLY | O_CLOEXEC);
		if (ref_fd < 0 || fstat(ref_fd, &rst) != 0) {
			fprintf(stderr, "randread: %s: %s\n", ref_path, strerror(errno));
			return 1;
		}
		if (rst.st_size != st.st_size) {
			fprintf(stderr, "randread: %s is %lld bytes but %s is %lld\n", path, (long long)st.st_size,
				ref_path, (long long)rst.st_size);
			return 1;
		}
	}

	uint64_t *lat = calloc(count, sizeof *lat);
	struct job *jobs = calloc(threads, sizeof *jobs);
	pthread_t *tids = calloc(threads, sizeof *tids);
	if (!lat || !jobs || !tids) {
		fprintf(stderr, "randread: out of memory\n");
		return 1;
	}
	size_t given = 0;
	for (uint64_t t = 0; t < threads; t++) {
		struct job *j = &jobs[t];
		j->fd = fd;
		j->ref_fd = ref_fd;
		j->file_size = (uint64_t)st.st_size;
		j->block = block;
		j->unaligned = unaligned;
		j->seed = seed * 0x100000001b3ull + t;
		j->count = count / threads + (t < count % threads);
		j->lat_ns = lat + given;
		given += j->count;
		if (pthread_create(&tids[t], NULL, run_job, j) != 0) {
			fprintf(stderr, "randread: cannot start thread\n");
			return 1;
		}
	}
	uint64_t mism = 0;
	int failed = 0;
	for (uint64_t t = 0; t < threads; t++) {
		pthread_join(tids[t], NULL);
		mism += jobs[t].mismatches;
		failed |= jobs[t].failed;
	}
	if (failed) {
		fprintf(stderr, "randread: stopped on an error\n");
		return 1;
	}
	qsort(lat, count, sizeof *lat, cmp_u64);
	double sum = 0;
	for (uint64_t i = 0; i < count; i++)
		sum += (double)lat[i];
	printf("reads=%" PRIu64 " bytes=%" PRIu64 " threads=%" PRIu64 " p50_us=%.1f p99_us=%.1f max_us=%.1f "
	       "mean_us=%.1f mismatches=%" PRIu64 "%s\n",
	       count, block, threads, percentile(lat, count, 50) / 1e3, percentile(lat, count, 99) / 1e3,
	       lat[count - 1] / 1e3, sum / (double)count / 1e3, mism, ref_path ? "" : " (not verified)");
	free(lat);
	free(jobs);
	free(tids);
	close(fd);
	if (ref_fd >= 0)
		close(ref_fd);
	return mism ? 1 : 0;
}
