/* fuzz_target.h - the one entry point every fuzz target defines, in
 * libFuzzer's convention (https://llvm.org/docs/LibFuzzer.html): called once
 * per input, returns 0, and abort()s when the code under test breaks one of
 * the target's stated properties. Built two ways: with clang's
 * -fsanitize=fuzzer by contrib/fuzz.sh, and with fuzz_main.c (any compiler)
 * as the programs tests/fuzz_corpus.sh runs in make check. Also a helper
 * the file readers' targets share. */
#ifndef WC_FUZZ_TARGET_H
#define WC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The n bytes at d as a file in memory (memfd): returns its descriptor (the
 * caller closes it) and its path, "/proc/self/fd/N", in path; abort()s if
 * the file cannot be made, which is no finding of the target's. */
static inline int fuzz_memfd(const uint8_t *d, size_t n, char path[64])
{
	int fd = memfd_create("fuzz-input", 0);
	if (fd < 0) {
		perror("memfd_create");
		abort();
	}
	for (size_t o = 0; o < n;) {
		ssize_t k = write(fd, d + o, n - o);
		if (k <= 0) {
			perror("write");
			abort();
		}
		o += (size_t)k;
	}
	snprintf(path, 64, "/proc/self/fd/%d", fd);
	return fd;
}

#endif /* WC_FUZZ_TARGET_H */
