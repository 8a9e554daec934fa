/* craft_claim.c - make a small .wcodec file that claims a huge tensor: the
 * hostile input of the memory-bound tests (tests/mount_claim.sh).
 *
 *   craft_claim IN.wcodec OUT.wcodec NTILES
 *
 * IN holds one tensor of constant tiles of the nominal tile size (packed
 * from a sparse file of zeros). OUT is a valid container, every checksum
 * right, whose one tensor has NTILES copies of IN's first tile: with 64 MiB
 * tiles and NTILES 16384, a 1 TiB tensor in about 1 MB. Exit status 0, or
 * 1 with a reason. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "container/format.h"
#include "wcodec_resign.h"

static int die(const char *why)
{
	fprintf(stderr, "craft_claim: %s\n", why);
	return 1;
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

int main(int argc, char **argv)
{
	if (argc != 4)
		return die("usage: craft_claim IN.wcodec OUT.wcodec NTILES");
	uint32_t ntiles = (uint32_t)strtoul(argv[3], NULL, 10);
	size_t len;
	uint8_t *in = slurp(argv[1], &len);
	wc_file_header h;
	if (!in || len < WC_HEADER_BYTES || wc_header_decode(in, len, &h) != WC_OK)
		return die("IN is not a readable .wcodec file");
	if (h.version != 3 || h.ntensors != 1 || h.flags || ntiles == 0)
		return die("IN must be a version-3 file of one tensor, without dictionaries");
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
	FILE *f = fopen(argv[2], "wb");
	if (!f || fwrite(out, 1, o.file_size, f) != o.file_size || fclose(f) != 0)
		return die("writing OUT");
	json_decref(hdr);
	free(in);
	free(meta);
	free(zmeta);
	free(out);
	return 0;
}
