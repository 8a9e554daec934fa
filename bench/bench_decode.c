/*
 * bench_decode.c - throughput of the tile codec on synthetic realistic weights.
 *
 * Generates a tensor of N(0, std) weights (BF16, F16 or F32), builds one
 * frequency table per plane from the whole tensor (as the packer does),
 * encodes it in tiles, and reports: encode MB/s (input bytes), payload size
 * against the order-0 entropy of the planes, and single-thread decode GB/s of
 * decoded output (median of several runs, plane merge included). Times are
 * the thread's CPU time, so a busy machine distorts them less.
 *
 * With -q K the weights are first quantized to K evenly spaced levels over
 * [-4 std, 4 std] (what TF.js models hold: u8 quantization is K = 256) and
 * coded with the dictionary layout (docs/FORMAT.md 2.1; index planes, then
 * a gather), or with -p as byte planes for comparison; the dictionary's
 * bytes are added to the payload.
 *
 *   bench/bench_decode [-d BF16|F16|F32] [-m MiB] [-t tile KiB] [-c chunk_symbols]
 *                      [-r runs] [-z (allow zstd)] [-s (portable scalar rANS) | -a (at most AVX2)]
 *                      [-q levels [-p (byte planes, no dictionary)]]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/codec_internal.h" /* wc_rans_isa_limit */
#include "codec/tile_codec.h"
#include "codec_testutil.h" /* tu_f32_to_f16, tu_f16_to_f32 */

/* Thread CPU time: on a shared machine, time slices given to other
 * processes do not count against the codec (cache pollution still does). */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x1234567;
