/* Pictures: canvases, a bitmap font, colour maps, PNG files, the previews. */
#include "picture.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool pic_create(pic_image *im, int w, int h, const uint8_t fill[3]) {
  im->rgb = NULL;
  im->w = w;
  im->h = h;
  if (w <= 0 || h <= 0 || (int64_t)w * h > (1 << 28)) {
    cli_error("a picture of %d x %d pixels is refused (at most 2^28)", w, h);
    return false;
  }
  im->rgb = malloc((size_t)w * (size_t)h * 3);
  if (!im->rgb) {
    cli_error("out of memory for a %d x %d picture", w, h);
    return false;
  }
  for (size_t i = 0; i < (size_t)w * (size_t)h; i++) memcpy(im->rgb + 3 * i, fill, 3);
  return true;
}

void pic_free(pic_image *im) {
  free(im->rgb);
  im->rgb = NULL;
}

uint8_t *pic_at(pic_image *im, int x, int y) {
  if (x < 0 || y < 0 || x >= im->w || y >= im->h) return NULL;
  return im->rgb + 3 * ((size_t)y * (size_t)im->w + (size_t)x);
}

void pic_rect(pic_image *im, int x, int y, int w, int h, const uint8_t c[3]) {
  for (int j = y; j < y + h; j++)
    for (int i = x; i < x + w; i++) {
      uint8_t *p = pic_at(im, i, j);
      if (p) memcpy(p, c, 3);
    }
}

/* 5 x 7 glyphs: seven rows of five bits, the leftmost pixel in bit 4. */
static const struct {
  char c;
  uint8_t rows[7];
} GLYPHS[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}}, {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'=', {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}}, {'Y', {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04}},
    {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
};

void pic_text(pic_image *im, int x, int y, int scale, const char *s, const uint8_t c[3]) {
  for (; *s; s++, x += 6 * scale)
    for (size_t g = 0; g < sizeof GLYPHS / sizeof GLYPHS[0]; g++) {
      if (GLYPHS[g].c != *s) continue;
      for (int r = 0; r < 7; r++)
        for (int b = 0; b < 5; b++)
          if (GLYPHS[g].rows[r] >> (4 - b) & 1) pic_rect(im, x + b * scale, y + r * scale, scale, scale, c);
    }
}

int pic_text_width(const char *s, int scale) { return s[0] ? (int)(6 * strlen(s) - 1) * scale : 0; }

void pic_viridis(double t, uint8_t out[3]) {
  static const uint8_t stops[9][3] = {{68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                      {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}};
  if (!(t > 0)) t = 0; /* NaN too */
  if (t > 1) t = 1;
  const double f = t * 8;
  const int k = f >= 8 ? 7 : (int)f;
  const double u = f - k;
  for (int c = 0; c < 3; c++) out[c] = (uint8_t)lround(stops[k][c] + u * (stops[k + 1][c] - stops[k][c]));
}

void pic_label_colour(uint32_t label, uint8_t out[3]) {
  double h = fmod(label * 0.6180339887498949, 1.0) * 6; /* the golden ratio spreads the hues */
  const int i = (int)h;
  const double f = h - i, v = 255, p = v * 0.25, q = v * (1 - 0.75 * f), t = v * (1 - 0.75 * (1 - f));
  const double rgb[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  for (int c = 0; c < 3; c++) out[c] = (uint8_t)lround(rgb[i % 6][c]);
}

int pic_scale_for(int64_t largest, int target) {
  return largest >= target || largest <= 0 ? 1 : (int)(target / largest);
}

/* ------------------------------------------------------------ files */

static bool png_write_to(FILE *f, const pic_image *im) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)im->w, (png_uint_32)im->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < im->h; y++) png_write_row(png, im->rgb + (size_t)y * (size_t)im->w * 3);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return true;
}

bool pic_png_encode(const pic_image *im, uint8_t **data, size_t *size) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, size);
  if (!f) return false;
  const bool ok = png_write_to(f, im);
  if (fclose(f) != 0 || !ok) {
    free(buf);
    return false;
  }
  *data = (uint8_t *)buf;
  return true;
}

bool pic_png_save(const char *cmd, const char *path, const pic_image *im) {
  uint8_t *data = NULL;
  size_t size = 0;
  if (!pic_png_encode(im, &data, &size)) {
    cli_error("%s: %s: cannot encode the PNG (out of memory)", cmd, path);
    return false;
  }
  const bool ok = pic_write_file(cmd, path, data, size);
  free(data);
  return ok;
}

bool pic_write_file(const char *cmd, const char *path, const void *data, size_t size) {
  char *tmp;
  const int fd = cli_atomic_open(cmd, path, &tmp);
  if (fd < 0) return false;
  bool ok = true;
  errno = 0;
  for (size_t at = 0; ok && at < size;) {
    const ssize_t n = write(fd, (const char *)data + at, size - at);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    at += ok ? (size_t)n : 0;
  }
  if (!ok) cli_error("%s: %s: %s", cmd, path, strerror(errno ? errno : EIO));
  return cli_atomic_close(cmd, path, fd, tmp, ok);
}

char *pic_base64(const uint8_t *d, size_t n) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    *o++ = A[v >> 18 & 63];
    *o++ = A[v >> 12 & 63];
    *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
    *o++ = i + 2 < n ? A[v & 63] : '=';
  }
  *o = '\0';
  return out;
}

/* ------------------------------------------------------------ previews */

