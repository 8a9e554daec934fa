/* tile_decode.c - validating tile payload decoder (docs/FORMAT.md section 3).
 *
 * The tile is produced chunk by chunk, in blocks of BLOCK_ROUNDS rounds (32
 * symbols each): every rANS plane decodes the block into 2 KiB of
 * per-thread scratch and the block is merged into the output at once, so
 * decoded symbols never leave L1 and the 16 KiB decoding table stays there.
 * Planes without chunks (RAW, CONST, ZSTD, PACK) follow the same geometry with
 * PLAIN_CHUNK-symbol virtual chunks. A DICT tile gathers each block from
 * the dictionary instead of merging it. */
#include <zstd.h>

#include "codec/codec_internal.h"
#include "codec/tile_codec.h"

#define BLOCK_ROUNDS 64u
#define BLOCK_SYMS (BLOCK_ROUNDS * WC_RANS_LANES)
#define PLAIN_CHUNK 16384u

typedef struct tile_ctx {
	const wc_freqtab *tables;
	size_t n;                 /* symbols per plane */
	uint32_t chunk_symbols;   /* the file's; chunk geometry when a plane is RANS */
	uint8_t *plane_scratch;   /* n bytes per plane, for whole-plane decoders */
} tile_ctx;

/* State of one plane while the tile decodes. */
typedef struct plane_dec {
	const wc_plane_view *v;
	const uint8_t *src;       /* RAW/ZSTD: the whole plane; PACK: its body */
	size_t n;                 /* PACK: symbols in the plane */
	uint8_t *scratch;         /* BLOCK_SYMS bytes (CONST: the value) */
	const wc_rans_dtab *dt;   /* RANS */
	wc_rans_body body;        /* RANS */
	wc_rans_lanes lanes;      /* RANS: the chunk being decoded */
} plane_dec;

/* prepare: validate and set up a plane before decoding;
 * chunk_begin: start chunk k;
 * block: make the plane's symbols [first, first + 32 * (rend - r0)) of the
 *   current chunk (rounds up to rend) available at *ptr;
 * chunk_end: check the chunk once fully decoded. */
typedef struct plane_ops {
	wc_err (*prepare)(plane_dec *pd, unsigned p, const tile_ctx *t);
	wc_err (*chunk_begin)(plane_dec *pd, size_t k, const tile_ctx *t);
	wc_err (*block)(plane_dec *pd, size_t first, size_t rend, const uint8_t **ptr);
	wc_err (*chunk_end)(plane_dec *pd);
} plane_ops;

static wc_err no_begin(plane_dec *pd, size_t k, const tile_ctx *t)
{
	(void)pd, (void)k, (void)t;
	return WC_OK;
}

static wc_err no_end(plane_dec *pd)
{
	(void)pd;
	return WC_OK;
}

static wc_err raw_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	(void)p, (void)t;
	pd->src = pd->v->body;
	return WC_OK;
}

static wc_err whole_block(plane_dec *pd, size_t first, size_t rend, const uint8_t **ptr)
{
	(void)rend;
	*ptr = pd->src + first;
	return WC_OK;
}

static wc_err const_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	(void)p, (void)t;
	memset(pd->scratch, pd->v->value, BLOCK_SYMS);
	return WC_OK;
}

static wc_err const_block(plane_dec *pd, size_t first, size_t rend, const uint8_t **ptr)
{
	(void)first, (void)rend;
	*ptr = pd->scratch;
	return WC_OK;
}

static wc_err rans_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	const wc_freqtab *ft = &t->tables[pd->v->table];
	if (wc_freq_validate(ft) != WC_OK)
		return wc_fail_context(WC_E_CORRUPT, "table %u", pd->v->table);
	pd->dt = wc_dtab_cached(ft, p);
	if (!pd->dt)
		return wc_fail(WC_E_NOMEM, "no memory for a decoding table");
	return wc_rans_body_parse(pd->v->body, pd->v->size, t->n, t->chunk_symbols, &pd->body);
}

static wc_err rans_chunk_begin(plane_dec *pd, size_t k, const tile_ctx *t)
{
	wc_err e = wc_rans_lanes_init(&pd->lanes, &pd->body, k, t->chunk_symbols, t->n);
	pd->lanes.out = pd->scratch;
	return e;
}

static wc_err rans_block(plane_dec *pd, size_t first, size_t rend, const uint8_t **ptr)
{
	(void)first; /* advance_rans_pairs() set lanes.rbase */
	*ptr = pd->scratch;
	return wc_rans_lanes_decode(&pd->lanes, pd->dt, rend);
}

static wc_err rans_chunk_end(plane_dec *pd) { return wc_rans_lanes_end(&pd->lanes); }

