/* fuzz_main.c - runs a fuzz target (fuzz_target.h) without libFuzzer: over
 * the files named on the command line (directories: every regular file in
 * them, in name order), and with -m N also over N deterministic variants of
 * each (a byte changed, a bit flipped, a run of bytes copied elsewhere, the
 * file cut short), so make check replays the committed corpus and a little
 * more on every compiler. Exit 0 when every input ran. When a target
 * abort()s, the input it was given is written to ./fuzz-crash first and its
 * origin printed (-k K runs only variant K, to reproduce it). */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_target.h"

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The input being run, for the SIGABRT handler. */
static const uint8_t *cur_data;
static size_t cur_size;
static char cur_what[4200];

static void on_abort(int sig)
{
	int fd = open("fuzz-crash", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		for (size_t o = 0; o < cur_size;) {
			ssize_t k = write(fd, cur_data + o, cur_size - o);
			if (k <= 0)
				break;
			o += (size_t)k;
		}
		close(fd);
	}
	ssize_t k = write(2, cur_what, strlen(cur_what));
	(void)k;
	signal(sig, SIG_DFL);
	raise(sig);
}

static void run_one(const uint8_t *d, size_t n, const char *path, long variant)
{
	cur_data = d;
	cur_size = n;
	if (variant < 0)
		snprintf(cur_what, sizeof cur_what, "fuzz_main: failed on %s (saved as ./fuzz-crash)\n", path);
	else
		snprintf(cur_what, sizeof cur_what,
			 "fuzz_main: failed on variant %ld of %s (saved as ./fuzz-crash; -k %ld reruns it)\n",
			 variant, path, variant);
	LLVMFuzzerTestOneInput(d, n);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	uint8_t *b = malloc(cap);
	for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;) {
		n += k;
		if (n == cap) {
			uint8_t *nb = realloc(b, cap *= 2);
			if (!nb) {
				free(b);
				b = NULL;
			}
			b = nb;
		}
	}
	fclose(f);
	*len = n;
	return b;
}

/* Variant k of an input of n bytes (n >= 1), into v (room for n bytes). */
static size_t mutate(const uint8_t *in, size_t n, uint64_t k, uint8_t *v)
{
	uint64_t s = k * 0x2545f4914f6cdd1dull + n;
	memcpy(v, in, n);
	size_t pos = rng(&s) % n;
	switch (k % 4) {
	case 0: v[pos] = (uint8_t)rng(&s); return n;
	case 1: v[pos] ^= (uint8_t)(1u << (rng(&s) % 8)); return n;
	case 2: {
		size_t from = rng(&s) % n, len = 1 + rng(&s) % 16;
		for (size_t i = 0; i < len && pos + i < n && from + i < n; i++)
			v[pos + i] = in[from + i];
		return n;
	}
	default: return pos; /* cut short */
	}
}

static int run_file(const char *path, unsigned variants, long only, unsigned long *count)
{
	size_t n = 0;
	uint8_t *b = slurp(path, &n);
	if (!b) {
		fprintf(stderr, "fuzz_main: cannot read %s\n", path);
		return 1;
	}
	if (only < 0) {
		run_one(b, n, path, -1);
		++*count;
	}
	uint8_t *v = malloc(n ? n : 1);
	for (unsigned k = 0; v && n && k < variants; k++) {
		if (only >= 0 && k != (unsigned long)only)
			continue;
		size_t m = mutate(b, n, k, v);
		run_one(v, m, path, (long)k);
		++*count;
	}
	free(v);
	free(b);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	unsigned variants = 0;
	long only = -1;
	int c;
	while ((c = getopt(argc, argv, "m:k:")) != -1) {
		if (c == 'm') {
			variants = (unsigned)strtoul(optarg, NULL, 10);
		} else if (c == 'k') {
			only = strtol(optarg, NULL, 10);
			if (variants <= (unsigned long)only)
				variants = (unsigned)only + 1;
		} else {
			fprintf(stderr, "usage: %s [-m VARIANTS] [-k VARIANT] FILE|DIR...\n", argv[0]);
			return 2;
		}
	}
	signal(SIGABRT, on_abort);
	unsigned long count = 0;
	int rc = 0;
	for (int i = optind; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			struct dirent **ents;
			int ne = scandir(argv[i], &ents, NULL, by_name);
			for (int k = 0; k < ne; k++) {
				char p[4096];
				snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
				if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
					rc |= run_file(p, variants, only, &count);
				free(ents[k]);
			}
			free(ents);
		} else {
			rc |= run_file(argv[i], variants, only, &count);
		}
	}
	printf("%s: %lu inputs\n", argv[0], count);
	return rc;
}