/* Element i of an array of any real dtype, as a double. */
static double value_at(const accel_array *a, size_t i) {
  const void *p = (const char *)a->data + i * accel_dtype_size(a->dtype);
  switch (a->dtype) {
  case ACCEL_DTYPE_U8: return *(const uint8_t *)p;
  case ACCEL_DTYPE_I8: return *(const int8_t *)p;
  case ACCEL_DTYPE_U16: return *(const uint16_t *)p;
  case ACCEL_DTYPE_I16: return *(const int16_t *)p;
  case ACCEL_DTYPE_U32: return *(const uint32_t *)p;
  case ACCEL_DTYPE_I32: return *(const int32_t *)p;
  case ACCEL_DTYPE_F32: return *(const float *)p;
  case ACCEL_DTYPE_F64: return *(const double *)p;
  default: return NAN;
  }
}

/* One mid-plane at (x0, 0): plane 0 z = Z/2, 1 y = Y/2, 2 x = X/2. */
static void draw_plane(pic_image *im, int x0, int s, int plane, const accel_array *v, const accel_array *labels,
                       double lo, double hi) {
  const int64_t Z = v->shape[0], Y = v->shape[1], X = v->shape[2];
  const int64_t rows = plane == 0 ? Y : Z, cols = plane == 2 ? Y : X;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      const int64_t z = plane == 0 ? Z / 2 : r, y = plane == 0 ? r : plane == 1 ? Y / 2 : c, x = plane == 2 ? X / 2 : c;
      const size_t i = (size_t)((z * Y + y) * X + x);
      const double g = value_at(v, i), t = hi > lo ? (g - lo) / (hi - lo) : 0.5;
      const uint8_t gray = (uint8_t)lround(255 * (t > 0 ? t < 1 ? t : 1 : 0));
      uint8_t px[3] = {gray, gray, gray};
      const int32_t label = labels ? ((const int32_t *)labels->data)[i] : 0;
      if (label > 0) {
        uint8_t col[3];
        pic_label_colour((uint32_t)label, col);
        for (int k = 0; k < 3; k++) px[k] = (uint8_t)((gray + col[k] + 1) / 2);
      }
      pic_rect(im, x0 + (int)c * s, (int)r * s, s, s, px);
    }
}

bool pic_ct_preview(const char *cmd, const char *path, const accel_array *v, const accel_array *labels) {
  const int64_t Z = v->shape[0], Y = v->shape[1], X = v->shape[2], n = Z * Y * X;
  const int64_t largest = Z > Y ? (Z > X ? Z : X) : (Y > X ? Y : X);
  const int s = pic_scale_for(largest, 256);
  if (2 * X + Y > 65536 || Z > 65536 || Y > 65536) {
    cli_error("%s: --preview: a volume of %lld x %lld x %lld is too large to draw", cmd, (long long)Z, (long long)Y,
              (long long)X);
    return false;
  }
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    const double g = value_at(v, (size_t)i);
    if (g < lo) lo = g;
    if (g > hi) hi = g;
  }
  static const uint8_t white[3] = {255, 255, 255};
  pic_image im;
  if (!pic_create(&im, s * (int)(2 * X + Y) + 2 * PIC_GAP, s * (int)(Y > Z ? Y : Z), white)) return false;
  draw_plane(&im, 0, s, 0, v, labels, lo, hi);
  draw_plane(&im, s * (int)X + PIC_GAP, s, 1, v, labels, lo, hi);
  draw_plane(&im, 2 * (s * (int)X + PIC_GAP), s, 2, v, labels, lo, hi);
  const bool ok = pic_png_save(cmd, path, &im);
  pic_free(&im);
  return ok;
}

bool pic_svf_preview(const char *cmd, const char *path, const accel_array *grid) {
  const int64_t rows = grid->shape[0], cols = grid->shape[1];
  const int s = pic_scale_for(rows > cols ? rows : cols, 256);
  if (rows > 65536 || cols > 65536) {
    cli_error("%s: --preview: a grid of %lld x %lld is too large to draw", cmd, (long long)rows, (long long)cols);
    return false;
  }
  const int gw = s * (int)cols, gh = s * (int)rows, h = gh > PIC_MIN_HEIGHT ? gh : PIC_MIN_HEIGHT;
  static const uint8_t white[3] = {255, 255, 255}, black[3] = {0, 0, 0};
  pic_image im;
  if (!pic_create(&im, gw + PIC_LEGEND, h, white)) return false;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      uint8_t px[3];
      pic_viridis(((const float *)grid->data)[r * cols + c], px);
      pic_rect(&im, (int)c * s, (int)r * s, s, s, px);
    }
  /* the bar: 1 at its top (y = 16), 0 at its bottom (y = h - 9) */
  const int bx = gw + 8, top = 16, bottom = h - 9;
  for (int y = top; y <= bottom; y++) {
    uint8_t px[3];
    pic_viridis((double)(bottom - y) / (bottom - top), px);
    pic_rect(&im, bx, y, 14, 1, px);
  }
  pic_text(&im, bx, 4, 1, "SVF", black);
  const char *ticks[3] = {"1.0", "0.5", "0.0"};
  for (int k = 0; k < 3; k++) {
    const int y = top + k * (bottom - top) / 2;
    pic_rect(&im, bx + 14, y, 4, 1, black);
    pic_text(&im, bx + 20, y - 3, 1, ticks[k], black);
  }
  const bool ok = pic_png_save(cmd, path, &im);
  pic_free(&im);
  return ok;
}
