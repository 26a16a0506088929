/* elastix TransformParameters files: written as elastix 5 writes them (the
 * keys, their order and sections of its BSplineTransform, EulerTransform,
 * AffineTransform and TranslationTransform files), read from elastix.
 *
 * The format: entries "(Key value value ...)", values separated by white
 * space, strings in double quotes, "//" starts a comment to the end of the
 * line; entries may come in any order, a key at most once (elastix refuses
 * a key given twice). Numbers are written with the digits that read back as
 * the same double (elastix's 10 decimals where they do). */
#include "reg/transform.h"

#include "core/internal.h"
#include "io/file.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOAD "accel_reg_transform_load"
#define SAVE "accel_reg_transform_save"

/* Files a chain may hold. */
#define MAX_CHAIN 16
/* The largest parameter file read: 2^26 parameters of up to 24 characters. */
#define MAX_FILE_BYTES ((int64_t)1 << 31)

/* ------------------------------------------------------------ parsing */

typedef struct entry {
  const char *key; /* NUL-terminated in the file's text */
  const char *val, *end;
  int line;
} entry;

typedef struct pfile {
  const char *path;
  char *text;
  int64_t size;
  entry *e;
  int n, cap;
} pfile;

static void pfile_free(pfile *f) {
  free(f->text);
  free(f->e);
  memset(f, 0, sizeof *f);
}

static accel_status read_text(accel_ctx *ctx, const char *func, const char *path, FILE *fp, int64_t size, void *out) {
  pfile *f = out;
  if (size > MAX_FILE_BYTES)
    return accel__fail_in(ctx, func, ACCEL_ERR_FORMAT, "%s: %lld bytes is too large for a parameter file", path,
                          (long long)size);
  if (!(f->text = malloc((size_t)size + 1)))
    return accel__fail_in(ctx, func, ACCEL_ERR_OUT_OF_MEMORY, "no memory for %s", path);
  if (size > 0 && fread(f->text, 1, (size_t)size, fp) != (size_t)size)
    return accel__fail_in(ctx, func, ACCEL_ERR_IO, "%s: cannot read it", path);
  f->text[size] = '\0';
  f->size = size;
  /* old Mac line ends (a lone CR) as line ends: a comment ran to the end of
   * the file through them ("(Size) is missing") */
  for (int64_t i = 0; i < size; i++)
    if (f->text[i] == '\r' && f->text[i + 1] != '\n') f->text[i] = '\n';
  return ACCEL_OK;
}

static accel_status add_entry(accel_ctx *ctx, pfile *f, const char *key, const char *val, const char *end, int line) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->e[i].key, key))
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: (%s) is given twice", f->path, line, key);
  if (f->n == f->cap) {
    const int cap = f->cap ? 2 * f->cap : 64;
    entry *e = realloc(f->e, (size_t)cap * sizeof *e);
    if (!e) return accel__fail_in(ctx, LOAD, ACCEL_ERR_OUT_OF_MEMORY, "no memory for the entries of %s", f->path);
    f->e = e;
    f->cap = cap;
  }
  f->e[f->n++] = (entry){key, val, end, line};
  return ACCEL_OK;
}

/* One entry from the "(" at *pos: its key (terminated in place) and the span
 * of its values up to the closing ")" (outside quotes). */
static accel_status parse_entry(accel_ctx *ctx, pfile *f, char **pos, int *line) {
  char *p = *pos + 1, *t = f->text + f->size;
  while (p < t && (*p == ' ' || *p == '\t')) p++;
  char *key = p;
  while (p < t && (isalnum((unsigned char)*p) || *p == '_')) p++;
  if (p == key)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: an entry without a key", f->path, *line);
  const int at = *line;
  char *val = p;
  bool quoted = false;
  for (; p < t && (quoted || *p != ')'); p++) {
    if (*p == '"') quoted = !quoted;
    if (!quoted && p[0] == '/' && p + 1 < t && p[1] == '/') /* a comment inside the entry: blanked */
      while (p < t && *p != '\n') *p++ = ' ';
    if (p >= t) break;
    if (*p == '\n') {
      if (quoted) break;
      (*line)++;
    }
    if (*p == '(' && !quoted) break;
  }
  if (p >= t || *p != ')')
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: (%.*s has no closing parenthesis", f->path, at,
                          (int)(val - key), key);
  if (val < p && !isspace((unsigned char)*val)) {
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: malformed key in (%.*s", f->path, at,
                          (int)(p - key), key);
  }
  *val++ = '\0'; /* the key ends here (the space or the ")") */
  if (val > p) val = p;
  *pos = p + 1;
  return add_entry(ctx, f, key, val, p, at);
}

