/*
 * images.h - the images of a .qvq archive (docs/FORMAT.md section 6) read
 * into a caller's memory: the library half of wcodec.torch.load_images and
 * wcodec.torch.QVQDataset (python/wcodec/images.py).
 *
 * An archive holds N RGB images (uint8, 3 channels, row-major: height x
 * width x 3 bytes each, "HWC"), grouped into tiles; a tile decodes to the
 * pixels of its images back to back. Reading image i decodes its tile (and
 * only the tiles the requested images lie in, each once per call); every
 * payload is checked against its XXH3-64 before decoding and every decoded
 * tile after, so a damaged tile is an error, never wrong pixels.
 *
 * Decoding runs on a decode backend (engine/backend.h): "cpu" (every core
 * the process may use), "cuda" (codebook mode: the GPU gathers the patches,
 * the pixels coming back to host memory; transform mode: the CPU decodes
 * for host memory, the GPU for device memory), or "auto" (CUDA where
 * usable).
 */
#ifndef WC_LOADER_IMAGES_H
#define WC_LOADER_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wc_image_set wc_image_set;

/* One image. */
typedef struct wc_image_info {
	uint32_t width;    /* pixels */
	uint32_t height;   /* pixels */
	uint32_t channels; /* bytes per pixel: 3 (RGB) */
	int32_t label;     /* index into the label names, -1 for none */
	uint32_t tile;     /* the tile holding its pixels */
	uint32_t reserved; /* 0 */
	uint64_t tile_off; /* offset of its first byte in that tile's decoded bytes */
} wc_image_info;

/* Open the archive at path (validated as wc_qvq_open does: every section's
 * bounds and checksum, names, tables) with a decode backend ("auto", "cpu",
 * "cuda"; "cuda:N" and "auto:N" for GPU N, default 0; threads: CPU decode
 * threads, 0 for every usable CPU). Errors: WC_E_INVAL (a backend name
 * other than these), those of opening the archive (WC_E_IO, WC_E_FORMAT,
 * WC_E_CORRUPT, WC_E_UNSUPPORTED, WC_E_RANGE), of creating the backend
 * (WC_E_BACKEND for "cuda" without a usable GPU N), WC_E_NOMEM; each with a
 * reason. */
wc_err wc_image_set_open(const char *path, const char *backend, unsigned threads, wc_image_set **out);
void wc_image_set_close(wc_image_set *s);

/* Images and tiles of the archive; the backend's name ("cpu", "cuda"). */
uint32_t wc_image_set_count(const wc_image_set *s);
uint32_t wc_image_set_ntiles(const wc_image_set *s);
const char *wc_image_set_backend(const wc_image_set *s);

/* Image i's geometry, label and place. Errors: WC_E_RANGE (i >= count). */
wc_err wc_image_set_info(const wc_image_set *s, uint32_t i, wc_image_info *out);
/* Image i's relative path as packed (NUL-terminated UTF-8), NULL if out of range. */
const char *wc_image_set_name(const wc_image_set *s, uint32_t i);
/* The label names: nlabels of them; name l, NULL if out of range. */
uint32_t wc_image_set_nlabels(const wc_image_set *s);
const char *wc_image_set_label(const wc_image_set *s, uint32_t l);
/* Decoded bytes of tile t (0 if out of range). */
uint64_t wc_image_set_tile_bytes(const wc_image_set *s, uint32_t t);

/* How wc_image_set_decode lays an image out: HWC (row-major pixels of 3
 * bytes, as decoded) or CHW (three planes of width * height bytes, as
 * torch's NCHW batches want them). */
typedef enum wc_image_layout { WC_IMAGE_HWC = 0, WC_IMAGE_CHW = 1 } wc_image_layout;

/* Decode images idx[0..n) into dst[k] (host memory, width * height * 3
 * bytes each, laid out as `layout` says). Each tile they lie in is read,
 * checked and decoded once, in batches of at most 64 MiB of decoded bytes. Errors: WC_E_RANGE
 * (an index >= count), WC_E_IO, WC_E_CORRUPT (a damaged tile: the reason
 * names the archive, the tile and its first image), WC_E_BACKEND,
 * WC_E_NOMEM. Safe to call from several threads on one set. */
wc_err wc_image_set_decode(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
			   uint8_t *const *dst);

