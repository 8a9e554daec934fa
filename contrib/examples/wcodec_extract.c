/*
 * wcodec_extract.c - an example of libwcodec's public API for programs that
 * read .wcodec files themselves instead of through the mount: write one
 * tensor's bytes, or the whole original safetensors file, to stdout.
 *
 *   cc wcodec_extract.c $(pkg-config --cflags --libs wcodec) -o wcodec_extract
 *   ./wcodec_extract model.wcodec                 > model.safetensors
 *   ./wcodec_extract model.wcodec layer.0.weight  > weight.bin
 *   ./wcodec_extract -l model.wcodec              # name, dtype, shape, bytes
 *
 * It decodes on the calling thread through wc_container_pread() (no cache,
 * no thread pool): the simplest correct reader. Every tile's payload and
 * decoded bytes are checked against their XXH3-64 (docs/FORMAT.md), so a
 * damaged file is an error, never wrong bytes. The wcodecfs mount and
 * `wcodec unpack` use the same library with a cache and all cores; a loader
 * that wants tensors in GPU memory calls wcodec_cuda_decode_tensor()
 * (wcodec_cuda.h, the CUDA plugin).
 *
 * Exit status: 0, or 1 with the library's reason on stderr.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container/container.h"
#include "core/wc_error.h"

/* Copy virtual bytes [begin, end) of c to out, 1 MiB at a time. */
static wc_err copy_range(const wc_container *c, uint64_t begin, uint64_t end, FILE *out)
{
	const size_t step = 1u << 20;
	uint8_t *buf = malloc(step);
	if (!buf)
		return wc_fail(WC_E_NOMEM, "a buffer of %zu bytes", step);
	wc_err e = WC_OK;
	for (uint64_t off = begin; off < end && e == WC_OK; off += step) {
		size_t n = end - off < step ? (size_t)(end - off) : step;
		e = wc_container_pread(c, buf, n, off);
		if (e == WC_OK && fwrite(buf, 1, n, out) != n)
			e = wc_fail(WC_E_IO, "writing to stdout failed");
	}
	free(buf);
	return e;
}

static void list_tensors(const wc_container *c)
{
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *t = wc_container_tensor(c, i);
		printf("%s\t%s\t[", t->name, t->dtype);
		for (uint32_t d = 0; d < t->ndim; d++)
			printf("%s%" PRIu64, d ? ", " : "", t->shape[d]);
		printf("]\t%" PRIu64 "\n", t->end - t->begin);
	}
}

int main(int argc, char **argv)
{
	int list = argc > 1 && !strcmp(argv[1], "-l");
	if (argc - list < 2 || argc - list > 3) {
		fprintf(stderr, "usage: %s FILE.wcodec [TENSOR] > OUT\n"
				"       %s -l FILE.wcodec\n", argv[0], argv[0]);
		return 2;
	}
	const char *path = argv[1 + list], *name = argc - list == 3 ? argv[2 + list] : NULL;
	wc_container *c;
	wc_err e = wc_container_open(path, &c);
	if (e == WC_OK) {
		if (list) {
			list_tensors(c);
		} else if (name) {
			uint32_t i;
			e = wc_container_find_tensor(c, name, &i);
			if (e == WC_OK) {
				const wc_tensor_info *t = wc_container_tensor(c, i);
				e = copy_range(c, t->begin, t->end, stdout);
			} else {
				e = wc_fail(e, "no tensor named \"%s\"", name);
			}
		} else {
			e = copy_range(c, 0, wc_container_virtual_size(c), stdout);
		}
		wc_container_release(c);
	}
	if (e == WC_OK && fflush(stdout) != 0)
		e = wc_fail(WC_E_IO, "writing to stdout failed");
	if (e != WC_OK) {
		const char *why = wc_last_detail();
		fprintf(stderr, "wcodec_extract: %s: %s%s%s\n", path, wc_strerror(e), *why ? ": " : "", why);
		return 1;
	}
	return 0;
}
