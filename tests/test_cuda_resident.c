/* test_cuda_resident.c - packed tensors resident in device memory
 * (wcodec_cuda_resident_*, cuda/wcodec_cuda.h): decodes into several
 * destinations (more than the descriptor slots, on two streams) equal the
 * original bytes, a tensor sharing a tile included; a damaged payload fails
 * at create naming its tensor; lossy tiles equal the CPU decoder's bytes;
 * bad names and destinations are refused. Exits 77 when no GPU is
 * usable. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "container/container.h"
#include "cuda_plugin.h"
#include "engine/backend.h"
#include "st_builder.h"
#include "wcodec_cuda.h"

typedef wc_err (*create_fn)(wc_container *, const char *const *, size_t, int, unsigned, wcodec_cuda_resident **);
typedef wc_err (*decode_fn)(wcodec_cuda_resident *, void *, size_t, cudaStream_t);
typedef wc_err (*check_fn)(const wcodec_cuda_resident *);
typedef uint64_t (*u64_fn)(const wcodec_cuda_resident *);
typedef uint64_t (*offset_fn)(const wcodec_cuda_resident *, size_t);
typedef size_t (*size_fn)(const wcodec_cuda_resident *);
typedef void (*free_fn)(wcodec_cuda_resident *);
typedef wc_err (*decode_work_fn)(wcodec_cuda_resident *, void *, size_t, void *, size_t, cudaStream_t);
typedef wc_err (*units_create_fn)(int, void *, size_t, void *, size_t, wcodec_cuda_units **);
typedef wc_err (*units_add_fn)(wcodec_cuda_units *, wcodec_cuda_resident *const *, const uint64_t *, size_t,
			       uint32_t *);
typedef wc_err (*units_next_fn)(wcodec_cuda_units *, uint32_t, uint32_t);
typedef wc_err (*units_begin_fn)(wcodec_cuda_units *, uint32_t, cudaStream_t, int *);
typedef wc_err (*units_end_fn)(wcodec_cuda_units *, uint32_t);
typedef void (*units_counts_fn)(wcodec_cuda_units *, uint64_t *, uint64_t *);
typedef void (*units_free_fn)(wcodec_cuda_units *);

static create_fn r_create;
static decode_fn r_decode;
static check_fn r_check;
static u64_fn r_out_bytes;
static offset_fn r_offset;
static size_fn r_device_bytes;
static free_fn r_free;
static decode_work_fn r_decode_work;
static size_fn r_work_bytes;
static units_create_fn u_create;
static units_add_fn u_add;
static units_next_fn u_next;
static units_begin_fn u_begin;
static units_end_fn u_end;
static units_counts_fn u_counts;
static units_free_fn u_free;

static char g_dir[256], g_st[300], g_wc[300];
static st_file g_f;
static uint8_t *g_bytes;
static size_t g_len;
/* weight-like tensors (BF16, F16, F32; odd sizes) and a tiny one sharing a tile */
static const char *const g_names[] = { "blk.q.weight", "blk.tiny", "blk.odd", "blk.f16", "blk.f32",
				       "blk.k.weight", "blk.tf" };
#define NNAMES (sizeof g_names / sizeof g_names[0])

/* Outside any test (no ck_assert): 0, or -1 after a message. */
static int build_file(void)
{
	uint64_t rng = 7;
	uint64_t s1[2] = { 512, 384 }, s2[2] = { 333, 101 }, s3[2] = { 256, 130 }, s4[2] = { 96, 200 },
		 s5[1] = { 3 };
	st_add(&g_f, "blk.q.weight", "BF16", 2, s1, "weights", &rng);
	st_add(&g_f, "blk.tiny", "F32", 1, s5, "weights", &rng); /* shares a tile */
	st_add(&g_f, "blk.odd", "BF16", 2, s2, "weights", &rng);
	st_add(&g_f, "blk.f16", "F16", 2, s3, "weights", &rng);
	st_add(&g_f, "blk.f32", "F32", 2, s4, "weights", &rng);
	st_add(&g_f, "blk.k.weight", "BF16", 2, s1, "weights", &rng);
	/* channels last, over several 64 KiB tiles, each holding a few groups
	 * of every channel */
	st_add_channels_last(&g_f, "blk.tf", 1024, 96, &rng);
	g_bytes = st_serialize(&g_f, &g_len);
	if (!st_temp_dir(g_dir, sizeof g_dir, "wc_test_res"))
		return -1;
	snprintf(g_st, sizeof g_st, "%s/w.safetensors", g_dir);
	snprintf(g_wc, sizeof g_wc, "%s/w.wcodec", g_dir);
	if (st_write_bytes(g_st, g_bytes, g_len) != 0)
		return -1;
	wc_pack_opts o = { .tile_size = 65536, .chunk_symbols = 4096, .threads = 2 };
	if (wc_pack_safetensors(g_st, g_wc, &o, NULL) != WC_OK) {
		fprintf(stderr, "test_cuda_resident: pack: %s\n", wc_last_detail());
		return -1;
	}
	return 0;
}