/* As wc_image_set_decode, into device memory: dst[k] are device addresses
 * (of the GPU the set's backend uses) and the images are written there by
 * the GPU, nothing but a status per tile coming back (the CUDA plugin's
 * wcodec_cuda_vq_place): payloads read and checked against their XXH3-64
 * here, the rANS streams' checks and every index against the codebook on
 * the device (decoded bytes are not hashed, as for the GPU checkpoint
 * loader). stream: a cudaStream_t the writes are ordered after (NULL: the
 * default stream); the call returns once the images are written.
 * Errors: WC_E_UNSUPPORTED (the set's backend is not "cuda"), and those of
 * wc_image_set_decode. */
wc_err wc_image_set_decode_device(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
				  void *const *dst, void *stream);

/* As wc_image_set_decode_device, as float32 pixels normalised in the same
 * pass: dst[k] holds width * height * 3 floats (width * height * 12
 * bytes), channel c's value v written as v * scale[c] + bias[c] with the
 * multiply and the add each rounded to float32 (no fused multiply-add), so
 * the result equals torch's `x.float() * scale + bias` bit for bit. For
 * pixels in [0, 1] normalised by mean m and standard deviation s:
 * scale = 1 / (255 s), bias = -m / s. Errors: those of
 * wc_image_set_decode_device. */
wc_err wc_image_set_decode_device_f32(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
				      const float scale[3], const float bias[3], void *const *dst, void *stream);

/* Keep a transform-mode archive (docs/FORMAT.md 6.8) in the GPU's memory
 * for wc_image_set_decode_resident: every payload read, checked against its
 * XXH3-64 and copied to the device once, every image parsed once. Needs the
 * "cuda" backend and images of one size; at most max_bytes of payloads.
 * Calling it again is a no-op. Errors: WC_E_UNSUPPORTED (another backend,
 * a codebook-mode archive, images of several sizes), WC_E_RANGE (payloads
 * past max_bytes or the GPU's free memory: read it as before), WC_E_IO,
 * WC_E_CORRUPT (a damaged tile, named), WC_E_BACKEND, WC_E_NOMEM. */
wc_err wc_image_set_resident(wc_image_set *s, uint64_t max_bytes);

/* Images idx[0..n) of a resident set (int64 image numbers in device
 * memory, as a torch tensor holds them) decoded by the GPU into dst (device
 * memory; image k at dst + k * dst_stride bytes, laid out as `layout`
 * says), by kernel launches alone: nothing is read from disk or copied from
 * the host. scale, bias: NULL for bytes; else float32 pixels v * scale[c] +
 * bias[c] as wc_image_set_decode_device_f32 writes them. stream: a
 * cudaStream_t the work follows and the stream's later work waits for
 * (NULL: the default stream); the call returns after one synchronisation,
 * with the images' statuses. Errors: WC_E_INVAL (no resident archive; call
 * wc_image_set_resident), WC_E_RANGE (an image number past the archive),
 * WC_E_CORRUPT, WC_E_BACKEND, WC_E_NOMEM. Calls on one set take turns. */
wc_err wc_image_set_decode_resident(wc_image_set *s, const int64_t *idx, size_t n, wc_image_layout layout,
				    const float *scale, const float *bias, void *dst, size_t dst_stride, void *stream);

/* wc_image_set_decode_resident in two halves, so that the GPU has the next
 * batch queued while the caller takes the last: _start launches the batch
 * (n >= 1; the arguments as above) and names it in *ticket; _finish waits
 * for it (the one synchronisation) and gives its errors. A batch's pixels
 * are not to be used before its _finish returns WC_OK. At most two batches
 * are in flight: a third _start before a _finish is WC_E_INVAL. Errors:
 * _start: WC_E_INVAL (no resident archive, n 0, two in flight),
 * WC_E_BACKEND, WC_E_NOMEM; _finish: WC_E_RANGE, WC_E_CORRUPT, WC_E_INVAL
 * (no such batch in flight), WC_E_BACKEND. */
wc_err wc_image_set_decode_resident_start(wc_image_set *s, const int64_t *idx, size_t n, wc_image_layout layout,
					  const float *scale, const float *bias, void *dst, size_t dst_stride, void *stream,
					  uint64_t *ticket);
wc_err wc_image_set_decode_resident_finish(wc_image_set *s, uint64_t ticket);

#ifdef __cplusplus
}
#endif

#endif /* WC_LOADER_IMAGES_H */
