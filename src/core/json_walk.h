/* json_walk.h - reading a large JSON object one member at a time.
 *
 * A safetensors header or a .wcodec metadata block of thousands of tensors
 * is a JSON object whose members (or one array member's elements) are small:
 * parsed whole by jansson, its tree takes ten to twenty times the text (30
 * MiB for the 8,317 tensors of a 3 MiB header), held at once. The walker
 * parses one member value (or one array element) at a time with jansson
 * (json_loadb with JSON_DISABLE_EOF_CHECK, which stops after one value and
 * reports the bytes it read), hands it to a callback and frees it, so a
 * reader holds one member's tree at a time. The document must be one JSON
 * object (RFC 8259) and nothing after it but whitespace; keys must be unique
 * (as JSON_REJECT_DUPLICATES); values are decoded as jansson decodes them.
 */
#ifndef WC_JSON_WALK_H
#define WC_JSON_WALK_H

#include <stddef.h>

#include <jansson.h>

#include "core/wc_error.h"

/* The longest text of one member value or array element the walker
 * parses (its tree is held at once): 4 MiB. */
#define WC_JSON_VALUE_MAX (4u << 20)

/* Called with each member's key (NUL-terminated UTF-8) and value (freed
 * after the call; json_incref to keep it). Return WC_OK to go on. */
typedef wc_err (*wc_json_member_fn)(void *ctx, const char *key, json_t *value);
/* Called with each element of the array member named array_key, in order. */
typedef wc_err (*wc_json_element_fn)(void *ctx, size_t index, json_t *value);

/* Walk the JSON object in text[0..len): member_fn for each member, except
 * that the member named array_key (if array_key is not NULL) must be an
 * array (or null: no elements), whose elements go to element_fn one at a
 * time. `what` names the
 * document in reasons ("safetensors: header"). Errors: WC_E_FORMAT ("<what>
 * is not valid JSON: <reason> at byte N", "<what>: the JSON is not an object",
 * "<what>: duplicate key \"K\"", "<what>: \"K\" is not an array"),
 * WC_E_RANGE (a value longer than WC_JSON_VALUE_MAX), WC_E_NOMEM, and
 * whatever a callback returns (its reason kept). */
wc_err wc_json_walk_object(const char *text, size_t len, const char *what, wc_json_member_fn member_fn,
			   const char *array_key, wc_json_element_fn element_fn, void *ctx);

#endif /* WC_JSON_WALK_H */
