/* craft_bad.c - hostile .wcodec files, made from a good one: the inputs of
 * the regression corpus (tests/data/bad, replayed by tests/bad_files.sh)
 * and of tests/mount_claim.sh.
 *
 *   craft_bad claim IN OUT NTILES  IN's one tensor of constant tiles of the
 *                                  nominal size, NTILES of them: every check
 *                                  right, a 1 TiB tensor in about 1 MB with
 *                                  64 MiB tiles and NTILES 16384
 *   craft_bad meta-bomb IN OUT     IN with metadata that decompresses to
 *                                  64 MiB (versions 1, 2: JSON of "{}," over
 *                                  and over; 3: zeros) in a few KB
 *   craft_bad ntensors IN OUT      IN's header claiming 2^20 tensors
 *   craft_bad index-past-end IN OUT  tile 0's payload placed past the end
 *   craft_bad payload IN OUT       one bit of tile 0's payload flipped
 *
 * Every output but `payload` has its header check made right again, so
 * the reader's own limits, not the checksum, must refuse it. Exit status
 * 0, or 1 with a reason. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "container/format.h"
#include "wcodec_resign.h"

static int die(const char *why)
{
	fprintf(stderr, "craft_bad: %s\n", why);
	return 1;
}

static int write_file(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0)
		return die("writing OUT");
	return 0;
}

/* IN with its metadata section replaced by `meta` (zlen bytes), the header
 * and check made right. */
static int with_metadata(const uint8_t *in, const wc_file_header *h, const uint8_t *meta, size_t zlen,
			 const char *out_path)
{
	wc_file_header o = *h;
	o.meta_len = zlen;
	o.file_size = o.meta_off + zlen;
	uint8_t *out = malloc(o.file_size);
	if (!out)
		return die("out of memory");
	memcpy(out, in, o.meta_off);
	memcpy(out + o.meta_off, meta, zlen);
	wc_header_encode(&o, out);
	tu_wcodec_fix_check(out, &o);
	int rc = write_file(out_path, out, o.file_size);
	free(out);
	return rc;
}

static int meta_bomb(const uint8_t *in, const wc_file_header *h, const char *out_path)
{
	const size_t n = 64u << 20;
	uint8_t *plain = malloc(n);
	if (!plain)
		return die("out of memory");
	if (h->version >= 3) {
		memset(plain, 0, n);
	} else {
		static const char head[] = "{\"format\":\"wcodec\",\"version\":2,\"tensors\":[";
		memcpy(plain, head, sizeof head - 1);
		size_t at = sizeof head - 1;
		while (at + 3 <= n - 3) {
			memcpy(plain + at, "{},", 3);
			at += 3;
		}
		memcpy(plain + at, "{}]", 3);
		at += 3;
		while (at < n)
			plain[at++] = '}';
	}
	size_t cap = ZSTD_compressBound(n);
	uint8_t *z = malloc(cap);
	size_t zlen = z ? ZSTD_compress(z, cap, plain, n, 19) : 0;
	free(plain);
	if (!z || ZSTD_isError(zlen))
		return die("compressing the bomb");
	int rc = with_metadata(in, h, z, zlen, out_path);
	free(z);
	return rc;
}

/* IN with header field changes made by `edit` (0: ntensors, 1: tile 0's
 * coff, 2: a payload bit, check not made right). */
