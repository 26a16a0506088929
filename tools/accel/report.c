/* accel dupes --html: a self-contained page of the groups and their thumbnails. */
#include "report.h"

#include "picture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default: fputc(*s, f);
    }
  }
}

/* The image shrunk into a REPORT_THUMB box (area averages), as RGB. */
static bool thumbnail(const accel_array *v, pic_image *t) {
  const int64_t h = v->shape[0], w = v->shape[1], c = v->ndim == 3 ? v->shape[2] : 1;
  const double f = w > h ? (double)REPORT_THUMB / (double)w : (double)REPORT_THUMB / (double)h;
  const int tw = f >= 1 ? (int)w : (int)fmax(1, lround((double)w * f)),
            th = f >= 1 ? (int)h : (int)fmax(1, lround((double)h * f));
  static const uint8_t black[3] = {0, 0, 0};
  if (!pic_create(t, tw, th, black)) return false;
  const int shift = v->dtype == ACCEL_DTYPE_U16 ? 8 : 0;
  for (int y = 0; y < th; y++)
    for (int x = 0; x < tw; x++) {
      const int64_t y0 = y * h / th, y1 = (y + 1) * h / th > y0 ? (y + 1) * h / th : y0 + 1;
      const int64_t x0 = x * w / tw, x1 = (x + 1) * w / tw > x0 ? (x + 1) * w / tw : x0 + 1;
      double sum[3] = {0, 0, 0};
      for (int64_t yy = y0; yy < y1; yy++)
        for (int64_t xx = x0; xx < x1; xx++)
          for (int k = 0; k < 3; k++) {
            const int64_t i = (yy * w + xx) * c + (c == 3 ? k : 0);
            sum[k] += shift ? ((const uint16_t *)v->data)[i] >> shift : ((const uint8_t *)v->data)[i];
          }
      uint8_t *p = pic_at(t, x, y);
      for (int k = 0; k < 3; k++) p[k] = (uint8_t)lround(sum[k] / (double)((y1 - y0) * (x1 - x0)));
    }
  return true;
}

/* One <figure>: the thumbnail (or why there is none), path, sizes, distances. */
static void figure(FILE *f, accel_ctx *ctx, const report_member *m, const char *dist) {
  accel_buffer *b = NULL;
  accel_array v = {0};
  pic_image t = {0};
  uint8_t *png = NULL;
  size_t n = 0;
  char *b64 = NULL;
  const char *why = NULL;
  if (accel_image_load(ctx, m->path, &b)) why = accel_last_error(ctx);
  else accel_buffer_view(b, &v);
  if (!why && !(v.dtype == ACCEL_DTYPE_U8 || v.dtype == ACCEL_DTYPE_U16)) why = "not an 8 or 16-bit image";
  if (!why && (!thumbnail(&v, &t) || !pic_png_encode(&t, &png, &n) || !(b64 = pic_base64(png, n))))
    why = "out of memory for the thumbnail";
  fputs("   <figure class=\"member\">", f);
  if (why) {
    fputs("<div class=\"missing\">no preview: ", f);
    html_text(f, why);
    fputs("</div>", f);
  } else {
    fprintf(f, "<img src=\"data:image/png;base64,%s\" width=\"%d\" height=\"%d\" alt=\"\">", b64, t.w, t.h);
  }
  struct stat st;
  fputs("\n    <figcaption><span class=\"path\">", f);
  html_text(f, m->path);
  fputs("</span><br><span class=\"size\">", f);
  if (stat(m->path, &st) == 0) fprintf(f, "%lld bytes", (long long)st.st_size);
  if (!why) fprintf(f, ", %lld &times; %lld px", (long long)v.shape[1], (long long)v.shape[0]);
  fprintf(f, "</span><br><span class=\"dist\">%s</span></figcaption></figure>\n", dist);
  free(b64);
  free(png);
  pic_free(&t);
  accel_buffer_destroy(b);
}