static accel_status parse_file(accel_ctx *ctx, const char *path, pfile *f) {
  memset(f, 0, sizeof *f);
  f->path = path;
  accel_status s = accel__load(ctx, LOAD, path, read_text, f);
  if (s) {
    pfile_free(f);
    return s;
  }
  char *p = f->text, *t = f->text + f->size;
  int line = 1;
  while (!s && p < t) {
    if (*p == '\n') line++, p++;
    else if (isspace((unsigned char)*p)) p++;
    else if (p[0] == '/' && p + 1 < t && p[1] == '/')
      while (p < t && *p != '\n') p++;
    else if (*p == '(') s = parse_entry(ctx, f, &p, &line);
    else
      s = accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: not a parameter file (text outside \"(...)\")",
                         path, line);
  }
  if (!s && f->n == 0) s = accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: not a parameter file (no entries)", path);
  if (s) pfile_free(f);
  return s;
}

static const entry *find(const pfile *f, const char *key) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->e[i].key, key)) return &f->e[i];
  return NULL;
}

/* The next value of an entry from *p: its text [*tok, *tok + *len), quotes
 * removed. False at the end. */
static bool next_value(const entry *e, const char **p, const char **tok, size_t *len) {
  const char *q = *p;
  while (q < e->end && isspace((unsigned char)*q)) q++;
  if (q >= e->end) return false;
  if (*q == '"') {
    const char *c = memchr(q + 1, '"', (size_t)(e->end - q - 1));
    if (!c) c = e->end;
    *tok = q + 1;
    *len = (size_t)(c - q - 1);
    *p = c < e->end ? c + 1 : c;
    return true;
  }
  *tok = q;
  while (q < e->end && !isspace((unsigned char)*q)) q++;
  *len = (size_t)(q - *tok);
  *p = q;
  return true;
}

static accel_status missing(accel_ctx *ctx, const pfile *f, const char *key) {
  return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: (%s) is missing", f->path, key);
}

/* A string entry (one value) into buf; `def` (may be NULL: required) when absent. */
static accel_status get_string(accel_ctx *ctx, const pfile *f, const char *key, const char *def, char *buf, size_t n) {
  const entry *e = find(f, key);
  if (!e) {
    if (!def) return missing(ctx, f, key);
    accel__strlcpy(buf, def, n);
    return ACCEL_OK;
  }
  const char *p = e->val, *tok, *extra;
  size_t len, xl;
  if (!next_value(e, &p, &tok, &len) || next_value(e, &p, &extra, &xl) || len >= n)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: (%s) must hold one string of at most %zu bytes",
                          f->path, e->line, key, n - 1);
  memcpy(buf, tok, len);
  buf[len] = '\0';
  return ACCEL_OK;
}

/* Exactly `n` finite numbers; `def` (NULL: required) when absent. */
static accel_status get_numbers(accel_ctx *ctx, const pfile *f, const char *key, int64_t n, const double *def,
                                double *out) {
  const entry *e = find(f, key);
  if (!e) {
    if (!def) return missing(ctx, f, key);
    memcpy(out, def, (size_t)n * sizeof *out);
    return ACCEL_OK;
  }
  const char *p = e->val, *tok;
  size_t len;
  int64_t k = 0;
  char num[64];
  while (next_value(e, &p, &tok, &len)) {
    if (k == n)
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: (%s) has more than %lld values", f->path,
                            e->line, key, (long long)n);
    char *stop = NULL;
    if (len < sizeof num) {
      memcpy(num, tok, len);
      num[len] = '\0';
      errno = 0;
      out[k] = strtod(num, &stop);
    }
    if (len >= sizeof num || len == 0 || *stop != '\0' || !isfinite(out[k]))
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT,
                            "%s: line %d: (%s): value %lld \"%.*s\" is not a finite number", f->path, e->line, key,
                            (long long)k + 1, (int)(len < 40 ? len : 40), tok);
    k++;
  }
  if (k != n)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: line %d: (%s) has %lld values, %lld expected", f->path,
                          e->line, key, (long long)k, (long long)n);
  return ACCEL_OK;
}