/* Tensor name's bytes in the original file. */
static const uint8_t *orig(wc_container *c, const char *name, size_t *n)
{
	uint32_t i;
	ck_assert_int_eq(wc_container_find_tensor(c, name, &i), WC_OK);
	const wc_tensor_info *t = wc_container_tensor(c, i);
	*n = t->end - t->begin;
	return g_bytes + t->begin;
}

START_TEST(decodes_equal_the_original_in_every_destination)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(g_wc, &c), WC_OK);
	wcodec_cuda_resident *r;
	wc_err e = r_create(c, g_names, NNAMES, 0, WCODEC_CUDA_RESIDENT_VERIFY, &r);
	ck_assert_msg(e == WC_OK, "create: %s", wc_last_detail());
	wc_container_release(c); /* r needs it no more */
	ck_assert_int_eq(wc_container_open(g_wc, &c), WC_OK);
	const uint64_t ob = r_out_bytes(r);
	ck_assert_uint_gt(r_device_bytes(r), 0);
	ck_assert_uint_eq(r_offset(r, NNAMES), UINT64_MAX);
	/* six destinations (slots are four), alternating between two streams */
	enum { NDST = 6 };
	uint8_t *d, *h = malloc(ob);
	ck_assert_int_eq(cudaMalloc((void **)&d, NDST * (ob + 256)), cudaSuccess);
	cudaStream_t st[2];
	ck_assert_int_eq(cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking), cudaSuccess);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking), cudaSuccess);
	const size_t stride = (ob + 511) & ~(size_t)255;
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < NDST && (size_t)(k + 1) * stride <= NDST * (ob + 256); k++) {
			uint8_t *dst = d + (size_t)k * stride;
			ck_assert_int_eq(cudaMemset(dst, 0xa5, ob), cudaSuccess);
			ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
			e = r_decode(r, dst, ob, st[k & 1]);
			ck_assert_msg(e == WC_OK, "decode: %s", wc_last_detail());
			ck_assert_int_eq(cudaStreamSynchronize(st[k & 1]), cudaSuccess);
			ck_assert_int_eq(r_check(r), WC_OK);
			ck_assert_int_eq(cudaMemcpy(h, dst, ob, cudaMemcpyDeviceToHost), cudaSuccess);
			for (size_t i = 0; i < NNAMES; i++) {
				size_t n;
				const uint8_t *want = orig(c, g_names[i], &n);
				uint64_t off = r_offset(r, i);
				ck_assert_uint_eq(off % 256, 0);
				ck_assert_uint_le(off + n, ob);
				ck_assert_msg(memcmp(h + off, want, n) == 0, "round %d dst %d: %s differs", round, k,
					      g_names[i]);
			}
		}
	}
	/* misaligned, too small */
	ck_assert_int_eq(r_decode(r, d + 16, ob, st[0]), WC_E_INVAL);
	ck_assert_int_eq(r_decode(r, d, ob - 1, st[0]), WC_E_RANGE);
	cudaStreamDestroy(st[0]);
	cudaStreamDestroy(st[1]);
	r_free(r);
	cudaFree(d);
	free(h);
	wc_container_release(c);
}
END_TEST

START_TEST(bad_names_refused)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(g_wc, &c), WC_OK);
	wcodec_cuda_resident *r = (wcodec_cuda_resident *)&r;
	const char *none[] = { "blk.q.weight", "no.such" };
	ck_assert_int_eq(r_create(c, none, 2, 0, 0, &r), WC_E_NOTFOUND);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(r_create(c, none, 0, 0, 0, &r), WC_E_INVAL);
	wc_container_release(c);
}
END_TEST