static int patched(const uint8_t *in, size_t len, const wc_file_header *h, int edit, const char *out_path)
{
	uint8_t *out = malloc(len);
	if (!out)
		return die("out of memory");
	memcpy(out, in, len);
	wc_file_header o = *h;
	if (edit == 0) {
		o.ntensors = 1u << 20;
		wc_header_encode(&o, out);
		tu_wcodec_fix_check(out, &o);
	} else if (edit == 1) {
		wc_tile_info t;
		wc_index_entry_decode(out + o.index_off, &t);
		t.coff = o.file_size;
		wc_index_entry_encode(&t, out + o.index_off);
		tu_wcodec_fix_check(out, &o);
	} else {
		wc_tile_info t;
		wc_index_entry_decode(out + o.index_off, &t);
		out[t.coff + t.csize / 2] ^= 0x10;
	}
	int rc = write_file(out_path, out, len);
	free(out);
	return rc;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

static int claim(const uint8_t *in, const wc_file_header *hp, uint32_t ntiles, const char *out_path);

int main(int argc, char **argv)
{
	if (argc < 4)
		return die("usage: craft_bad claim|meta-bomb|ntensors|index-past-end|payload IN OUT [NTILES]");
	const char *mode = argv[1];
	size_t len;
	uint8_t *in = slurp(argv[2], &len);
	wc_file_header h;
	if (!in || len < WC_HEADER_BYTES || wc_header_decode(in, len, &h) != WC_OK)
		return die("IN is not a readable .wcodec file");
	int rc;
	if (!strcmp(mode, "claim") && argc == 5)
		rc = claim(in, &h, (uint32_t)strtoul(argv[4], NULL, 10), argv[3]);
	else if (!strcmp(mode, "meta-bomb"))
		rc = meta_bomb(in, &h, argv[3]);
	else if (!strcmp(mode, "ntensors"))
		rc = patched(in, len, &h, 0, argv[3]);
	else if (!strcmp(mode, "index-past-end"))
		rc = patched(in, len, &h, 1, argv[3]);
	else if (!strcmp(mode, "payload"))
		rc = patched(in, len, &h, 2, argv[3]);
	else
		rc = die("unknown mode or missing NTILES");
	free(in);
	return rc;
}

static int claim(const uint8_t *in, const wc_file_header *hp, uint32_t ntiles, const char *out_path)
{
	const wc_file_header h = *hp;
	wc_tile_info t0;
	wc_index_entry_decode(in + h.index_off, &t0);
	if (t0.dsize != h.tile_size)
		return die("IN's first tile is not of the nominal tile size");

	/* The prefix: IN's tensor with the new size. */
	json_error_t je;
	json_t *hdr = json_loadb((const char *)in + h.prefix_off + 8, h.prefix_len - 8, 0, &je);
	const char *key, *name = NULL;
	json_t *ten = NULL, *v;
	json_object_foreach(hdr, key, v) {
		if (strcmp(key, "__metadata__") != 0) {
			ten = v;
			name = key;
		}
	}
	const char *dtype = json_string_value(json_object_get(ten, "dtype"));
	json_t *offs = json_object_get(ten, "data_offsets");
	if (!ten || !name || !dtype || !offs)
		return die("IN's safetensors header names no tensor");
	uint64_t old_bytes = (uint64_t)json_integer_value(json_array_get(offs, 1));
	uint64_t nel = (uint64_t)json_integer_value(json_array_get(json_object_get(ten, "shape"), 0));
	uint64_t elt = nel ? old_bytes / nel : 1;
	uint64_t bytes = (uint64_t)ntiles * h.tile_size;
	char text[1024];
	int tl = snprintf(text, sizeof text, "{\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],\"data_offsets\":[0,%llu]}}",
			  name, dtype, (unsigned long long)(bytes / elt), (unsigned long long)bytes);
	while (tl % 8)
		text[tl++] = ' ';
	uint64_t plen = 8 + (uint64_t)tl;

	/* The tensor table: its one record with the new byte count. */
	unsigned long long mlen = ZSTD_getFrameContentSize(in + h.meta_off, h.meta_len);
	if (mlen == ZSTD_CONTENTSIZE_ERROR || mlen == ZSTD_CONTENTSIZE_UNKNOWN || mlen < WC_TT_HEAD_BYTES)
		return die("IN's metadata has no content size");
	uint8_t *meta = malloc(mlen);
	if (!meta || ZSTD_decompress(meta, mlen, in + h.meta_off, h.meta_len) != mlen)
		return die("IN's metadata does not decompress");
	wc_put_u64(meta + 4, bytes);
	size_t mcap = ZSTD_compressBound(mlen);
	uint8_t *zmeta = malloc(mcap);
	size_t zlen = zmeta ? ZSTD_compress(zmeta, mcap, meta, mlen, 3) : 0;
	if (!zmeta || ZSTD_isError(zlen))
		return die("compressing the metadata");

	wc_file_header o = h;
	o.ntiles = ntiles;
	o.virtual_size = plen + bytes;
	o.prefix_len = plen;
	o.payload_off = o.prefix_off + plen;
	o.payload_len = (uint64_t)ntiles * t0.csize;
	o.tables_off = o.payload_off + o.payload_len;
	o.index_off = o.tables_off + o.tables_len;
	o.index_len = (uint64_t)ntiles * WC_INDEX_ENTRY_BYTES;
	o.meta_off = o.index_off + o.index_len;
	o.meta_len = zlen;
	o.file_size = o.meta_off + o.meta_len;
	uint8_t *out = calloc(1, o.file_size);
	if (!out)
		return die("out of memory");
	wc_put_u64(out + o.prefix_off, (uint64_t)tl);
	memcpy(out + o.prefix_off + 8, text, (size_t)tl);
	for (uint32_t k = 0; k < ntiles; k++) {
		memcpy(out + o.payload_off + (uint64_t)k * t0.csize, in + t0.coff, t0.csize);
		wc_tile_info t = t0;
		t.voff = plen + (uint64_t)k * h.tile_size;
		t.coff = o.payload_off + (uint64_t)k * t0.csize;
		wc_index_entry_encode(&t, out + o.index_off + (uint64_t)k * WC_INDEX_ENTRY_BYTES);
	}
	memcpy(out + o.tables_off, in + h.tables_off, h.tables_len);
	memcpy(out + o.meta_off, zmeta, zlen);
	wc_header_encode(&o, out);
	tu_wcodec_fix_check(out, &o);
	int rc = write_file(out_path, out, o.file_size);
	json_decref(hdr);
	free(meta);
	free(zmeta);
	free(out);
	return rc;
}