static wc_err zstd_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	const wc_plane_view *v = pd->v;
	unsigned long long csize = ZSTD_getFrameContentSize(v->body, v->size);
	if (csize != t->n)
		return wc_fail(WC_E_CORRUPT, "zstd frame content size %llu, plane has %zu bytes", csize, t->n);
	size_t fsize = ZSTD_findFrameCompressedSize(v->body, v->size);
	if (ZSTD_isError(fsize) || fsize != v->size)
		return wc_fail(WC_E_CORRUPT, "zstd body of %u bytes is not exactly one frame", v->size);
	ZSTD_DCtx *dctx = wc_zstd_dctx();
	if (!dctx)
		return wc_fail(WC_E_NOMEM, "no memory for a zstd context");
	uint8_t *dst = t->plane_scratch + p * t->n;
	size_t got = ZSTD_decompressDCtx(dctx, dst, t->n, v->body, v->size);
	if (ZSTD_isError(got) || got != t->n)
		return wc_fail(WC_E_CORRUPT, "zstd: %s", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
	pd->src = dst;
	return WC_OK;
}

/* The body's size and bits were checked by wc_tile_parse; the last byte's
 * bits past the plane's end must be 0, so that a plane has one body. */
static wc_err pack_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	(void)p;
	const wc_plane_view *v = pd->v;
	const size_t used = t->n * v->value % 8;
	if (used && v->body[v->size - 1] >> used)
		return wc_fail(WC_E_CORRUPT, "packed plane: non-zero bits after its %zu symbols", t->n);
	pd->src = v->body;
	pd->n = t->n;
	return WC_OK;
}

/* Symbols from `first` (a multiple of 32, so of 8 / bits) to the block's
 * end or the plane's, unpacked into the block scratch. */
static wc_err pack_block(plane_dec *pd, size_t first, size_t rend, const uint8_t **ptr)
{
	(void)rend;
	const unsigned b = pd->v->value;
	const size_t cnt = pd->n - first < BLOCK_SYMS ? pd->n - first : BLOCK_SYMS;
	wc_unpack_bits(pd->src + first * b / 8, b, cnt, pd->scratch);
	*ptr = pd->scratch;
	return WC_OK;
}

static const plane_ops plane_decoders[WC_PLANE_MODES] = {
	[WC_PLANE_RAW] = {raw_prepare, no_begin, whole_block, no_end},
	[WC_PLANE_CONST] = {const_prepare, no_begin, const_block, no_end},
	[WC_PLANE_RANS] = {rans_prepare, rans_chunk_begin, rans_block, rans_chunk_end},
	[WC_PLANE_ZSTD] = {zstd_prepare, no_begin, whole_block, no_end},
	[WC_PLANE_PACK] = {pack_prepare, no_begin, pack_block, no_end},
};

/* Start a block: rANS planes go in pairs, advanced together towards rend.
 * Their chunks share the tile's geometry, and interleaving two hides part
 * of the latency of each one's chain of table gathers (about 10% faster on
 * a tile whose two BF16 planes are both coded). block() then finishes
 * each plane (the partial last round, bounds-checked steps). */
static void advance_rans_pairs(plane_dec *pd, const wc_plane_view *views, unsigned nplanes, size_t rend)
{
	plane_dec *partner = NULL; /* the previous rANS plane still unpaired */
	for (unsigned p = 0; p < nplanes; p++) {
		if (views[p].mode != WC_PLANE_RANS)
			continue;
		pd[p].lanes.rbase = pd[p].lanes.r; /* the block starts at the scratch's start */
		if (partner) {
			wc_rans_lanes_advance2(&partner->lanes, partner->dt, rend, &pd[p].lanes, pd[p].dt, rend);
			partner = NULL;
		} else {
			partner = &pd[p];
		}
	}
}

#define PLANE_CALL(op, ...)                                                      \
	do {                                                                     \
		for (unsigned p_ = 0; p_ < l.nplanes; p_++) {                    \
			wc_err e_ = plane_decoders[views[p_].mode].op(__VA_ARGS__); \
			if (e_ != WC_OK)                                         \
				return wc_fail_context(e_, "tile plane %u", p_); \
		}                                                                \
	} while (0)

wc_err wc_tile_decode(wc_layout l, const uint8_t *payload, size_t payload_len,
		      const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
		      uint8_t *out, size_t nbytes)
{
	return wc_tile_decode_dict(l, payload, payload_len, tables, ntables, chunk_symbols, NULL, 0, out, nbytes);
}

