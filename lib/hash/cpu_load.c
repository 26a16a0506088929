/* Decoding one input of a batch into what the hashes need, row by row. */
#include "hash/job.h"

#include "image/convert.h"
#include "hash/hash_math.h"
#include "hash/resample.h"
#include "image/pillow.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- colour classes */

/* Pillow's saturation depends only on max(R,G,B) and max - min: a 64 KB
 * table [max][span] of it decides gray / faint / neither / bright; only the
 * saturated pixels need the hue, computed exactly per pixel. */
static uint8_t sat_table[256][256];
static pthread_once_t sat_once = PTHREAD_ONCE_INIT;

static void build_sat_table(void) {
  for (unsigned mx = 0; mx < 256; mx++)
    for (unsigned span = 0; span <= mx; span++) {
      uint8_t hue, sat;
      accel__rgb_to_hs(mx, mx - span, mx - span, &hue, &sat);
      sat_table[mx][span] = sat;
    }
}

uint8_t accel__saturation(unsigned r, unsigned g, unsigned b) {
  pthread_once(&sat_once, build_sat_table);
  const unsigned mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
  const unsigned mn = r < g ? (r < b ? r : b) : (g < b ? g : b);
  return sat_table[mx][mx - mn];
}

static inline void count_pixel(accel__color_counts *c, unsigned r, unsigned g, unsigned b, unsigned l) {
  const unsigned mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
  const unsigned mn = r < g ? (r < b ? r : b) : (g < b ? g : b);
  const int cls = accel__color_class(r, g, b, l, sat_table[mx][mx - mn]);
  c->pixels++;
  if (cls == 0) c->black++;
  else if (cls == 1) c->gray++;
  else {
    c->colors++;
    if (cls >= 9) c->bright[cls - 9]++;
    else if (cls >= 3) c->faint[cls - 3]++;
  }
}

/* ---------------------------------------------------------- the sink */

/* Gray rows handed to the resizes at a time in the fused mode: the band
 * stays in the cache between the colour conversion and the horizontal
 * passes. */
#define BAND_ROWS 128

typedef struct load_ctx {
  const accel__hash_spec *spec;
  bool want_rgb;
  accel__hash_image *img;
  accel__image_header hdr;
  uint8_t *scratch; /* one RGB row */
  /* fused mode (fuse != NULL): no gray plane, the rows go to the resizes band by band */
  accel__hash_rows *fuse;
  accel__axis_cache *cache;
  uint8_t *band; /* BAND_ROWS rows of the image's width */
  int64_t band_y0;
} load_ctx;