/* Integers: numbers that are whole, within [lo, hi]. */
static accel_status get_ints(accel_ctx *ctx, const pfile *f, const char *key, int n, const double *def, double lo,
                             double hi, int64_t *out) {
  double v[4];
  accel_status s = get_numbers(ctx, f, key, n, def, v);
  for (int k = 0; k < n && !s; k++) {
    if (v[k] != floor(v[k]) || v[k] < lo || v[k] > hi)
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: (%s): %g is not a whole number in %g..%g", f->path, key,
                            v[k], lo, hi);
    out[k] = (int64_t)v[k];
  }
  return s;
}

/* ------------------------------------------------------------ loading */

/* One file of a chain. */
typedef struct link {
  accel_reg_linear_kind kind; /* NONE: a B-spline */
  double v[6], centre[2];
  int64_t size[2];
  accel_reg_grid grid;
  double *params; /* B-spline only */
  char initial[PATH_MAX];
} link;

static const double IDENTITY[4] = {1, 0, 0, 1}, ZERO[4] = {0, 0, 0, 0}, ONE[2] = {1, 1};

/* What every file must say about the images: 2-D, spacing 1, origin 0,
 * identity directions, index 0; no binary parameters. */
static accel_status check_image_keys(accel_ctx *ctx, const pfile *f, link *l) {
  int64_t dim[2], index[2];
  double v[4];
  char str[16];
  accel_status s = get_ints(ctx, f, "FixedImageDimension", 1, (const double[]){2}, 1, 16, dim);
  if (!s) s = get_ints(ctx, f, "MovingImageDimension", 1, (const double[]){2}, 1, 16, dim + 1);
  if (!s && (dim[0] != 2 || dim[1] != 2))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: %lld-D images; only 2-D", f->path,
                          (long long)(dim[0] != 2 ? dim[0] : dim[1]));
  if (!s) s = get_ints(ctx, f, "Size", 2, NULL, 1, (double)INT32_MAX, l->size);
  if (!s) s = get_ints(ctx, f, "Index", 2, ZERO, -1e18, 1e18, index);
  if (!s && (index[0] || index[1]))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: (Index) must be 0 0", f->path);
  static const struct {
    const char *key;
    int n;
    const double *want;
  } geometry[] = {{"Spacing", 2, ONE}, {"Origin", 2, ZERO}, {"Direction", 4, IDENTITY}};
  for (size_t k = 0; k < sizeof geometry / sizeof geometry[0] && !s; k++) {
    s = get_numbers(ctx, f, geometry[k].key, geometry[k].n, geometry[k].want, v);
    if (!s && memcmp(v, geometry[k].want, (size_t)geometry[k].n * sizeof *v))
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: (%s) must be %s (pixel coordinates)", f->path,
                            geometry[k].key,
                            k == 0   ? "1 1"
                            : k == 1 ? "0 0"
                                     : "1 0 0 1");
  }
  if (!s) s = get_string(ctx, f, "UseBinaryFormatForTransformationParameters", "false", str, sizeof str);
  if (!s && strcmp(str, "false"))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: binary transform parameters", f->path);
  return s;
}

/* The B-spline keys: order 3, grid index 0, identity grid directions, not
 * cyclic; the grid and its parameters. */
