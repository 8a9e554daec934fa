/*
 * wcodec_cuda.h - public entry points of the CUDA plugin (wcodec-cuda.so)
 * for programs that want decoded tensors in GPU memory, with no host round
 * trip of the decoded bytes (model loaders). Compile with `pkg-config
 * --cflags wcodec` and the CUDA runtime's headers; link with
 * -l:wcodec-cuda.so from $(pkglibdir) (pkg-config's variable cudaplugin
 * names it) or dlopen() it; it needs libwcodec and a CUDA driver.
 *
 * Integrity on these device paths: every tile's compressed payload is
 * checked against its XXH3-64 chash on the host when it is read, and every
 * rANS chunk passes the stream checks of docs/FORMAT.md section 4 on the
 * device (all 32 final states equal 2^16, every renormalisation word
 * consumed, no read outside the chunk). The decoded bytes are NOT hashed
 * (their dhash would need them on the host); a tile that fails a device
 * check is decoded again on the CPU, which decides between "corrupt" and "GPU
 * fault" (then the CPU's bytes are copied up). The host-memory backend
 * (WC_CUDA_PLUGIN_SYMBOL in engine/backend.h) does check every dhash.
 *
 * All functions are synchronous: work queued on `stream` before the call
 * completes first, and the bytes are in place when the call returns.
 * Thread-safe; one internal decode context per GPU is created on first use
 * and kept for the life of the process.
 */
#ifndef WCODEC_CUDA_H
#define WCODEC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "container/container.h"
#include "core/wc_error.h"
#include "engine/backend.h"
#include "loader/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pipelined loader's options; zero fields take the defaults. */
typedef struct wcodec_cuda_load_opts {
	size_t staging_bytes; /* page-locked staging ring, bytes; 0 = 128 MiB (at least
				 4 slots: raised to hold 4 of the file's largest tile) */
	unsigned readers;     /* reader threads; 0 = online CPUs, at most 32 */
} wcodec_cuda_load_opts;

/* What one wcodec_cuda_load() call moved and held. */
typedef struct wcodec_cuda_load_stats {
	uint64_t file_bytes;  /* bytes read from the files (payloads, plain bytes) */
	uint64_t out_bytes;   /* bytes written to the destinations */
	size_t pinned_bytes;  /* page-locked host bytes the GPU's loader holds: ring + lanes */
	size_t device_bytes;  /* device scratch bytes it holds (lanes, tables), beyond
				 the destinations */
} wcodec_cuda_load_stats;

/* Read ranges[0..n) of files[] (loader.h: .wcodec or plain safetensors,
 * data-section offsets) into device memory of GPU `gpu` (each range's dst,
 * length bytes, must be device memory of that GPU: checked), pipelined:
 * reader threads pread payloads into a bounded ring of page-locked buffers
 * and check each payload's XXH3-64 chash on the host; decode threads hand
 * each filled buffer to the batch pipeline, whose lanes upload on their own
 * CUDA streams and decode on the GPU straight into the destinations while
 * the next buffers are read (cuda/loader.c says how). A tile only partly
 * inside a range is decoded on the CPU (dhash checked) and its part copied
 * up. The GPU side checks every rANS chunk (docs/FORMAT.md section 4; see
 * "Integrity" above). Memory: the ring (opts->staging_bytes) plus the
 * lanes' page-locked descriptor and payload staging (about 70 MiB) and
 * under 200 MiB of device scratch, kept per GPU for the life of the process
 * and reported in *stats (may be NULL). Loads on one GPU take turns.
 * Synchronous: the bytes are in place when it returns WC_OK; on failure
 * the destinations hold anything.
 * Errors: WC_E_INVAL (a file index, a NULL or non-device dst), WC_E_RANGE
 * (a range past its data section), WC_E_IO, WC_E_CORRUPT (a payload
 * checksum or stream check; the reason names the file, the tensor and the
 * tile), WC_E_BACKEND (no usable GPU, or a CUDA call failed), WC_E_NOMEM. */
wc_err wcodec_cuda_load(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t n,
			int gpu, const wcodec_cuda_load_opts *opts, wcodec_cuda_load_stats *stats);

