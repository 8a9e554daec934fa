/*
 * test_cuda_lossy.c - lossy tiles (docs/FORMAT.md 2.2) decoded by the CUDA
 * plugin's lanes, the path of the mount's GPU backend and of the loaders:
 * the codes rANS-decoded into lane scratch (or read in place), the scales a
 * tile reads staged after its payload, then dequantized by the merge kernel
 * bit for bit as the CPU. Skips (77) without a usable GPU.
 */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "container/container.h"
#include "cuda_plugin.h"
#include "engine/backend.h"
#include "st_builder.h"

typedef wc_err (*decode_tensor_fn)(const char *, const char *, void *, size_t, int, cudaStream_t);

static wc_backend *g_be;
static decode_tensor_fn g_decode_tensor;

/* Lossy tiles (int8 per channel, int8 and int4 in groups; channels first
 * and last) decode on the GPU's lanes as the CPU does: whole tensors into
 * device memory (the loaders' path) and every tile into pageable host
 * buffers through the backend (the mount's path), lossless tiles of the
 * same file beside them. */
START_TEST(lossy_tiles_through_the_lanes)
{
	char dir[256], st_path[300], wc_path[300];
	ck_assert_ptr_nonnull(st_temp_dir(dir, sizeof dir, "wc_test_cuda"));
	snprintf(st_path, sizeof st_path, "%s/l.safetensors", dir);
	snprintf(wc_path, sizeof wc_path, "%s/l.wcodec", dir);
	st_file f;
	memset(&f, 0, sizeof f);
	uint64_t rng = 11, s1[2] = { 512, 384 }, s2[2] = { 256, 130 }, s4[1] = { 700 };
	st_add(&f, "a.weight", "BF16", 2, s1, "weights", &rng);
	st_add(&f, "norm", "F32", 1, s4, "weights", &rng); /* stays lossless */
	st_add(&f, "b.weight", "F16", 2, s2, "weights", &rng);
	st_add_channels_last(&f, "tf.kernel", 1024, 96, &rng);
	size_t st_len;
	uint8_t *st = st_serialize(&f, &st_len);
	ck_assert_int_eq(st_write_bytes(st_path, st, st_len), 0);
	static const struct { int bits; uint32_t group; } kinds[] = { { 8, 0 }, { 8, 64 }, { 4, 32 } };
	for (size_t v = 0; v < sizeof kinds / sizeof kinds[0]; v++) {
		wc_pack_opts o = { .tile_size = 65536, .chunk_symbols = 4096, .threads = 2,
				   .lossy_bits = kinds[v].bits, .lossy_group = kinds[v].group };
		ck_assert_msg(wc_pack_safetensors(st_path, wc_path, &o, NULL) == WC_OK, "pack: %s", wc_last_detail());
		wc_container *c;
		ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
		unsigned nlossy = 0;
		uint8_t *d, *host = malloc(st_len), *want = malloc(st_len);
		ck_assert_int_eq(cudaMalloc((void **)&d, st_len), cudaSuccess);
		for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
			const wc_tensor_info *ti = wc_container_tensor(c, i);
			const size_t nb = ti->end - ti->begin;
			nlossy += ti->lossy != 0;
			ck_assert_int_eq(wc_container_pread(c, want, nb, ti->begin), WC_OK);
			wc_err e = g_decode_tensor(wc_path, ti->name, d, nb, 0, 0);
			ck_assert_msg(e == WC_OK, "%s: %s", ti->name, wc_last_detail());
			ck_assert_int_eq(cudaMemcpy(host, d, nb, cudaMemcpyDeviceToHost), cudaSuccess);
			ck_assert_msg(memcmp(host, want, nb) == 0, "%s (int%d, group %u) differs in device memory",
				      ti->name, kinds[v].bits, kinds[v].group);
		}
		ck_assert_uint_eq(nlossy, 3);
		const uint32_t nt = wc_container_ntiles(c);
		wc_tile_job *jobs = calloc(nt, sizeof *jobs);
		uint8_t **pay = calloc(nt, sizeof *pay);
		wc_tile_source *src = wc_container_source(c);
		for (uint32_t i = 0; i < nt; i++) {
			const wc_tile_info *tl = wc_container_tile(c, i);
			pay[i] = malloc(tl->csize);
			ck_assert_int_eq(wc_container_read_payload(c, i, pay[i]), WC_OK);
			src->ops->describe_job(src, i, &jobs[i]);
			jobs[i].payload = pay[i];
			jobs[i].payload_size = tl->csize;
			jobs[i].out = malloc(tl->dsize);
			jobs[i].out_size = tl->dsize;
		}
		ck_assert_int_eq(wc_backend_decode(g_be, jobs, nt), WC_OK);
		for (uint32_t i = 0; i < nt; i++) {
			const wc_tile_info *tl = wc_container_tile(c, i);
			ck_assert_int_eq(jobs[i].status, WC_OK);
			ck_assert_int_eq(wc_container_pread(c, want, tl->dsize, tl->voff), WC_OK);
			ck_assert_msg(memcmp(jobs[i].out, want, tl->dsize) == 0, "tile %u (int%d, group %u) differs", i,
				      kinds[v].bits, kinds[v].group);
			free(jobs[i].out);
			free(pay[i]);
		}
		free(jobs);
		free(pay);
		cudaFree(d);
		free(host);
		free(want);
		wc_container_release(c);
	}
	free(st);
	st_free(&f);
	ck_assert_int_eq(st_remove_tree(dir), 0);
}
END_TEST

int main(void)
{
	void *h = cuda_plugin_open("test_cuda_lossy");
	if (!h)
		return 1;
	wc_backend_create_fn create = (wc_backend_create_fn)dlsym(h, WC_CUDA_PLUGIN_SYMBOL);
	g_decode_tensor = (decode_tensor_fn)dlsym(h, "wcodec_cuda_decode_tensor");
	if (!create || !g_decode_tensor) {
		fprintf(stderr, "test_cuda_lossy: the plugin lacks a symbol\n");
		return 1;
	}
	wc_backend_opts o = { .threads = 4, .gpu = 0, .gpu_memory_limit = 256u << 20 };
	if (create(&o, &g_be) != WC_OK) {
		printf("test_cuda_lossy: skipped, no usable GPU: %s\n", wc_last_detail());
		return 77;
	}
	const TTest *tests[] = { lossy_tiles_through_the_lanes };
	int rc = cuda_run_tests("cuda_lossy", tests, sizeof tests / sizeof tests[0], 300);
	g_be->ops->destroy(g_be);
	return rc;
}