static accel_status on_begin(void *user, const accel__image_header *hdr, char *why) {
  load_ctx *c = user;
  c->hdr = *hdr;
  accel__hash_image *img = c->img;
  img->w = hdr->width;
  img->h = hdr->height;
  size_t px = (size_t)hdr->width * (size_t)hdr->height;
  bool gray_mode = accel__mode_is_gray(hdr->mode);
  if (c->want_rgb && !gray_mode) {
    img->rgb = malloc(px * 3);
  } else {
    if (c->fuse) {
      accel_status s = accel__hash_rows_begin(c->spec, hdr->width, hdr->height, c->cache, c->fuse);
      if (s) {
        accel__why(why, "out of memory resizing a %lldx%lld image", (long long)hdr->width, (long long)hdr->height);
        return s;
      }
      img->gray = c->band = malloc((size_t)hdr->width * BAND_ROWS);
      c->band_y0 = 0;
    } else {
      img->gray = malloc(px);
    }
    if (c->spec->need_color && !gray_mode) {
      c->scratch = malloc((size_t)hdr->width * 3);
      pthread_once(&sat_once, build_sat_table);
    }
    img->have_color = c->spec->need_color;
  }
  if ((!img->rgb && !img->gray) || (c->spec->need_color && !gray_mode && !c->want_rgb && !c->scratch)) {
    accel__why(why, "out of memory for a %lldx%lld image", (long long)hdr->width, (long long)hdr->height);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  return ACCEL_OK;
}

static void on_row(void *user, int64_t y, const void *pixels) {
  load_ctx *c = user;
  accel__hash_image *img = c->img;
  const int64_t w = img->w;
  if (img->rgb) {
    accel__row_to_rgb(&c->hdr, pixels, w, img->rgb + (size_t)y * (size_t)w * 3);
    return;
  }
  uint8_t *g = c->band ? c->band + (size_t)(y - c->band_y0) * (size_t)w : img->gray + (size_t)y * (size_t)w;
  accel__row_to_gray(&c->hdr, pixels, w, g);
  if (c->band && (y - c->band_y0 == BAND_ROWS - 1 || y == img->h - 1)) { /* a full band, or the last */
    accel__hash_rows_feed(c->fuse, c->band, w, c->band_y0, y + 1 - c->band_y0);
    c->band_y0 = y + 1;
  }
  if (!img->have_color) return;
  accel__color_counts *cc = &img->color;
  if (accel__mode_is_gray(c->hdr.mode)) { /* R = G = B: saturation 0, so black or gray */
    int64_t black = 0;
    for (int64_t x = 0; x < w; x++) black += g[x] < 256 / 8;
    cc->pixels += (uint64_t)w;
    cc->black += (uint64_t)black;
    cc->gray += (uint64_t)(w - black);
    return;
  }
  accel__row_to_rgb(&c->hdr, pixels, w, c->scratch);
  const uint8_t *p = c->scratch;
  for (int64_t x = 0; x < w; x++) count_pixel(cc, p[3 * x], p[3 * x + 1], p[3 * x + 2], g[x]);
}

/* An array input is an image already in memory: L, LA, RGB or RGBA. */
static accel_status load_array(load_ctx *c, const accel_array *a, char *why) {
  accel__image_header hdr;
  memset(&hdr, 0, sizeof hdr);
  int ch = a->ndim == 2 ? 1 : (int)a->shape[2];
  static const accel__mode modes[5] = {ACCEL__MODE_L, ACCEL__MODE_L, ACCEL__MODE_LA, ACCEL__MODE_RGB, ACCEL__MODE_RGBA};
  hdr.mode = modes[ch];
  hdr.width = a->shape[1];
  hdr.height = a->shape[0];
  accel_status s = on_begin(c, &hdr, why);
  if (s) return s;
  uint8_t *row = malloc((size_t)hdr.width * (size_t)ch);
  if (!row) {
    accel__why(why, "out of memory");
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  accel_array r = *a; /* one row as a (W, C) or (W,) array */
  r.ndim = a->ndim - 1;
  memmove(r.shape, a->shape + 1, sizeof(int64_t) * (size_t)r.ndim);
  memmove(r.strides, a->strides + 1, sizeof(int64_t) * (size_t)r.ndim);
  for (int64_t y = 0; y < hdr.height; y++) {
    r.data = (char *)a->data + y * a->strides[0];
    accel__array_pack(&r, row);
    on_row(c, y, row);
  }
  free(row);
  return ACCEL_OK;
}

static accel_status load(const accel__hash_job *job, size_t i, bool want_rgb, accel__hash_image *img,
                         accel__hash_rows *fuse, accel__axis_cache *cache, char *why) {
  memset(img, 0, sizeof *img);
  load_ctx c = {.spec = &job->spec, .want_rgb = want_rgb, .img = img, .fuse = fuse, .cache = cache};
  accel__decode_sink sink = {on_begin, on_row, &c};
  accel_status s;
  if (job->source == ACCEL__SRC_ARRAYS) {
    s = load_array(&c, &job->arrays[i], why);
  } else if (job->source == ACCEL__SRC_BUFFERS) {
    s = accel__decode(job->data[i], job->sizes[i], &job->decode, &sink, why);
  } else {
    uint8_t *data;
    size_t size;
    s = accel__read_file(job->paths[i], &data, &size, why);
    if (!s) {
      s = accel__decode(data, size, &job->decode, &sink, why);
      free(data);
    }
  }
  free(c.scratch);
  if (s) accel__hash_image_free(img);
  return s;
}

accel_status accel__hash_load(const accel__hash_job *job, size_t i, bool want_rgb, accel__hash_image *img, char *why) {
  return load(job, i, want_rgb, img, NULL, NULL, why);
}

accel_status accel__hash_load_fused(const accel__hash_job *job, size_t i, accel__axis_cache *cache,
                                    accel__hash_image *img, accel__hash_rows *rows, char *why) {
  return load(job, i, false, img, rows, cache, why);
}

void accel__hash_load_range(accel__hash_job *job, size_t from, size_t to, bool want_rgb, accel__hash_image *img,
                            int threads) {
  (void)threads; /* read by OpenMP pragmas only */
  const long long n = (long long)(to - from);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (long long i = 0; i < n; i++) {
    const size_t k = from + (size_t)i;
    if (job->on_device && job->on_device[k]) { /* described, not read: the GPU converts it */
      const accel_array *a = &job->arrays[k];
      memset(&img[i], 0, sizeof img[i]);
      img[i].w = a->shape[1];
      img[i].h = a->shape[0];
      img[i].device = a->data;
      img[i].channels = a->ndim == 2 ? 1 : (int32_t)a->shape[2];
      continue;
    }
    char why[ACCEL_REASON_MAX] = "";
    accel_status s = accel__hash_load(job, from + (size_t)i, want_rgb, &img[i], why);
    if (s) accel__hash_record(job, from + (size_t)i, s, why);
  }
}

void accel__hash_image_free(accel__hash_image *img) {
  free(img->gray);
  free(img->rgb);
  memset(img, 0, sizeof *img);
}

uint8_t *accel__hash_slots(const accel__hash_job *job, size_t i) {
  return job->hashes + i * (size_t)job->spec.nkinds * job->spec.slot_bytes;
}

void accel__hash_record(accel__hash_job *job, size_t i, accel_status status, const char *why) {
  job->statuses[i] = status;
  free(job->messages[i]);
  job->messages[i] = NULL;
  if (status != ACCEL_OK) {
    memset(accel__hash_slots(job, i), 0, (size_t)job->spec.nkinds * job->spec.slot_bytes);
    job->messages[i] = strdup(why && *why ? why : accel_status_describe(status));
  }
}