static accel_status read_bspline(accel_ctx *ctx, const pfile *f, link *l) {
  int64_t order, index[2], gsize[2];
  double v[4];
  char str[16];
  accel_status s = get_ints(ctx, f, "BSplineTransformSplineOrder", 1, (const double[]){3}, 0, 16, &order);
  if (!s && order != 3)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: B-spline order %lld; only 3", f->path,
                          (long long)order);
  if (!s) s = get_ints(ctx, f, "GridIndex", 2, ZERO, -1e18, 1e18, index);
  if (!s && (index[0] || index[1]))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: (GridIndex) must be 0 0", f->path);
  if (!s) s = get_numbers(ctx, f, "GridDirection", 4, IDENTITY, v);
  if (!s && memcmp(v, IDENTITY, sizeof IDENTITY))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: (GridDirection) must be 1 0 0 1", f->path);
  if (!s) s = get_string(ctx, f, "UseCyclicTransform", "false", str, sizeof str);
  if (!s && strcmp(str, "false"))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: a cyclic B-spline transform", f->path);
  if (!s) s = get_ints(ctx, f, "GridSize", 2, NULL, 4, 1 << 26, gsize);
  if (!s) s = get_numbers(ctx, f, "GridSpacing", 2, NULL, l->grid.spacing);
  if (!s) s = get_numbers(ctx, f, "GridOrigin", 2, NULL, l->grid.origin);
  if (s) return s;
  if (!(l->grid.spacing[0] > 0) || !(l->grid.spacing[1] > 0))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: (GridSpacing) must be positive", f->path);
  for (int d = 0; d < 2; d++) {
    l->grid.size[d] = gsize[d];
    l->grid.image_size[d] = l->size[d];
  }
  if (gsize[0] > ((int64_t)1 << 26) / 2 / gsize[1])
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_LIMIT, "%s: a grid of %lld x %lld nodes is over 2^26 parameters",
                          f->path, (long long)gsize[0], (long long)gsize[1]);
  return ACCEL_OK;
}

/* The transform's own parameters: NumberOfParameters of them. */
static accel_status read_parameters(accel_ctx *ctx, const pfile *f, link *l, int64_t want) {
  int64_t n;
  accel_status s = get_ints(ctx, f, "NumberOfParameters", 1, NULL, 0, (double)((int64_t)1 << 26), &n);
  if (!s && n != want)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_FORMAT, "%s: (NumberOfParameters) is %lld, the transform has %lld",
                          f->path, (long long)n, (long long)want);
  if (s) return s;
  if (l->kind != ACCEL_REG_LINEAR_NONE) return get_numbers(ctx, f, "TransformParameters", n, NULL, l->v);
  if (!(l->params = malloc((size_t)n * sizeof *l->params)))
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_OUT_OF_MEMORY, "no memory for %lld parameters", (long long)n);
  return get_numbers(ctx, f, "TransformParameters", n, NULL, l->params);
}

/* One file of the chain into *l (l->params owned by the caller after). */
static accel_status read_link(accel_ctx *ctx, const pfile *f, link *l) {
  char name[64];
  memset(l, 0, sizeof *l);
  accel_status s = get_string(ctx, f, "Transform", NULL, name, sizeof name);
  if (s) return s;
  static const char *const kinds[] = {"BSplineTransform", "TranslationTransform", "EulerTransform", "AffineTransform",
                                      "RecursiveBSplineTransform"};
  static const int counts[] = {0, 2, 3, 6, 0};
  int k = 0;
  while (k < 5 && strcmp(name, kinds[k])) k++;
  if (k == 5)
    return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED,
                          "%s: transform \"%s\"; BSplineTransform, TranslationTransform, EulerTransform or "
                          "AffineTransform",
                          f->path, name);
  l->kind = k == 4 ? ACCEL_REG_LINEAR_NONE : (accel_reg_linear_kind)k;
  if ((s = check_image_keys(ctx, f, l))) return s;
  if (l->kind == ACCEL_REG_LINEAR_NONE) {
    if ((s = read_bspline(ctx, f, l))) return s;
    s = read_parameters(ctx, f, l, 2 * l->grid.size[0] * l->grid.size[1]);
  } else {
    s = read_parameters(ctx, f, l, counts[k]);
    if (!s && l->kind != ACCEL_REG_LINEAR_TRANSLATION)
      s = get_numbers(ctx, f, "CenterOfRotationPoint", 2, NULL, l->centre);
  }
  if (!s) s = get_string(ctx, f, "InitialTransformParametersFileName", "NoInitialTransform", l->initial, PATH_MAX);
  if (!s && strcmp(l->initial, "NoInitialTransform")) {
    char how[16];
    s = get_string(ctx, f, "HowToCombineTransforms", "Compose", how, sizeof how);
    if (!s && strcmp(how, "Compose"))
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: (HowToCombineTransforms \"%s\"); only \"Compose\"",
                            f->path, how);
  }
  return s;
}