/* wcodec_cuda_load with the payloads of the tiles the ranges touch taken
 * from runs[0..nruns) in host memory (loader.h's wc_payload_run: from other
 * ranks of a distributed load) instead of read from the files; each is
 * copied into the staging ring and checked against its chash there, then
 * decoded on the GPU as wcodec_cuda_load does. Plain files' ranges are read
 * from the files. Errors: those of wcodec_cuda_load; WC_E_INVAL (a bad run,
 * or a tile in no run, naming it). */
wc_err wcodec_cuda_load_payloads(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs,
				 size_t nruns, const wc_load_range *ranges, size_t n, int gpu,
				 const wcodec_cuda_load_opts *opts, wcodec_cuda_load_stats *stats);

/* The page-locked host bytes and device bytes wcodec_cuda_load() holds for
 * GPU `gpu` between loads (0 before its first load there).
 * Errors: WC_E_INVAL (an ordinal out of range). */
wc_err wcodec_cuda_loader_memory(int gpu, size_t *pinned_bytes, size_t *device_bytes);

/* Decode tensor `tensor_name` of the .wcodec file at `wcodec_path` into
 * device memory `device_dst` (dst_bytes bytes, on GPU ordinal `gpu`): the
 * tensor's bytes exactly as in the original safetensors data section
 * (little-endian elements). tensor_name NULL decodes the whole data section
 * (every tensor, in file order, as safetensors lays them out).
 * Errors: WC_E_IO, WC_E_FORMAT (the file), WC_E_NOTFOUND (no such tensor),
 * WC_E_RANGE (dst_bytes smaller than the tensor; the reason names the size),
 * WC_E_CORRUPT (a payload failed its chash or a stream its checks),
 * WC_E_BACKEND (no usable GPU or a CUDA call failed), WC_E_NOMEM. */
wc_err wcodec_cuda_decode_tensor(const char *wcodec_path, const char *tensor_name, void *device_dst,
				 size_t dst_bytes, int gpu, cudaStream_t stream);

/* The same on an open container (the caller keeps its reference). */
wc_err wcodec_cuda_decode_tensor_c(wc_container *c, const char *tensor_name, void *device_dst,
				   size_t dst_bytes, int gpu, cudaStream_t stream);

/* Decode tile jobs (engine/backend.h; payloads in host memory, chash
 * already checked by the caller) into device memory: job i's out_size bytes
 * go to device_dst[i]; job->out is not used. The work queued on the GPU's
 * default stream completes first. Sets every job's status.
 * Returns WC_OK if every job was attempted (look at each status), else
 * WC_E_BACKEND (no usable GPU, or a CUDA call failed: no output may be
 * trusted) or WC_E_NOMEM. */
wc_err wcodec_cuda_decode_jobs(wc_tile_job *jobs, size_t n, void *const *device_dst, int gpu);

/* ---- packed tensors resident in device memory ------------------------
 * For models whose weights stay packed on the GPU (a transformer block's
 * tensors decoded just before the block runs): the tiles of a set of
 * tensors are uploaded once and decoded on the device, as often as wanted,
 * into a caller's buffer, with no host work per decode beyond two kernel
 * launches per 4096 tiles. Decoded bytes are exactly the tensors' bytes of
 * the original safetensors file. */
typedef struct wcodec_cuda_resident wcodec_cuda_resident;

/* Create: also decode once and check every tile's decoded bytes against its
 * XXH3-64 dhash on the host (costs a device-to-host copy of the tensors). */
#define WCODEC_CUDA_RESIDENT_VERIFY 1u