wc_err wc_tile_decode_dict(wc_layout l, const uint8_t *payload, size_t payload_len,
			   const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
			   const uint8_t *dict, uint32_t dict_entries, uint8_t *out, size_t nbytes)
{
	return wc_tile_decode_part(l, payload, payload_len, tables, ntables, chunk_symbols, dict, dict_entries,
				   out, nbytes, 0, 1);
}

wc_err wc_tile_decode_part(wc_layout l, const uint8_t *payload, size_t payload_len,
			   const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
			   const uint8_t *dict, uint32_t dict_entries, uint8_t *out, size_t nbytes,
			   unsigned part, unsigned nparts)
{
	if (nparts == 0 || part >= nparts)
		return wc_fail(WC_E_INVAL, "tile: part %u of %u", part, nparts);
	if (l.kind == WC_LAYOUT_DICT) {
		if (!dict || dict_entries == 0 || dict_entries > WC_DICT_MAX_ENTRIES ||
		    l.nplanes != (dict_entries <= 256 ? 1 : 2))
			return wc_fail(WC_E_CORRUPT, "tile: dict layout of %u planes without a fitting dictionary (%u entries)",
				       l.nplanes, dict_entries);
	} else if (dict) {
		return wc_fail(WC_E_CORRUPT, "tile: a dictionary given for layout %s", wc_layout_name(l));
	}
	wc_plane_view views[WC_MAX_PLANES];
	wc_err e = wc_tile_parse(l, payload, payload_len, nbytes, ntables, views);
	if (e != WC_OK)
		return e;
	tile_ctx t = {tables, nbytes / l.elem_size, chunk_symbols, NULL};
	int any_rans = 0, any_zstd = 0;
	for (unsigned p = 0; p < l.nplanes; p++) {
		any_rans |= views[p].mode == WC_PLANE_RANS;
		any_zstd |= views[p].mode == WC_PLANE_ZSTD;
	}
	if (any_rans && !wc_rans_chunk_symbols_ok(chunk_symbols))
		return wc_fail(WC_E_CORRUPT, "tile: chunk size %u invalid", chunk_symbols);
	if (any_zstd) { /* a zstd frame decodes whole: part 0 does the tile */
		if (part != 0)
			return WC_OK;
		nparts = 1;
	}
	size_t C = any_rans ? chunk_symbols : PLAIN_CHUNK;
	const size_t nchunks = (t.n + C - 1) / C;
	const size_t k_first = nchunks * part / nparts, k_end = nchunks * (part + 1) / nparts;
	if (k_first == k_end && !(nchunks == 0 && part == 0)) /* part 0 still validates an empty tile */
		return WC_OK;
	if (any_zstd && !(t.plane_scratch = wc_scratch_get(WC_SCRATCH_PLANES, l.nplanes * t.n)))
		return wc_fail(WC_E_NOMEM, "tile: no memory for %zu bytes of planes", nbytes);
	uint8_t *scratch = wc_scratch_get(WC_SCRATCH_BLOCKS, (size_t)l.nplanes * BLOCK_SYMS);
	if (!scratch)
		return wc_fail(WC_E_NOMEM, "tile: no memory for block scratch");

	plane_dec pd[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++)
		pd[p] = (plane_dec){.v = &views[p], .scratch = scratch + (size_t)p * BLOCK_SYMS};
	PLANE_CALL(prepare, &pd[p_], p_, &t);

	for (size_t k = k_first; k < k_end; k++) {
		size_t base = k * C, m = t.n - base < C ? t.n - base : C;
		size_t rounds = (m + WC_RANS_LANES - 1) / WC_RANS_LANES;
		PLANE_CALL(chunk_begin, &pd[p_], k, &t);
		for (size_t r0 = 0; r0 < rounds; r0 += BLOCK_ROUNDS) {
			size_t rend = r0 + BLOCK_ROUNDS < rounds ? r0 + BLOCK_ROUNDS : rounds;
			size_t first = base + r0 * WC_RANS_LANES;
			size_t len = (rend * WC_RANS_LANES < m ? rend * WC_RANS_LANES : m) - r0 * WC_RANS_LANES;
			const uint8_t *ptr[WC_MAX_PLANES];
			advance_rans_pairs(pd, views, l.nplanes, rend);
			PLANE_CALL(block, &pd[p_], first, rend, &ptr[p_]);
			if (!dict)
				wc_planes_merge(l, ptr, len, out + first * l.elem_size);
			else if (wc_dict_gather(l, dict, dict_entries, ptr, len, out + first * l.elem_size))
				return wc_fail(WC_E_CORRUPT, "tile: a dictionary index in elements [%zu, %zu) is "
					       "not below the %u entries", first, first + len, dict_entries);
		}
		PLANE_CALL(chunk_end, &pd[p_]);
	}
	return WC_OK;
}