static double uniform(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static void store_elem(const char *dtype, uint8_t *out, size_t i, float g)
{
	if (!strcmp(dtype, "F32")) {
		memcpy(out + 4 * i, &g, 4);
	} else if (!strcmp(dtype, "F16")) {
		uint16_t h = tu_f32_to_f16(g);
		memcpy(out + 2 * i, &h, 2);
	} else { /* BF16, round to nearest even */
		uint32_t b;
		memcpy(&b, &g, 4);
		b += 0x7fff + ((b >> 16) & 1);
		uint16_t h = (uint16_t)(b >> 16);
		memcpy(out + 2 * i, &h, 2);
	}
}

/* Box-Muller: two normals per pair of uniforms. */
static void gen_weights(const char *dtype, uint8_t *out, size_t n, double std)
{
	for (size_t i = 0; i < n; i += 2) {
		double u = uniform(), v = uniform();
		double r = sqrt(-2.0 * log(u > 1e-300 ? u : 1e-300)) * std;
		store_elem(dtype, out, i, (float)(r * cos(6.283185307179586 * v)));
		if (i + 1 < n)
			store_elem(dtype, out, i + 1, (float)(r * sin(6.283185307179586 * v)));
	}
}

/* Snap each element to one of k levels evenly spaced over [-4 std, 4 std]. */
static void quantize(const char *dtype, uint8_t *data, size_t n, unsigned k, double std)
{
	for (size_t i = 0; i < n; i++) {
		float g;
		if (!strcmp(dtype, "F32")) {
			memcpy(&g, data + 4 * i, 4);
		} else if (!strcmp(dtype, "F16")) {
			uint16_t h;
			memcpy(&h, data + 2 * i, 2);
			g = tu_f16_to_f32(h);
		} else {
			uint16_t h;
			memcpy(&h, data + 2 * i, 2);
			uint32_t b = (uint32_t)h << 16;
			memcpy(&g, &b, 4);
		}
		double lo = -4 * std, step = 8 * std / (k > 1 ? k - 1 : 1);
		double lv = floor((g - lo) / step + 0.5);
		lv = lv < 0 ? 0 : lv > k - 1 ? k - 1 : lv;
		store_elem(dtype, data, i, (float)(lo + lv * step));
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static const char *const mode_names[WC_PLANE_MODES] = {"raw", "const", "rans", "zstd", "pack"};

int main(int argc, char **argv)
{
	const char *dtype = "BF16";
	size_t mib = 64, tile_kib = 1024;
	uint32_t chunk = WC_RANS_CHUNK_DEFAULT;
	int runs = 5, zstd = 0, opt, byte_planes = 0;
	unsigned levels = 0;
	while ((opt = getopt(argc, argv, "d:m:t:c:r:zsahq:p")) != -1) {
		switch (opt) {
		case 'd': dtype = optarg; break;
		case 'm': mib = strtoul(optarg, NULL, 10); break;
		case 't': tile_kib = strtoul(optarg, NULL, 10); break;
		case 'c': chunk = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'r': runs = atoi(optarg); break;
		case 'z': zstd = 1; break;
		case 's': wc_rans_isa_limit = WC_RANS_ISA_SCALAR; break;
		case 'a': wc_rans_isa_limit = WC_RANS_ISA_AVX2; break;
		case 'q': levels = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p': byte_planes = 1; break;
		default:
			fprintf(stderr, "usage: %s [-d BF16|F16|F32] [-m MiB] [-t tile KiB] [-c chunk_symbols] "
					"[-r runs] [-z] [-s (scalar rANS) | -a (at most AVX2)] [-q levels [-p]]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	wc_layout l = wc_layout_for_dtype(dtype);
	size_t nbytes = mib << 20, tile = tile_kib << 10;
	size_t n = nbytes / l.elem_size;
	nbytes = n * l.elem_size;
	tile -= tile % l.elem_size;
	uint8_t *data = malloc(nbytes), *back = malloc(nbytes);
	if (!data || !back || runs < 1 || !tile || !n) {
		fprintf(stderr, "bad arguments or out of memory\n");
		return 2;
	}
	gen_weights(dtype, data, n, 0.02);
	uint8_t *dict = NULL;
	uint32_t entries = 0;
	if (levels) {
		quantize(dtype, data, n, levels, 0.02);
		dict = malloc((size_t)WC_DICT_MAX_ENTRIES * l.elem_size);
		if (!dict || wc_dict_build(data, n, l.elem_size, dict, &entries, NULL) != WC_OK) {
			fprintf(stderr, "no dictionary: %s\n", wc_last_detail());
			return 1;
		}
		if (byte_planes) {
			free(dict);
			dict = NULL;
		} else {
			l = wc_layout_dict(l.elem_size, entries);
		}
	}

	/* One table per plane over the whole tensor, and the planes' entropy. */
	uint8_t *planes[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++)
		planes[p] = malloc(n);
	if (dict)
		wc_dict_index(l, dict, entries, data, n, planes);
	else
		wc_planes_split(l, data, n, planes);
	wc_freqtab tabs[WC_MAX_PLANES];
	wc_plane_plan plan[WC_MAX_PLANES];
	double entropy_bytes = 0, plane_entropy[WC_MAX_PLANES], table_bits[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++) {
		uint64_t h[256] = {0};
		for (size_t i = 0; i < n; i++)
			h[planes[p][i]]++;
		plane_entropy[p] = wc_entropy_bits(h);
		entropy_bytes += plane_entropy[p] * (double)n / 8.0;
		plan[p] = (wc_plane_plan){NULL, p, zstd};
		table_bits[p] = 0; /* ideal cost of coding with the 12-bit table */
		if (wc_freq_normalize(h, &tabs[p]) == WC_OK) {
			plan[p].table = &tabs[p];
			for (int s = 0; s < 256; s++)
				if (h[s])
					table_bits[p] += (double)h[s] * log2(4096.0 / tabs[p].freq[s]) / (double)n;
		} else {
			tabs[p] = (wc_freqtab){{2048, 2048}};
		}
		free(planes[p]);
	}

	size_t ntiles = (nbytes + tile - 1) / tile;
	size_t cap = wc_tile_encode_bound(l, tile, chunk);
	uint8_t *payload = malloc(ntiles * cap);
	size_t *len = malloc(ntiles * sizeof *len);
	uint64_t plane_total[WC_MAX_PLANES] = {0}, pb[WC_MAX_PLANES];
	unsigned mode_count[WC_MAX_PLANES][WC_PLANE_MODES] = {{0}};
	double t0 = now();
	for (size_t k = 0; k < ntiles; k++) {
		size_t sz = nbytes - k * tile < tile ? nbytes - k * tile : tile;
		wc_err e = dict ? wc_tile_encode_dict(l, data + k * tile, sz, dict, entries, plan, chunk, payload + k * cap,
						      cap, &len[k], pb)
				: wc_tile_encode(l, data + k * tile, sz, plan, chunk, payload + k * cap, cap, &len[k], pb);
		if (e != WC_OK) {
			fprintf(stderr, "encode tile %zu: %s: %s\n", k, wc_strerror(e), wc_last_detail());
			return 1;
		}
		for (unsigned p = 0; p < l.nplanes; p++)
			plane_total[p] += pb[p];
	}
	double enc_s = now() - t0;
	size_t total = 0;
	for (size_t k = 0; k < ntiles; k++) {
		size_t sz = nbytes - k * tile < tile ? nbytes - k * tile : tile;
		wc_plane_view v[WC_MAX_PLANES];
		if (wc_tile_parse(l, payload + k * cap, len[k], sz, l.nplanes, v) != WC_OK)
			return 1;
		for (unsigned p = 0; p < l.nplanes; p++)
			mode_count[p][v[p].mode]++;
		total += len[k];
	}

	memset(back, 0, nbytes); /* fault the pages in before timing */
	double *dec_s = malloc(runs * sizeof *dec_s);
	for (int r = 0; r < runs; r++) {
		t0 = now();
		for (size_t k = 0; k < ntiles; k++) {
			size_t sz = nbytes - k * tile < tile ? nbytes - k * tile : tile;
			wc_err e = wc_tile_decode_dict(l, payload + k * cap, len[k], tabs, l.nplanes, chunk, dict,
						       entries, back + k * tile, sz);
			if (e != WC_OK) {
				fprintf(stderr, "decode tile %zu: %s: %s\n", k, wc_strerror(e), wc_last_detail());
				return 1;
			}
		}
		dec_s[r] = now() - t0;
	}
	if (memcmp(back, data, nbytes) != 0) {
		fprintf(stderr, "decoded bytes differ from the input\n");
		return 1;
	}
	qsort(dec_s, runs, sizeof *dec_s, cmp_double);
	if (dict) { /* the dictionary is part of what is stored */
		total += (size_t)entries * l.elem_size;
		entropy_bytes += (double)entries * l.elem_size;
	}

	printf("dtype %s, %zu MiB, %zu KiB tiles, chunk %u symbols, layout %s, rANS decoder %s\n", dtype,
	       mib, tile_kib, chunk, wc_layout_name(l),
	       wc_rans_isa_name(wc_rans_isa()));
	if (levels)
		printf("  quantized to %u levels: %u distinct values%s\n", levels, entries,
		       dict ? ", dictionary bytes counted in the payload" : ", coded as byte planes");
	for (unsigned p = 0; p < l.nplanes; p++) {
		printf("  plane %u: entropy %.4f bits, table cost %+.3f%%, coded %.4f bits/symbol (%+.3f%%), modes",
		       p, plane_entropy[p], 100.0 * (table_bits[p] / plane_entropy[p] - 1.0),
		       8.0 * (double)plane_total[p] / (double)n,
		       100.0 * (8.0 * (double)plane_total[p] / (double)n / plane_entropy[p] - 1.0));
		for (int m = 0; m < WC_PLANE_MODES; m++)
			if (mode_count[p][m])
				printf(" %s:%u", mode_names[m], mode_count[p][m]);
		printf("\n");
	}
	printf("  ratio %.4f (payload %zu / raw %zu); payload vs order-0 entropy of the planes: %+.3f%%\n",
	       (double)total / (double)nbytes, total, nbytes, 100.0 * ((double)total / entropy_bytes - 1.0));
	printf("  encode %.1f MB/s (input, 1 thread)\n", (double)nbytes / enc_s / 1e6);
	printf("  decode %.3f GB/s median (min %.3f, max %.3f) of %d runs (output, 1 thread)\n",
	       (double)nbytes / dec_s[runs / 2] / 1e9, (double)nbytes / dec_s[runs - 1] / 1e9,
	       (double)nbytes / dec_s[0] / 1e9, runs);
	free(dec_s);
	free(payload);
	free(dict);
	free(len);
	free(data);
	free(back);
	return 0;
}