/* "dhash 0, ahash 2": each kind's distance between the entries a and b. */
static void distances(const accel_index *ix, const accel_hash_options *o, uint64_t a, uint64_t b, char *out,
                      size_t size) {
  uint32_t bits = 0, nf = 0;
  accel_index_info(ix, &bits, &nf, NULL);
  uint64_t ca[ACCEL_INDEX_MAX_FIELDS * 4] = {0}, cb[ACCEL_INDEX_MAX_FIELDS * 4] = {0};
  size_t pa, pb;
  out[0] = '\0';
  if (nf * bits / 64 > sizeof ca / sizeof ca[0] || accel_index_find(ix, a, &pa) || accel_index_find(ix, b, &pb) ||
      accel_index_get(ix, pa, NULL, ca, NULL, NULL) || accel_index_get(ix, pb, NULL, cb, NULL, NULL))
    return;
  const uint32_t words = bits / 64;
  for (uint32_t k = 0; k < nf && k < o->nkinds; k++) {
    uint32_t d = 0;
    for (uint32_t w = 0; w < words; w++) d += (uint32_t)__builtin_popcountll(ca[k * words + w] ^ cb[k * words + w]);
    const size_t at = strlen(out);
    snprintf(out + at, size - at, "%s%s %u", k ? ", " : "", accel_hash_kind_name(o->kinds[k]), d);
  }
}

static const char STYLE[] =
    "body{font-family:sans-serif;margin:16px;background:#fff;color:#111}\n"
    "h1{font-size:20px;margin:0 0 4px 0}p.criteria{font-size:13px;margin:0 0 16px 0}\n"
    ".group{background:#e8ecf6;margin:0 0 24px 0;padding:10px 12px;border-radius:6px}\n"
    ".group .title{font-weight:bold;font-size:14px;margin:0 0 8px 0}\n"
    ".row{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}\n"
    "figure{margin:0;width:170px}img{display:block;border:1px solid #889}\n"
    "figcaption{font-size:11px;word-break:break-all;margin-top:4px}\n"
    ".missing{width:160px;height:60px;background:#fcc;font-size:11px}\n";

bool report_write(accel_ctx *ctx, const char *cmd, const char *path, const accel_index *ix, const accel_hash_options *o,
                  const uint32_t *thresholds, const report_group *groups, size_t ng) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    cli_error("out of memory");
    return false;
  }
  fprintf(f,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>accel dupes: %zu group%s</title>\n"
          "<style>\n%s</style></head>\n<body>\n<h1>%zu group%s of near-duplicates</h1>\n<p class=\"criteria\">",
          ng, ng == 1 ? "" : "s", STYLE, ng, ng == 1 ? "" : "s");
  for (uint32_t k = 0; k < o->nkinds; k++)
    fprintf(f, "%s%s &le; %u", k ? ", " : "", accel_hash_kind_name(o->kinds[k]), thresholds[k]);
  fputs("; distances to the first image of the group</p>\n", f);
  char dist[256];
  for (size_t g = 0; g < ng; g++) {
    fprintf(f, "<div class=\"group\" id=\"group-%zu\" data-group=\"%zu\" data-members=\"%zu\">\n", g + 1, g + 1,
            groups[g].n);
    fprintf(f, " <div class=\"title\">group %zu: %zu images</div>\n <div class=\"row\">\n", g + 1, groups[g].n);
    for (size_t m = 0; m < groups[g].n; m++) {
      distances(ix, o, groups[g].m[0].id, groups[g].m[m].id, dist, sizeof dist);
      figure(f, ctx, &groups[g].m[m], dist);
    }
    fputs(" </div>\n</div>\n", f);
  }
  fputs("</body></html>\n", f);
  if (fclose(f) != 0) {
    free(text);
    cli_error("out of memory for the report");
    return false;
  }
  const bool ok = pic_write_file(cmd, path, text, len);
  free(text);
  return ok;
}
