/* s3_config.h - where and as whom S3 requests go, found the way boto3 and
 * the AWS CLI find it (their "Configuration and credential file settings"
 * and "Environment variables" documentation):
 *   profile:     $AWS_PROFILE, else "default";
 *   credentials: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (with
 *                $AWS_SESSION_TOKEN), else the profile's aws_access_key_id,
 *                aws_secret_access_key and aws_session_token in the shared
 *                credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
 *                ~/.aws/credentials; section [NAME]), else in the config
 *                file ($AWS_CONFIG_FILE, else ~/.aws/config; section
 *                [default] or [profile NAME]); none: unsigned requests;
 *   region:      $AWS_REGION, $AWS_DEFAULT_REGION, the profile's region,
 *                else us-east-1;
 *   endpoint:    $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, the profile's
 *                endpoint_url, else AWS's (virtual-hosted addresses,
 *                https://BUCKET.s3.REGION.amazonaws.com/KEY); a custom
 *                endpoint gets path-style addresses (ENDPOINT/BUCKET/KEY);
 *   CA bundle:   $AWS_CA_BUNDLE, the profile's ca_bundle, else libcurl's
 *                (the system's certificates);
 *   attempts:    $AWS_MAX_ATTEMPTS, the profile's max_attempts (boto3's
 *                words: attempts per request, the first one included),
 *                else 8 (1 to 100).
 * The files are INI files, read with libinih. Secrets stay in this
 * structure: no message or log line contains them. Not installed. */
#ifndef WC_S3_CONFIG_H
#define WC_S3_CONFIG_H

#include "core/wc_error.h"

typedef struct wc_s3_config {
	char profile[128];
	char key_id[256], secret[256], token[4096]; /* empty: not set */
	char region[64];
	char endpoint[512]; /* without a trailing slash; empty: AWS's */
	char ca_bundle[1024]; /* a PEM file of trusted certificates; empty: libcurl's default */
	int max_attempts;     /* attempts per request, retries included (1..100) */
} wc_s3_config;

#define WC_S3_MAX_ATTEMPTS_DEFAULT 8

/* Fill c from the environment and the files above. Errors: WC_E_INVAL (a
 * value too long for its field, an endpoint that is not http:// or
 * https://, only one of the key id and the secret, max_attempts not a
 * number from 1 to 100), naming the setting and
 * never its value. A missing file is no error; an unreadable one is
 * WC_E_IO. */
wc_err wc_s3_config_load(wc_s3_config *c);

/* The request URL of object KEY of BUCKET (the key percent-encoded but for
 * '/', RFC 3986's unreserved characters kept), malloc'ed into *url.
 * Errors: WC_E_NOMEM. */
wc_err wc_s3_object_url(const wc_s3_config *c, const char *bucket, const char *key, char **url);

/* s percent-encoded for a query string value (RFC 3986: all but the
 * unreserved characters, '/' too, as SigV4's canonical query wants),
 * malloc'ed; NULL when out of memory. */
char *wc_s3_query_encode(const char *s);

#endif /* WC_S3_CONFIG_H */
