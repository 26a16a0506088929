/* lib/hash/job.h - a hashing batch as both backends see it (internal). */
#ifndef ACCEL_HASH_JOB_H
#define ACCEL_HASH_JOB_H

#include "hash/hashes.h"
#include "io/decode.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum accel__hash_source { ACCEL__SRC_FILES, ACCEL__SRC_BUFFERS, ACCEL__SRC_ARRAYS } accel__hash_source;

typedef struct accel__hash_job {
  accel__hash_source source;
  size_t n;
  const char *const *paths;
  const void *const *data;
  const size_t *sizes;
  const accel_array *arrays;
  /* [n] or NULL: arrays[i] is device memory (accel_array_on_device, plain
   * dtype, contiguous). Only the GPU's loader looks: a CPU run gets host
   * copies of them in arrays[i].data. */
  const bool *on_device;
  accel__hash_spec spec;
  accel__decode_options decode;
  uint8_t *hashes;        /* [n][nkinds][slot_bytes] */
  accel_status *statuses; /* [n] */
  char **messages;        /* [n]: NULL or a malloc'd message for a failed input */
  accel_progress_fn progress;
  void *progress_user;
} accel__hash_job;

/* One decoded input, ready to hash: Pillow's gray plane (w x h, packed)
 * and, with colorhash, its colour counts. With want_rgb, colour images keep
 * an RGB plane instead (rgb != NULL, gray == NULL, no counts): the GPU
 * converts and counts. Gray modes always come as a gray plane. */
typedef struct accel__hash_image {
  int64_t w, h;
  uint8_t *gray;
  uint8_t *rgb;
  bool have_color; /* color holds the counts */
  accel__color_counts color;
  /* A device array input (the GPU's loader only): its pixels, contiguous
   * (h, w, channels), left where they are (gray and rgb stay NULL); the
   * GPU converts them as the CPU converts an array (L, LA, RGB, RGBA). */
  const uint8_t *device;
  int32_t channels;
} accel__hash_image;

accel_status accel__hash_load(const accel__hash_job *job, size_t i, bool want_rgb, accel__hash_image *img, char *why);
/* The same without a gray plane: the rows go to `rows` (the thread's,
 * planned with its axis cache) band by band as they are decoded, and the
 * image's gray is a band buffer; finish with accel__hash_rows_finish. */
struct accel__axis_cache;
accel_status accel__hash_load_fused(const accel__hash_job *job, size_t i, struct accel__axis_cache *cache,
                                    accel__hash_image *img, accel__hash_rows *rows, char *why);
void accel__hash_image_free(accel__hash_image *img);
/* Inputs [from, to) decoded on `threads` threads into img[0 .. to-from);
 * failures recorded in the job (their img stays empty). */
void accel__hash_load_range(accel__hash_job *job, size_t from, size_t to, bool want_rgb, accel__hash_image *img,
                            int threads);

/* Record input i's outcome: the status, a copy of the message on failure
 * (its hash slots stay zero). */
/* Pillow's HSV saturation from the 64 KB table the CPU colorhash uses (the
 * GPU computes it with accel__rgb_to_hs; a test checks they agree). */
uint8_t accel__saturation(unsigned r, unsigned g, unsigned b);

void accel__hash_record(accel__hash_job *job, size_t i, accel_status status, const char *why);
uint8_t *accel__hash_slots(const accel__hash_job *job, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* ACCEL_HASH_JOB_H */