/* Where an initial file named in `from` is: as given, else beside `from`. */
static void resolve(const char *from, const char *name, char *out, size_t n) {
  FILE *fp = fopen(name, "rb");
  if (fp || name[0] == '/' || !strrchr(from, '/')) {
    if (fp) fclose(fp);
    accel__strlcpy(out, name, n);
    return;
  }
  const size_t dir = (size_t)(strrchr(from, '/') - from) + 1;
  if (dir + strlen(name) >= n) { /* too long to be beside it: as given, to fail as such */
    accel__strlcpy(out, name, n);
    return;
  }
  memcpy(out, from, dir);
  memcpy(out + dir, name, strlen(name) + 1);
}

/* The linear chain L = f1 o f2 o ... folded into q = M p + b; `single`
 * keeps the one file's own form when there is just one. */
typedef struct chain {
  double m[4], b[2];
  int files;
  link single;
} chain;

static void chain_add(chain *c, const link *l) {
  double m[4], b[2];
  accel__reg_fold_linear(l->kind, l->v, l->centre, m, b);
  const double cm[4] = {c->m[0], c->m[1], c->m[2], c->m[3]};
  c->b[0] += cm[0] * b[0] + cm[1] * b[1];
  c->b[1] += cm[2] * b[0] + cm[3] * b[1];
  c->m[0] = cm[0] * m[0] + cm[1] * m[2];
  c->m[1] = cm[0] * m[1] + cm[1] * m[3];
  c->m[2] = cm[2] * m[0] + cm[3] * m[2];
  c->m[3] = cm[2] * m[1] + cm[3] * m[3];
  if (c->files++ == 0) c->single = *l;
}

/* Read the file at `path` and its initial chain: the B-spline part (if the
 * first file is one) into *top and the linear files into *c. */
static accel_status read_chain(accel_ctx *ctx, const char *path, link *top, chain *c) {
  char here[PATH_MAX];
  accel__strlcpy(here, path, sizeof here);
  accel_status s = ACCEL_OK;
  for (int depth = 0; !s; depth++) {
    if (depth == MAX_CHAIN)
      return accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: a chain of more than %d transform files", path,
                            MAX_CHAIN);
    pfile f;
    link l;
    if ((s = parse_file(ctx, here, &f))) return s;
    s = read_link(ctx, &f, &l);
    pfile_free(&f);
    if (!s && depth > 0 && l.kind == ACCEL_REG_LINEAR_NONE)
      s = accel__fail_in(ctx, LOAD, ACCEL_ERR_UNSUPPORTED, "%s: a B-spline transform in the initial chain of %s", here,
                         path);
    if (s) {
      free(l.params);
      return s;
    }
    if (depth == 0) *top = l;
    else chain_add(c, &l);
    if (depth == 0 && l.kind != ACCEL_REG_LINEAR_NONE) {
      top->kind = ACCEL_REG_LINEAR_NONE; /* a linear file alone: no B-spline */
      chain_add(c, &l);
    }
    if (!strcmp(l.initial, "NoInitialTransform")) break;
    char next[PATH_MAX];
    resolve(here, l.initial, next, sizeof next);
    accel__strlcpy(here, next, sizeof here);
  }
  return s;
}

