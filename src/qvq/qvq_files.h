/*
 * qvq_files.h - the files a .qvq archive shows, for the mount (wcodecfs
 * shows Y.qvq as directory Y/) and `wcodec unpack`, which write the same
 * bytes (docs/FORMAT.md 6.6):
 *
 *   file i < nimages    the image's shown name (qvq_names.h: extension
 *                       replaced by .ppm): a binary PPM, "P6\n<w> <h>\n255\n"
 *                       followed by its w*h*3 RGB bytes;
 *   "images.npy"        only when every image has the same size: one NPY
 *                       1.0 array, dtype |u1, shape (N, H, W, 3), C order,
 *                       header padded to 64 bytes so np.load(mmap_mode='r')
 *                       maps it; its data is the decoded tiles back to back;
 *   "labels.txt"        only when the archive has labels: line i holds image
 *                       i's label (empty line for none), in images.npy order.
 *
 * Sizes are known without decoding and never change.
 */
#ifndef WC_QVQ_FILES_H
#define WC_QVQ_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "qvq/qvq.h"

/* Where decoded tiles come from: the tile cache (mount) or a direct decode.
 * get() returns tile `tile`'s dsize decoded bytes in *data and a handle that
 * put() gives back. */
typedef struct wc_qvq_tile_getter {
	wc_err (*get)(void *ctx, uint32_t tile, const uint8_t **data, void **handle);
	void (*put)(void *ctx, void *handle);
	void *ctx;
} wc_qvq_tile_getter;

/* Number of files shown (nimages, + images.npy, + labels.txt). */
uint32_t wc_qvq_nfiles(const wc_qvq *q);
/* Name relative to the archive directory (may contain '/'), and size in
 * bytes of file f. NULL / 0 if f >= nfiles. */
const char *wc_qvq_file_name(const wc_qvq *q, uint32_t f);
uint64_t wc_qvq_file_size(const wc_qvq *q, uint32_t f);
/* The file showing image i. */
static inline uint32_t wc_qvq_image_file(uint32_t i) { return i; }

/* Where file f's bytes come from: `prefix_len` bytes held in memory
 * (the PPM or NPY header; all of labels.txt), then `data_len` bytes of the
 * decoded tiles back to back, starting at offset `data_voff` of their
 * concatenation (wc_qvq_tile.voff). An image's data lies in one tile. */
typedef struct wc_qvq_file_layout {
	const uint8_t *prefix; /* valid while q lives (PPM: points into ppm_buf) */
	uint32_t prefix_len;
	uint64_t data_voff, data_len;
} wc_qvq_file_layout;

/* Layout of file f (< nfiles); ppm_buf (64 bytes) receives a PPM header and
 * must live as long as the layout is used. Errors: WC_E_NOTFOUND. */
wc_err wc_qvq_file_layout_of(const wc_qvq *q, uint32_t f, char ppm_buf[64],
			     wc_qvq_file_layout *out);

/* The tile holding byte voff of the tiles' concatenation (voff below the
 * total decoded size), by binary search. */
uint32_t wc_qvq_find_tile(const wc_qvq *q, uint64_t voff);

/* Read up to len bytes of file f at offset off into buf; *nread receives the
 * bytes read (short only at the end of the file, 0 past it). Tiles come from
 * getter. Errors: the getter's (WC_E_CORRUPT, WC_E_IO, ...), WC_E_NOTFOUND
 * (no file f). */
wc_err wc_qvq_file_read(const wc_qvq *q, uint32_t f, uint8_t *buf, size_t len, uint64_t off,
			const wc_qvq_tile_getter *getter, size_t *nread);

/* A getter that decodes on the calling thread, keeping the last decoded tile
 * (so reading a tile's images in order decodes it once). Not thread-safe. */
typedef struct wc_qvq_memo {
	const wc_qvq *q;
	uint32_t tile;   /* the tile in buf, or UINT32_MAX */
	uint8_t *buf;
	size_t cap;
} wc_qvq_memo;
void wc_qvq_memo_init(wc_qvq_memo *m, const wc_qvq *q, wc_qvq_tile_getter *getter);
void wc_qvq_memo_free(wc_qvq_memo *m);

#endif /* WC_QVQ_FILES_H */