/* Read tensors names[0..n) of container c (n >= 1), check every payload's
 * chash, upload the payloads to GPU `gpu` and plan their decode. The
 * decoded tensors lie in one buffer of wcodec_cuda_resident_out_bytes()
 * bytes, tensor k at wcodec_cuda_resident_offset(r, k) (256-byte aligned,
 * in the order given). Lossy tensors (docs/FORMAT.md 2.2) decode to their
 * dequantized values, bit-identical to the CPU decoder (their codes by the
 * rANS kernel, the scaling by the merge kernel). A tile a tensor shares
 * with others (small tensors packed together, docs/FORMAT.md 1.6) is
 * decoded whole into a work buffer and the tensor's part copied. flags: 0
 * or WCODEC_CUDA_RESIDENT_VERIFY. r keeps a reference to c until
 * wcodec_cuda_resident_free.
 * Device memory, reported by wcodec_cuda_resident_device_bytes(): the
 * payloads (16-byte aligned each) and, for each destination in use (at
 * most four), a copy of the descriptors (about 0.1% of the decoded bytes)
 * and a work buffer (shared tiles; plane scratch, up to 64 MiB, for lossy
 * codes and layouts with several rANS planes: none for BF16); plus, once
 * per GPU for the process, a decode context of about 12 MiB (frequency
 * tables) with its host threads.
 * Errors: WC_E_INVAL (n), WC_E_NOTFOUND (a name), WC_E_UNSUPPORTED (tiles
 * the GPU decoder does not take: zstd or dictionary planes; the reason
 * names the tensor: keep such a tensor decoded), WC_E_IO, WC_E_CORRUPT (a
 * payload's chash, or with VERIFY a tile's decoded bytes; the reason names
 * tensor and tile), WC_E_BACKEND (no usable GPU, a CUDA call failed,
 * device memory exhausted), WC_E_NOMEM. */
wc_err wcodec_cuda_resident_create(wc_container *c, const char *const *names, size_t n, int gpu,
				   unsigned flags, wcodec_cuda_resident **out);

/* Enqueue the decode of every tensor of r into device_dst (device memory of
 * r's GPU, 256-byte aligned, dst_bytes >= out_bytes) on `stream` (NULL:
 * the legacy default stream) and return without waiting: the bytes are in
 * place once the work queued on the stream so far has run. The first
 * decode into an address not among the last four used uploads the
 * descriptors for it and waits for the stream; later ones only launch
 * kernels. Decodes on several streams may overlap, each into its own
 * destination. Each rANS chunk's stream checks (docs/FORMAT.md 4) run on
 * the device; a failure is recorded for wcodec_cuda_resident_check().
 * Errors: WC_E_INVAL (alignment), WC_E_RANGE (dst_bytes), WC_E_BACKEND (a
 * launch or copy failed). */
wc_err wcodec_cuda_resident_decode(wcodec_cuda_resident *r, void *device_dst, size_t dst_bytes,
				   cudaStream_t stream);

/* As wcodec_cuda_resident_decode, with the work buffer (shared tiles and
 * plane scratch, wcodec_cuda_resident_work_bytes() bytes; 16-byte aligned;
 * NULL: one of r's own per destination) given by the caller: sets whose
 * decodes never run at once can share one, instead of holding up to 64 MiB
 * each per destination (lossy codes). Errors: as
 * wcodec_cuda_resident_decode's; WC_E_RANGE (work_bytes). */
wc_err wcodec_cuda_resident_decode_work(wcodec_cuda_resident *r, void *device_dst, size_t dst_bytes, void *work,
					size_t work_bytes, cudaStream_t stream);
size_t wcodec_cuda_resident_work_bytes(const wcodec_cuda_resident *r);

/* WC_OK, or WC_E_CORRUPT naming the tensor and tile when a completed decode
 * failed a device stream check (whose output must then not be used). Reads
 * page-locked host memory the kernels write: synchronize the decode's
 * stream first to cover it. */
wc_err wcodec_cuda_resident_check(const wcodec_cuda_resident *r);

/* Bytes of the decode buffer; tensor k's offset in it (UINT64_MAX for k out
 * of range); device bytes r holds. */
uint64_t wcodec_cuda_resident_out_bytes(const wcodec_cuda_resident *r);
uint64_t wcodec_cuda_resident_offset(const wcodec_cuda_resident *r, size_t k);
size_t wcodec_cuda_resident_device_bytes(const wcodec_cuda_resident *r);

/* Wait for r's decodes in flight and free it (NULL: nothing). */
void wcodec_cuda_resident_free(wcodec_cuda_resident *r);

