/* Command-line options from a table: parsing, which take a value, the help. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

const cli_choice cli_tsv_json[] = {{"tsv", 0}, {"json", 1}, {NULL, 0}};
const cli_choice cli_rules[] = {{"all", ACCEL_INDEX_ALL}, {"any", ACCEL_INDEX_ANY}, {NULL, 0}};

static bool is_option(const cli_option *o) { return o->name && o->kind != CLI_OPT_TEXT; }

static bool needs_value(const cli_option *o) {
  return is_option(o) && o->kind != CLI_OPT_FLAG && o->kind != CLI_OPT_CLEAR;
}

bool cli_takes_value(const cli_option *table, const char *arg) {
  for (const cli_option *o = table; o && o->kind; o++)
    if (needs_value(o) && strcmp(o->name, arg) == 0) return true;
  return false;
}

/* An integer of `size` bytes (a bool, an int, an enum, an int64_t...). */
static void store(void *field, size_t size, int64_t v) {
  if (size == 1) *(int8_t *)field = (int8_t)v;
  else if (size == 2) *(int16_t *)field = (int16_t)v;
  else if (size == 4) *(int32_t *)field = (int32_t)v;
  else if (size == 8) *(int64_t *)field = v;
  else abort(); /* a table naming a field no integer fits */
}

void cli_list_add(char *buf, size_t size, size_t index, bool last, const char *name) {
  const size_t at = strlen(buf);
  snprintf(buf + at, size - at, "%s%s", index == 0 ? "" : last ? " or " : ", ", name);
}

bool cli_parse_choice(const char *cmd, const char *what, const cli_choice *choices, const char *v, int *out) {
  size_t n = 0;
  for (; choices[n].name; n++)
    if (strcmp(choices[n].name, v) == 0) {
      *out = choices[n].value;
      return true;
    }
  char list[160] = "";
  for (size_t k = 0; k < n; k++) cli_list_add(list, sizeof list, k, k + 1 == n, choices[k].name);
  cli_error("%s%s%s must be %s, not '%s'", CLI_CMD_PREFIX(cmd), what, list, v);
  return false;
}

enum { MAX_VALUES = 8 };

static bool read_value(const char *cmd, const cli_option *o, const char *v, void *field) {
  const char *what = o->label ? o->label : o->name;
  const int n = o->count ? o->count : 1;
  int64_t ints[MAX_VALUES];
  int choice;
  switch (o->kind) {
  case CLI_OPT_INT:
    if (n > MAX_VALUES || !cli_parse_ints(cmd, what, v, n, o->lo, o->hi, ints)) return false;
    for (int k = 0; k < n; k++) store((char *)field + (size_t)k * (o->size / (size_t)n), o->size / (size_t)n, ints[k]);
    return true;
  case CLI_OPT_REAL:
    if (!cli_parse_reals(cmd, what, v, n, field)) return false;
    for (int k = 0; o->range && k < n; k++) {
      const double x = ((const double *)field)[k];
      if (x < o->min || (o->exclusive && x == o->min) ||
          (o->max != 0 && (x > o->max || (o->max_exclusive && x == o->max)))) {
        cli_error("%s%s%s takes %s, not '%s'", CLI_CMD_PREFIX(cmd), what, o->range, v);
        return false;
      }
    }
    return true;
  case CLI_OPT_STRING: *(const char **)field = v; return true;
  case CLI_OPT_CHOICE:
    if (!cli_parse_choice(cmd, what, o->choices, v, &choice)) return false;
    store(field, o->size, choice);
    return true;
  case CLI_OPT_CUSTOM: return o->parse(cmd, o, v, field);
  default: return false;
  }
}

/* True if argv[*i] is `name` taking a value ("--name V" or "--name=V"); then
 * *value is set and *i advanced past it, or *missing set (and reported). */
static bool take_value(int argc, char **argv, int *i, const char *name, const char **value, bool *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '=') {
    *value = a + n + 1;
    return true;
  }
  if (a[n] != '\0') return false;
  if (*i + 1 >= argc || strcmp(argv[*i + 1], "--") == 0) {
    *missing = true;
    cli_error("option %s needs a value", name);
    return true;
  }
  *value = argv[++*i];
  return true;
}

