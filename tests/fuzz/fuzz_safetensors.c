/* fuzz_safetensors.c - fuzz target for the safetensors parser and the packer
 * (container/safetensors.h, wc_pack_safetensors).
 *
 * The input is a safetensors file. Properties checked (abort() on a
 * violation):
 * - wc_st_parse either fails or gives what safetensors.h promises: tensors
 *   in data order, each starting where the previous ended, from 0 to the
 *   data section's end, which is the end of the file; a tensor of a dtype of
 *   known size holds prod(shape) elements;
 * - a file the parser accepts packs (tiles of 4 KiB, rANS chunks of 64
 *   symbols, so small inputs still cut into several tiles and chunks), and
 *   the packed file reads back as the input, byte for byte: the product's
 *   first promise. The packer's own verify pass runs too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container/container.h"
#include "container/safetensors.h"
#include "fuzz/fuzz_target.h"

#define FUZZ_MAX_INPUT (1u << 20)

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_safetensors: %s\n", what);
	abort();
}

static void check_header(const wc_st_header *h, size_t size)
{
	if (h->data_offset != 8 + h->header_len || h->data_offset + h->data_size != size)
		fail("data section is not the rest of the file");
	uint64_t at = 0;
	for (uint32_t i = 0; i < h->ntensors; i++) {
		const wc_st_tensor *t = &h->tensors[i];
		if (t->begin != at || t->end < t->begin)
			fail("tensors not contiguous in data order");
		unsigned es = wc_st_dtype_size(t->dtype);
		if (es) {
			uint64_t n = 1;
			for (uint32_t d = 0; d < t->ndim; d++)
				n *= t->shape[d]; /* the parser refuses overflowing shapes */
			if (n * es != t->end - t->begin)
				fail("byte count is not prod(shape) * element size");
		}
		at = t->end;
	}
	if (at != h->data_size)
		fail("tensors do not end where the data section does");
}

static const char *workdir(void)
{
	static char dir[64];
	if (!dir[0]) {
		snprintf(dir, sizeof dir, "%s/fuzz-st.XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(dir))
			fail("mkdtemp");
	}
	return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	wc_st_header *h = NULL;
	if (wc_st_parse(data, size, size, &h) != WC_OK) {
		if (getenv("FUZZ_VERBOSE"))
			fprintf(stderr, "fuzz_safetensors: parse: %s\n", wc_last_detail());
		return 0;
	}
	check_header(h, size);
	wc_st_free(h);

	char in[128], out[128];
	snprintf(in, sizeof in, "%s/in.safetensors", workdir());
	snprintf(out, sizeof out, "%s/out.wcodec", workdir());
	FILE *f = fopen(in, "wb");
	if (!f || fwrite(data, 1, size, f) != size || fclose(f))
		fail("cannot write the input");
	wc_pack_opts o = {.tile_size = 4096, .chunk_symbols = 64, .threads = 1, .verify = 1};
	if (wc_pack_safetensors(in, out, &o, NULL) != WC_OK) {
		fprintf(stderr, "fuzz_safetensors: pack: %s\n", wc_last_detail());
		fail("a file the parser accepts did not pack");
	}
	wc_container *c;
	if (wc_container_open(out, &c) != WC_OK)
		fail("the packed file does not open");
	uint8_t *back = malloc(size + 1);
	if (!back || wc_container_virtual_size(c) != size || wc_container_pread(c, back, size, 0) != WC_OK ||
	    memcmp(back, data, size))
		fail("the packed file does not read back as the input");
	free(back);
	wc_container_release(c);
	unlink(out);
	unlink(in);
	return 0;
}