/* ---- units: resident sets decoded ahead of their use -------------------
 * A model run unit by unit (a transformer's blocks, or their attention and
 * MLP halves): each unit is one or more resident sets decoded together
 * into one of two scratch buffers. A unit's begin makes its weights ready
 * on the caller's stream (waiting on an event for a decode done ahead, or
 * decoding now), then decodes the unit expected next (the one that began
 * after this one last time, or as set) into the other buffer on a stream
 * of the schedule's own, after that buffer's last reader's end. No host
 * waits; a few event calls and launches per unit. Not for CUDA graph
 * capture (the stream of decodes ahead is not joined to a capture). */
typedef struct wcodec_cuda_units wcodec_cuda_units;

/* A schedule over two scratch buffers of device memory on `gpu` (256-byte
 * aligned; bytes0 >= bytes1 is usual), which stay the caller's and must
 * outlive it. Errors: WC_E_INVAL (alignment), WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcodec_cuda_units_create(int gpu, void *buf0, size_t bytes0, void *buf1, size_t bytes1,
				wcodec_cuda_units **out);

/* Add a unit: sets[0..n) of the schedule's GPU, set k decoded at byte
 * offsets[k] (256-byte aligned) of a buffer; its bytes are the largest
 * offsets[k] + out_bytes. The sets stay the caller's and must outlive the
 * schedule. *id: the unit's number (0, 1, ... in the order added).
 * Errors: WC_E_INVAL (GPU, alignment), WC_E_NOMEM. */
wc_err wcodec_cuda_units_add(wcodec_cuda_units *s, wcodec_cuda_resident *const *sets, const uint64_t *offsets,
			     size_t n, uint32_t *id);

/* The unit expected after unit id (UINT32_MAX: none), until begin learns
 * otherwise. Errors: WC_E_RANGE. */
wc_err wcodec_cuda_units_set_next(wcodec_cuda_units *s, uint32_t id, uint32_t next);

/* Unit id is about to run on `stream`: its weights are in buffer *buffer
 * (0 or 1) once the work queued on the stream so far has run. *buffer is
 * -1 when no buffer that holds the unit is free (units nested, or larger
 * than both): the caller decodes it with wcodec_cuda_resident_decode into
 * a buffer of its own on the stream. Call wcodec_cuda_units_end(s, id)
 * after the work that reads the weights is queued. Errors: WC_E_RANGE,
 * wcodec_cuda_resident_decode's. */
wc_err wcodec_cuda_units_begin(wcodec_cuda_units *s, uint32_t id, cudaStream_t stream, int *buffer);

/* Unit id's readers are queued on the stream its begin was given: its
 * buffer is free once they have run. Errors: WC_E_RANGE, WC_E_BACKEND. */
wc_err wcodec_cuda_units_end(wcodec_cuda_units *s, uint32_t id);

/* Units decoded (now or ahead) and units whose decode ahead was used;
 * device bytes the schedule holds (two work buffers that its units' sets
 * share, made at the first begin). */
void wcodec_cuda_units_counts(wcodec_cuda_units *s, uint64_t *decoded, uint64_t *ahead);
size_t wcodec_cuda_units_device_bytes(wcodec_cuda_units *s);

/* Wait for the schedule's decodes and events and free it (NULL: nothing). */
void wcodec_cuda_units_free(wcodec_cuda_units *s);

/* Page-locked host memory for tile buffers (payloads and decoded tiles):
 * the backend DMAs straight to and from such buffers instead of staging
 * them through its own pinned buffers, which saves two memory copies per
 * tile (docs/BENCHMARKS.md: 41 GB/s instead of 34 on an H200 host).
 * Any page-locked memory works the same (cudaHostAlloc, cudaHostRegister).
 * Returns NULL when no GPU is usable or the allocation fails. */
void *wcodec_cuda_host_alloc(size_t bytes);
void wcodec_cuda_host_free(void *p);

/* The plugin's backend constructor (WC_CUDA_PLUGIN_SYMBOL, see backend.h):
 * opts->gpu selects the device, opts->gpu_memory_limit bounds the device
 * bytes it allocates (0: 320 MiB), opts->threads bounds its host copy/hash
 * threads. Errors: WC_E_BACKEND with a reason when no driver or device is
 * usable, WC_E_NOMEM. */
wc_err wcodec_cuda_backend_create_v5(const wc_backend_opts *opts, wc_backend **out);