accel_status accel_reg_transform_load(accel_ctx *ctx, const char *path, accel_reg_transform **out) {
  REQUIRE(ctx, out, ACCEL_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  REQUIRE(ctx, path, ACCEL_ERR_INVALID_ARG, "path is NULL");
  static const link none;
  link top = none;
  chain c = {{1, 0, 0, 1}, {0, 0}, 0, none};
  accel_status s = read_chain(ctx, path, &top, &c);
  if (s) {
    free(top.params);
    return s;
  }
  accel_reg_transform *t = NULL;
  if (top.params) s = accel__reg_transform_new(ctx, __func__, &top.grid, &t);
  else s = accel__reg_transform_new_linear(ctx, top.size[0], top.size[1], &t);
  if (!s && top.params) memcpy(t->params, top.params, (size_t)accel_reg_transform_count(t) * sizeof *t->params);
  free(top.params);
  if (!s && c.files == 1) s = accel_reg_transform_set_initial(ctx, t, c.single.kind, c.single.v, c.single.centre);
  if (!s && c.files > 1) {
    const double affine[6] = {c.m[0], c.m[1], c.m[2], c.m[3], c.b[0], c.b[1]};
    s = accel_reg_transform_set_initial(ctx, t, ACCEL_REG_LINEAR_AFFINE, affine, NULL);
  }
  if (s) {
    accel_reg_transform_destroy(t);
    return s == ACCEL_ERR_INVALID_ARG ? FAIL(ctx, ACCEL_ERR_FORMAT, "%s: the initial transform is singular", path) : s;
  }
  *out = t;
  return ACCEL_OK;
}

/* ------------------------------------------------------------ saving */

/* v with `decimals` fixed decimals (elastix's style) when that reads back
 * as v, else the fewest significant digits that do (at most 17). */
static void format_number(char *buf, size_t n, double v, int decimals) {
  if (decimals >= 0) {
    snprintf(buf, n, "%.*f", decimals, v);
    if (strtod(buf, NULL) == v) return;
  }
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(buf, n, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* "(key v v ...)" with `decimals` as format_number takes them. */
static void put_numbers(FILE *f, const char *key, const double *v, int64_t n, int decimals) {
  char num[64];
  fprintf(f, "(%s", key);
  for (int64_t k = 0; k < n; k++) {
    format_number(num, sizeof num, v[k], decimals);
    fprintf(f, " %s", num);
  }
  fputs(")\n", f);
}

/* The head of a file: the transform, its parameters, its initial file. */
static void put_head(FILE *f, const char *name, const double *v, int64_t n, const char *initial) {
  fprintf(f, "(Transform \"%s\")\n(NumberOfParameters %lld)\n", name, (long long)n);
  put_numbers(f, "TransformParameters", v, n, -1);
  fprintf(f,
          "(InitialTransformParametersFileName \"%s\")\n(UseBinaryFormatForTransformationParameters \"false\")\n"
          "(HowToCombineTransforms \"Compose\")\n",
          initial);
}

static void put_image(FILE *f, const int64_t size[2]) {
  static const double one[2] = {1, 1}, zero[2] = {0, 0}, identity[4] = {1, 0, 0, 1};
  fprintf(f,
          "\n// Image specific\n(FixedImageDimension 2)\n(MovingImageDimension 2)\n"
          "(FixedInternalImagePixelType \"float\")\n(MovingInternalImagePixelType \"float\")\n"
          "(Size %lld %lld)\n(Index 0 0)\n",
          (long long)size[0], (long long)size[1]);
  put_numbers(f, "Spacing", one, 2, 10);
  put_numbers(f, "Origin", zero, 2, 10);
  put_numbers(f, "Direction", identity, 4, 10);
  fputs("(UseDirectionCosines \"true\")\n", f);
}

static void put_resampler(FILE *f) {
  fputs(
      "\n// ResampleInterpolator specific\n(ResampleInterpolator \"FinalBSplineInterpolator\")\n"
      "(FinalBSplineInterpolationOrder 3)\n\n// Resampler specific\n(Resampler \"DefaultResampler\")\n"
      "(DefaultPixelValue 0.000000)\n(ResultImageFormat \"tif\")\n(ResultImagePixelType \"float\")\n"
      "(CompressResultImage \"false\")\n",
      f);
}

/* What one file holds. */
typedef struct saved {
  const accel_reg_transform *t;
  bool bspline;
  const char *initial;
} saved;

static void put_file(FILE *f, const saved *w) {
  const accel_reg_transform *t = w->t;
  if (w->bspline) {
    static const double identity[4] = {1, 0, 0, 1};
    put_head(f, "BSplineTransform", t->params, accel_reg_transform_count(t), w->initial);
    put_image(f, t->grid.image_size);
    fprintf(f, "\n// BSplineTransform specific\n(GridSize %lld %lld)\n(GridIndex 0 0)\n", (long long)t->grid.size[0],
            (long long)t->grid.size[1]);
    put_numbers(f, "GridSpacing", t->grid.spacing, 2, 10);
    put_numbers(f, "GridOrigin", t->grid.origin, 2, 10);
    put_numbers(f, "GridDirection", identity, 4, 10);
    fputs("(BSplineTransformSplineOrder 3)\n(UseCyclicTransform \"false\")\n", f);
  } else {
    static const double none[2] = {0, 0};
    switch (t->kind) {
    case ACCEL_REG_LINEAR_RIGID: put_head(f, "EulerTransform", t->linear, 3, w->initial); break;
    case ACCEL_REG_LINEAR_AFFINE: put_head(f, "AffineTransform", t->linear, 6, w->initial); break;
    case ACCEL_REG_LINEAR_TRANSLATION: put_head(f, "TranslationTransform", t->linear, 2, w->initial); break;
    default: put_head(f, "TranslationTransform", none, 2, w->initial); break;
    }
    put_image(f, t->grid.image_size);
    if (t->kind == ACCEL_REG_LINEAR_RIGID || t->kind == ACCEL_REG_LINEAR_AFFINE) {
      fprintf(f, "\n// %s specific\n",
              t->kind == ACCEL_REG_LINEAR_RIGID ? "EulerTransform" : "AdvancedAffineTransform");
      put_numbers(f, "CenterOfRotationPoint", t->centre, 2, 10);
    }
  }
  put_resampler(f);
}

static accel_status write_file(accel_ctx *ctx, const char *path, const saved *w) {
  accel__atomic_file af;
  accel_status s = accel__atomic_open(ctx, SAVE, path, false, &af);
  if (s) return s;
  put_file(af.f, w);
  return accel__atomic_commit(ctx, SAVE, &af);
}

accel_status accel_reg_transform_save(accel_ctx *ctx, const accel_reg_transform *t, const char *path) {
  REQUIRE(ctx, t, ACCEL_ERR_INVALID_ARG, "transform is NULL");
  REQUIRE(ctx, path && *path, ACCEL_ERR_INVALID_ARG, "path is %s", path ? "empty" : "NULL");
  const bool bspline = accel_reg_transform_count(t) > 0;
  if (!bspline || t->kind == ACCEL_REG_LINEAR_NONE)
    return write_file(ctx, path, &(saved){t, bspline, "NoInitialTransform"});
  /* the initial part first, beside the file, named by its absolute path */
  const size_t len = strlen(path), stem = len > 4 && !strcmp(path + len - 4, ".txt") ? len - 4 : len;
  char initial[PATH_MAX], absolute[PATH_MAX];
  REQUIRE(ctx, stem + 13 < sizeof initial, ACCEL_ERR_INVALID_ARG, "path is too long");
  memcpy(initial, path, stem);
  memcpy(initial + stem, ".initial.txt", 13);
  /* the file's own temporary first: a path that cannot be written (a
   * directory, a missing folder) fails before the initial part is made */
  accel__atomic_file af;
  accel_status s = accel__atomic_open(ctx, SAVE, path, false, &af);
  if (s) return s;
  s = write_file(ctx, initial, &(saved){t, false, "NoInitialTransform"});
  if (!s && !realpath(initial, absolute))
    s = FAIL(ctx, ACCEL_ERR_IO, "cannot find the absolute path of %s: %s", initial, strerror(errno));
  if (!s && strpbrk(absolute, "\"\n\r"))
    s = FAIL(ctx, ACCEL_ERR_INVALID_ARG, "the path %s cannot be written in a parameter file (a quote or a line break)",
             absolute);
  if (s) {
    accel__atomic_abort(&af);
    return s;
  }
  put_file(af.f, &(saved){t, true, absolute});
  return accel__atomic_commit(ctx, SAVE, &af);
}