int cli_take_option(const char *cmd, const cli_option *table, int argc, char **argv, int *i, void *args) {
  for (const cli_option *o = table; o && o->kind; o++) {
    if (!is_option(o)) continue;
    char *field = (char *)args + o->offset;
    if (!needs_value(o)) {
      if (strcmp(argv[*i], o->name) != 0) continue;
      store(field, o->size, o->kind == CLI_OPT_FLAG);
    } else {
      const char *v = NULL;
      bool missing = false;
      if (!take_value(argc, argv, i, o->name, &v, &missing)) continue;
      if (missing || !read_value(cmd, o, v, field)) return -1;
    }
    if (o->seen) *(bool *)((char *)args + o->seen - 1) = true;
    return 1;
  }
  return 0;
}

int cli_parse_options(const char *cmd, const cli_option *table, int argc, char **argv, void *args) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return i + 1;
    const int taken = cli_take_option(cmd, table, argc, argv, &i, args);
    if (taken < 0) return -1;
    if (taken) continue;
    if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("%s: unknown option '%s' (see accel %.*s --help)", cmd, argv[i], (int)strcspn(cmd, " "), cmd);
      return -1;
    }
    return i;
  }
  return argc;
}

/* Options without help are listed side by side, as many as fit a line. */
typedef struct side_line {
  char text[96];
} side_line;

static void flush_side(FILE *out, side_line *l) {
  if (l->text[0]) fprintf(out, "%s\n", l->text);
  l->text[0] = '\0';
}

static void add_side(FILE *out, side_line *l, const cli_option *o) {
  char item[64];
  snprintf(item, sizeof item, "  %s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
  if (strlen(l->text) + strlen(item) > 80) flush_side(out, l);
  const size_t at = strlen(l->text);
  snprintf(l->text + at, sizeof l->text - at, "%s", item);
}

void cli_print_options(FILE *out, const cli_option *table, int column) {
  side_line side = {{0}};
  for (const cli_option *o = table; o && o->kind; o++) {
    if (!o->help) {
      add_side(out, &side, o);
      continue;
    }
    flush_side(out, &side);
    if (!o->name) {
      fprintf(out, "%s\n", o->help);
      continue;
    }
    char left[64];
    snprintf(left, sizeof left, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fprintf(out, "  %-*s", column, left);
    for (const char *h = o->help;;) {
      const size_t len = strcspn(h, "\n");
      fprintf(out, "%.*s\n", (int)len, h);
      h += len;
      if (!*h++) break;
      fprintf(out, "  %*s", column, "");
    }
  }
  flush_side(out, &side);
}

void cli_print_help(FILE *out, const cli_command *c) {
  fputs(c->usage, out);
  cli_print_options(out, c->options, c->help_column);
  if (c->usage_tail) fputs(c->usage_tail, out);
}

char **cli_permute(int argc, char **argv, const cli_option *table, int *out_argc) {
  static char dashdash[] = "--";
  char **out = malloc(((size_t)argc + 2) * sizeof(char *));
  char **pos = malloc(((size_t)argc + 1) * sizeof(char *));
  if (!out || !pos) {
    free(out);
    free(pos);
    return NULL;
  }
  int no = 0, np = 0;
  out[no++] = argv[0];
  bool ended = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ended) {
      pos[np++] = argv[i];
    } else if (strcmp(a, "--") == 0) {
      ended = true;
    } else if (a[0] == '-' && a[1]) {
      out[no++] = argv[i];
      if (cli_takes_value(table, a) && i + 1 < argc) out[no++] = argv[++i];
    } else {
      pos[np++] = argv[i];
    }
  }
  out[no++] = dashdash;
  for (int i = 0; i < np; i++) out[no++] = pos[i];
  out[no] = NULL;
  free(pos);
  *out_argc = no;
  return out;
}