/* k-means' nearest-entry search of the .qvq encoder on GPU gpu: for each
 * of n vectors of dim bytes at points (host memory), out[i] = the index of
 * the nearest of the k entries of dim bytes at codebook (host memory,
 * 1 <= k <= 65536) by squared Euclidean distance, the lowest index on
 * ties: exactly the CPU search's answer (src/qvq/kmeans.c). Errors:
 * WC_E_UNSUPPORTED (dim not a multiple of 4 in [4, 16], k out of range),
 * WC_E_BACKEND (a CUDA call failed; out may hold anything), WC_E_NOMEM. */
typedef wc_err (*wcodec_cuda_vq_nearest_fn)(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim,
					    const uint8_t *points, uint64_t n, uint16_t *out);
wc_err wcodec_cuda_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			      uint64_t n, uint16_t *out);

/* .qvq images decoded on the GPU straight into device memory, for
 * libwcodec's image reader (wc_image_set_decode_device, loader/images.h),
 * which finds it with wc_backend_symbol: decode the image tiles jobs[0..n)
 * (WC_JOB_VQ jobs, src/qvq/qvq_job.h, payloads in host memory with their
 * chash checked) on be's GPU and write the images named by dsts[0..ndst)
 * (wc_qvq_image_dst records: job, image within it, device address, CHW or
 * HWC) where they say; only a status per job comes back. Integrity: each
 * rANS stream's checks on the device and every index against the codebook
 * (the decoded bytes are not hashed, as for wcodec_cuda_load). Sets every
 * job's status (WC_E_CORRUPT for a failed check). stream: a cudaStream_t
 * or NULL; the work follows what it holds, and the call returns once the
 * images are written. Errors: WC_E_INVAL (be not this plugin's backend),
 * WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcodec_cuda_vq_place(wc_backend *be, wc_tile_job *jobs, size_t n, const void *dsts, size_t ndst,
			    void *stream);

/* A transform-mode .qvq archive (docs/FORMAT.md 6.8) resident in the
 * memory of be's GPU, for libwcodec's image reader (wc_image_set_resident,
 * loader/images.h), which finds these with wc_backend_symbol: create copies
 * the payloads of its tiles jobs[0..n) (WC_JOB_TX jobs, every tile of one
 * archive, payloads in host memory with their chash checked; its images of
 * one size) to the device and parses every image once; *out is the handle.
 * Errors: WC_E_UNSUPPORTED (images of several sizes), WC_E_RANGE (payloads
 * past max_bytes, or past the GPU's free memory), WC_E_CORRUPT,
 * WC_E_BACKEND, WC_E_NOMEM, WC_E_INVAL (be not this plugin's backend). */
wc_err wcodec_cuda_tx_resident_create(wc_backend *be, wc_tile_job *jobs, size_t n, uint64_t max_bytes, void **out);
/* Launch the decode of images idx[0..n) (int64 image numbers in device
 * memory) into out (device memory, place k at out + k * out_stride bytes;
 * chw: three planes, else rows of RGB; f32: floats value * scale[c] +
 * bias[c], each operation rounded on its own) with kernel launches alone,
 * after the work on `stream` (a cudaStream_t, NULL the default stream) and
 * before its later work. *ticket names the batch for
 * wcodec_cuda_tx_resident_wait, which reads its statuses back (one
 * synchronisation) and must come before its pixels are used. Two batches
 * may be in flight: the next can be launched before the last is waited
 * for. Errors: WC_E_INVAL (n 0, two batches in flight), WC_E_BACKEND,
 * WC_E_NOMEM. */
wc_err wcodec_cuda_tx_resident_launch(void *r, const int64_t *idx, size_t n, int chw, int f32, const float scale[3],
				      const float bias[3], void *out, size_t out_stride, void *stream, uint64_t *ticket);
/* Wait for batch `ticket`. Errors: WC_E_RANGE (an image number past the
 * archive), WC_E_CORRUPT (its pixels are not to be used), WC_E_INVAL (no
 * such batch in flight), WC_E_BACKEND. */
wc_err wcodec_cuda_tx_resident_wait(void *r, uint64_t ticket);
void wcodec_cuda_tx_resident_free(void *r);

#ifdef __cplusplus
}
#endif

#endif /* WCODEC_CUDA_H */