/* Lossy tensors (int8 per channel, int8 and int4 in groups) decode on the
 * GPU to exactly the CPU decoder's bytes (wc_container_pread). */
START_TEST(lossy_tiles_equal_the_cpu_decoder)
{
	static const struct { int bits; uint32_t group; } kinds[] = { { 8, 0 }, { 8, 64 }, { 4, 32 } };
	for (size_t v = 0; v < sizeof kinds / sizeof kinds[0]; v++) {
		char lossy[320];
		snprintf(lossy, sizeof lossy, "%s/lossy%zu.wcodec", g_dir, v);
		wc_pack_opts o = { .tile_size = 65536, .chunk_symbols = 4096, .threads = 2,
				   .lossy_bits = kinds[v].bits, .lossy_group = kinds[v].group };
		ck_assert_msg(wc_pack_safetensors(g_st, lossy, &o, NULL) == WC_OK, "pack: %s", wc_last_detail());
		wc_container *c;
		ck_assert_int_eq(wc_container_open(lossy, &c), WC_OK);
		unsigned nlossy = 0;
		for (size_t i = 0; i < NNAMES; i++) {
			uint32_t ti;
			ck_assert_int_eq(wc_container_find_tensor(c, g_names[i], &ti), WC_OK);
			nlossy += wc_container_tensor(c, ti)->lossy != 0;
		}
		ck_assert_uint_ge(nlossy, 5);
		wc_lossy_desc ld;
		uint32_t tfi;
		ck_assert_int_eq(wc_container_find_tensor(c, "blk.tf", &tfi), WC_OK);
		ck_assert_int_eq(wc_container_lossy_desc(c, tfi, &ld), WC_OK);
		ck_assert_uint_eq(ld.axis, 1); /* the channels-last walk is decoded too */
		wcodec_cuda_resident *r;
		wc_err e = r_create(c, g_names, NNAMES, 0, WCODEC_CUDA_RESIDENT_VERIFY, &r);
		ck_assert_msg(e == WC_OK, "create: %s", wc_last_detail());
		const uint64_t ob = r_out_bytes(r);
		uint8_t *d, *h = malloc(ob);
		ck_assert_int_eq(cudaMalloc((void **)&d, ob), cudaSuccess);
		ck_assert_int_eq(r_decode(r, d, ob, 0), WC_OK);
		ck_assert_int_eq(cudaMemcpy(h, d, ob, cudaMemcpyDeviceToHost), cudaSuccess);
		ck_assert_int_eq(r_check(r), WC_OK);
		for (size_t i = 0; i < NNAMES; i++) {
			uint32_t ti;
			wc_container_find_tensor(c, g_names[i], &ti);
			const wc_tensor_info *t = wc_container_tensor(c, ti);
			size_t n = t->end - t->begin;
			uint8_t *want = malloc(n);
			ck_assert_int_eq(wc_container_pread(c, want, n, t->begin), WC_OK);
			ck_assert_msg(memcmp(h + r_offset(r, i), want, n) == 0, "%s (int%d, group %u) differs",
				      g_names[i], kinds[v].bits, kinds[v].group);
			free(want);
		}
		r_free(r);
		cudaFree(d);
		free(h);
		if (kinds[v].group) { /* a tile uploads its rows' groups of each channel, not the span between */
			const wc_tensor_info *t = wc_container_tensor(c, tfi);
			uint64_t want = 0;
			for (uint32_t j = 0; j < t->ntiles; j++)
				want += (wc_container_tile(c, t->first_tile + j)->csize + 15u) & ~15u;
			const uint64_t rows = 65536 / (4 * 96) + 1, ng = rows / kinds[v].group + 2;
			want += t->ntiles * ((96 * ng * 4 + 15u) & ~15ull);
			const char *tf_only[] = { "blk.tf" };
			ck_assert_int_eq(r_create(c, tf_only, 1, 0, 0, &r), WC_OK);
			ck_assert_uint_ge(t->ntiles, 6);
			ck_assert_msg(r_device_bytes(r) <= want, "blk.tf: %zu device bytes, want at most %llu",
				      r_device_bytes(r), (unsigned long long)want);
			r_free(r);
		}
		wc_container_release(c);
	}
}
END_TEST

