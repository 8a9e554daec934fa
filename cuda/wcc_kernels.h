/*
 * wcc_kernels.h - the work descriptors the host builds for one batch of
 * tiles and the launchers of the CUDA kernels that consume them
 * (wcc_kernels.cu). Plain C so the host side of the plugin is C11.
 *
 * A batch is decoded in two launches:
 *   1. wcc_launch_rans: one warp per rANS chunk (docs/FORMAT.md section 4).
 *      Chunks are grouped into blocks that share one frequency table; a
 *      block builds that table's 4096-entry decoding table in shared memory
 *      from the stored frequencies, then each warp decodes its chunks with
 *      the 32 lane states in registers and checks them (final states, words
 *      consumed, no read outside the chunk). A failing chunk sets
 *      status[chunk.job] to non-zero.
 *   2. wcc_launch_merge: merges each tile's planes (rANS output, RAW bodies
 *      read in place from the uploaded payload, CONST values) into tensor
 *      bytes (docs/FORMAT.md section 2), in segments of WCC_MERGE_SEG
 *      elements.
 * All pointers in descriptors are device addresses.
 */
#ifndef WCC_KERNELS_H
#define WCC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Warps per rANS block; a block decodes at most this many chunks (one each). */
#define WCC_RANS_WARPS 8u
/* Elements per merge segment (one block of 256 threads, 4 elements each, 16 iterations). */
#define WCC_MERGE_SEG 16384u

/* One rANS chunk: state[32], u16 words, optional u16 pad (FORMAT.md 4). */
typedef struct wcc_chunk {
	const uint8_t *in; /* first byte of the chunk (state[0]); 4-byte aligned */
	uint8_t *out;      /* where symbol 0 of the chunk goes; 16-byte aligned. Fused:
			    * the tensor bytes of the chunk's first element */
	uint32_t in_bytes; /* chunk bytes: >= 128, multiple of 4 (host-checked) */
	uint32_t nsym;     /* symbols in the chunk: 1 .. chunk_symbols */
	uint32_t job;      /* index into the batch's status array */
	uint32_t fuse;     /* 0, or WCC_FUSE(tile, plane): the warp merges its symbols
			    * (plane `plane` of merge tile `tile`) with the tile's other,
			    * RAW or CONST, planes and writes tensor bytes directly */
} wcc_chunk;

#define WCC_FUSE(tile, plane) (((uint32_t)(tile) + 1u) | ((uint32_t)(plane) << 28))

/* A group of up to WCC_RANS_WARPS chunks sharing frequency table `table`. */
typedef struct wcc_rans_block {
	uint32_t first;  /* index of its first chunk in the chunk array */
	uint32_t count;  /* chunks, 1 .. WCC_RANS_WARPS */
	uint32_t table;  /* slot in the device frequency-table array */
	uint32_t pad;
} wcc_rans_block;

/* Merge tile kind of a lossy tile (docs/FORMAT.md 2.2): its int8 codes
 * dequantized, element e of the tensor to (float)code * scale, rounded to
 * the tensor's dtype (src/codec/lossy.h defines it bit for bit). */
#define WCC_KIND_LOSSY 0x80u

typedef struct wcc_lossy_tile {
	const int8_t *codes;  /* the tile's n codes */
	const float *scales;  /* scales [scale_base, ...) of the tensor */
	uint32_t first;       /* the tile's first element within the tensor */
	uint32_t per;         /* elements per output channel (N / C) */
	uint32_t channels;    /* C */
	uint32_t group;       /* elements per scale within a channel (per when one per channel) */
	uint32_t groups;      /* scales per channel: ceil(per / group) */
	uint32_t scale_base;  /* index of scales[0] in the tensor's scales */
	uint8_t axis;         /* 0: channels are the first axis; 1: the last */
	uint8_t dtype;        /* wc_lossy_dtype: 0 F32, 1 BF16, 2 F16 */
} wcc_lossy_tile;

/* One tile to merge: planes -> tensor bytes. */
typedef struct wcc_merge_tile {
	union {
		const uint8_t *src[8]; /* plane k's n bytes (a PACK plane's body when
					* bits[k]); NULL = CONST plane with value[k] */
		wcc_lossy_tile lossy;  /* kind WCC_KIND_LOSSY */
	};
	uint8_t *out;          /* n * elem_size bytes */
	uint32_t n;            /* elements */
	uint8_t kind;          /* wc_layout_kind, or WCC_KIND_LOSSY */
	uint8_t elem_size;     /* 1, 2, 4, 8 */
	uint8_t nplanes;
	uint8_t pad0;
	uint8_t value[8];      /* CONST bytes */
	uint8_t bits[8];       /* PACK planes: bits a symbol (1, 2, 4), else 0 */
} wcc_merge_tile;

/* A segment [begin, begin + count) of elements of tile `tile`. */
typedef struct wcc_merge_seg {
	uint32_t tile;
	uint32_t begin;
	uint32_t count;
	uint32_t pad;
} wcc_merge_seg;

/* Launchers: return 0 or a cudaError_t value (as int). `stream` is a
 * cudaStream_t. freqs: the device array of frequency tables, 256 uint16
 * each, indexed by wcc_rans_block.table; tiles: the merge tiles fused
 * chunks refer to. */
int wcc_launch_rans(const wcc_rans_block *blocks, uint32_t nblocks, const wcc_chunk *chunks,
		    const uint16_t *freqs, const wcc_merge_tile *tiles, uint32_t *status, void *stream);
/* Benchmarks: which build of the rANS kernel runs (launch bounds of at
 * least N blocks of 8 warps per SM): 0 = the default (4), 1 = 8, 2 = 6, 3 = 3. */
void wcc_set_variant(int v);
int wcc_launch_merge(const wcc_merge_seg *segs, uint32_t nsegs, const wcc_merge_tile *tiles,
		     void *stream);
/* Load the code of the kernels the decode launches (the default rANS build
 * and the merge) on the current device now, not at their first launch (CUDA
 * 12 and later load lazily by default: through the mount the first batches
 * took 18-26 ms each while readers waited, and a load holds a lock the other
 * lanes' launches wait on). Returns 0 or a cudaError_t value (as int). */
int wcc_preload_kernels(void);

#ifdef __cplusplus
}
#endif

#endif /* WCC_KERNELS_H */