START_TEST(damaged_payload_fails_at_create)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(g_wc, &c), WC_OK);
	uint32_t ti;
	ck_assert_int_eq(wc_container_find_tensor(c, "blk.f16", &ti), WC_OK);
	const wc_tile_info *tl = wc_container_tile(c, wc_container_tensor(c, ti)->first_tile);
	char bad[320];
	snprintf(bad, sizeof bad, "%s/bad.wcodec", g_dir);
	ck_assert_int_eq(st_copy_flipped(g_wc, bad, tl->coff + tl->csize / 2, 0x10), 0);
	wc_container_release(c);
	ck_assert_int_eq(wc_container_open(bad, &c), WC_OK); /* payloads are checked when read */
	wcodec_cuda_resident *r;
	ck_assert_int_eq(r_create(c, g_names, NNAMES, 0, 0, &r), WC_E_CORRUPT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "blk.f16"));
	wc_container_release(c);
}
END_TEST

/* A set's bytes in a device buffer equal the file's (the CPU decoder's). */
static void expect_set(wc_container *c, wcodec_cuda_resident *r, const uint8_t *dev, size_t n0, size_t n,
		       const char *what)
{
	const uint64_t ob = r_out_bytes(r);
	uint8_t *h = malloc(ob);
	ck_assert_int_eq(cudaMemcpy(h, dev, ob, cudaMemcpyDeviceToHost), cudaSuccess);
	for (size_t i = 0; i < n; i++) {
		uint32_t ti;
		ck_assert_int_eq(wc_container_find_tensor(c, g_names[n0 + i], &ti), WC_OK);
		const wc_tensor_info *t = wc_container_tensor(c, ti);
		uint8_t *want = malloc(t->end - t->begin);
		ck_assert_int_eq(wc_container_pread(c, want, t->end - t->begin, t->begin), WC_OK);
		ck_assert_msg(memcmp(h + r_offset(r, i), want, t->end - t->begin) == 0, "%s: %s differs", what,
			      g_names[n0 + i]);
		free(want);
	}
	free(h);
}

/* Two lossy sets as two units of a schedule, run in turn: each unit's
 * bytes are right in the buffer begin names, the other unit is decoded
 * ahead, and the sets share the schedule's work buffers; a set decoded
 * with a work buffer of the caller's gives the same bytes. */
START_TEST(units_decode_ahead_with_shared_work)
{
	char lossy[320];
	snprintf(lossy, sizeof lossy, "%s/units.wcodec", g_dir);
	wc_pack_opts o = { .tile_size = 65536, .chunk_symbols = 4096, .threads = 2, .lossy_bits = 8 };
	ck_assert_msg(wc_pack_safetensors(g_st, lossy, &o, NULL) == WC_OK, "pack: %s", wc_last_detail());
	wc_container *c;
	ck_assert_int_eq(wc_container_open(lossy, &c), WC_OK);
	const size_t half = NNAMES / 2;
	wcodec_cuda_resident *r[2];
	ck_assert_int_eq(r_create(c, g_names, half, 0, 0, &r[0]), WC_OK);
	ck_assert_int_eq(r_create(c, g_names + half, NNAMES - half, 0, 0, &r[1]), WC_OK);
	ck_assert_uint_gt(r_work_bytes(r[0]) + r_work_bytes(r[1]), 0); /* lossy codes need plane scratch */
	const size_t before[2] = { r_device_bytes(r[0]), r_device_bytes(r[1]) };
	uint64_t big = r_out_bytes(r[0]) > r_out_bytes(r[1]) ? r_out_bytes(r[0]) : r_out_bytes(r[1]);
	uint8_t *buf[2];
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(cudaMalloc((void **)&buf[k], big), cudaSuccess);
	wcodec_cuda_units *s;
	ck_assert_int_eq(u_create(0, buf[0], big, buf[1], big, &s), WC_OK);
	uint32_t id[2];
	const uint64_t zero = 0;
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(u_add(s, &r[k], &zero, 1, &id[k]), WC_OK);
	ck_assert_int_eq(u_next(s, id[0], id[1]), WC_OK);
	ck_assert_int_eq(u_next(s, id[1], 7), WC_E_RANGE);
	for (int round = 0; round < 3; round++)
		for (int k = 0; k < 2; k++) {
			int b = -1;
			ck_assert_int_eq(u_begin(s, id[k], 0, &b), WC_OK);
			ck_assert(b == 0 || b == 1);
			ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
			expect_set(c, r[k], buf[b], k ? half : 0, k ? NNAMES - half : half, "unit");
			ck_assert_int_eq(u_end(s, id[k]), WC_OK);
		}
	uint64_t decoded, ahead;
	u_counts(s, &decoded, &ahead);
	/* 0 now, 1 ahead; 1; 0 now (1's next learnt), 1 ahead; 1, 0 ahead; 0, 1 ahead; 1, 0 ahead */
	ck_assert_uint_eq(decoded, 7);
	ck_assert_uint_eq(ahead, 4);
	for (int k = 0; k < 2; k++) /* descriptors for two buffers (small), no work buffers of their own */
		if (r_work_bytes(r[k]))
			ck_assert_uint_lt(r_device_bytes(r[k]) - before[k], 2 * r_work_bytes(r[k]));
	ck_assert_int_eq(r_check(r[0]), WC_OK);
	u_free(s);
	/* the caller's work buffer */
	uint8_t *work;
	const size_t wb = r_work_bytes(r[1]);
	ck_assert_int_eq(cudaMalloc((void **)&work, wb + 16), cudaSuccess);
	ck_assert_int_eq(r_decode_work(r[1], buf[0], big, work, wb ? wb - 1 : 0, 0), wb ? WC_E_RANGE : WC_OK);
	ck_assert_int_eq(cudaMemset(buf[0], 0, big), cudaSuccess);
	ck_assert_int_eq(r_decode_work(r[1], buf[0], big, work, wb, 0), WC_OK);
	ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
	expect_set(c, r[1], buf[0], half, NNAMES - half, "caller's work");
	cudaFree(work);
	for (int k = 0; k < 2; k++) {
		r_free(r[k]);
		cudaFree(buf[k]);
	}
	wc_container_release(c);
}
END_TEST

int main(void)
{
	void *h = cuda_plugin_open("test_cuda_resident");
	if (!h)
		return 1;
	r_create = (create_fn)dlsym(h, "wcodec_cuda_resident_create");
	r_decode = (decode_fn)dlsym(h, "wcodec_cuda_resident_decode");
	r_check = (check_fn)dlsym(h, "wcodec_cuda_resident_check");
	r_out_bytes = (u64_fn)dlsym(h, "wcodec_cuda_resident_out_bytes");
	r_offset = (offset_fn)dlsym(h, "wcodec_cuda_resident_offset");
	r_device_bytes = (size_fn)dlsym(h, "wcodec_cuda_resident_device_bytes");
	r_free = (free_fn)dlsym(h, "wcodec_cuda_resident_free");
	r_decode_work = (decode_work_fn)dlsym(h, "wcodec_cuda_resident_decode_work");
	r_work_bytes = (size_fn)dlsym(h, "wcodec_cuda_resident_work_bytes");
	u_create = (units_create_fn)dlsym(h, "wcodec_cuda_units_create");
	u_add = (units_add_fn)dlsym(h, "wcodec_cuda_units_add");
	u_next = (units_next_fn)dlsym(h, "wcodec_cuda_units_set_next");
	u_begin = (units_begin_fn)dlsym(h, "wcodec_cuda_units_begin");
	u_end = (units_end_fn)dlsym(h, "wcodec_cuda_units_end");
	u_counts = (units_counts_fn)dlsym(h, "wcodec_cuda_units_counts");
	u_free = (units_free_fn)dlsym(h, "wcodec_cuda_units_free");
	if (!r_create || !r_decode || !r_check || !r_out_bytes || !r_offset || !r_device_bytes || !r_free ||
	    !r_decode_work || !r_work_bytes || !u_create || !u_add || !u_next || !u_begin || !u_end || !u_counts ||
	    !u_free) {
		fprintf(stderr, "test_cuda_resident: the plugin lacks its entry points\n");
		return 1;
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("test_cuda_resident: skipped, no usable GPU\n");
		return 77;
	}
	if (build_file() != 0)
		return 1;
	const TTest *tests[] = { decodes_equal_the_original_in_every_destination, bad_names_refused,
				 lossy_tiles_equal_the_cpu_decoder, damaged_payload_fails_at_create,
				 units_decode_ahead_with_shared_work };
	int failed = cuda_run_tests("cuda_resident", tests, sizeof tests / sizeof tests[0], 300);
	if (st_remove_tree(g_dir) != 0)
		failed++;
	st_free(&g_f);
	free(g_bytes);
	return failed ? 1 : 0;
}
