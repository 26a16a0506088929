/* Format sniffing, whole-file reads, mode tables. */
#include "io/decode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int accel__mode_bpp(accel__mode mode) {
  static const int bpp[] = {1, 1, 2, 1, 3, 4, 4, 4};
  return (unsigned)mode < 8 ? bpp[mode] : 0;
}

const char *accel__mode_name(accel__mode mode) {
  static const char *const names[] = {"1", "L", "LA", "P", "RGB", "RGBA", "CMYK", "I"};
  return (unsigned)mode < 8 ? names[mode] : "?";
}

accel_status accel__decode(const uint8_t *data, size_t size, const accel__decode_options *options,
                           const accel__decode_sink *sink, char *why) {
  static const uint8_t PNG_SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return accel__decode_jpeg(data, size, options, sink, why);
  if (size >= 8 && memcmp(data, PNG_SIG, 8) == 0) return accel__decode_png(data, size, options, sink, why);
  accel__why(why, "not a JPEG or PNG file (%zu bytes)", size);
  return ACCEL_ERR_FORMAT;
}

accel_status accel__read_file(const char *path, uint8_t **data, size_t *size, char *why) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    accel__why(why, "cannot open %s: %s", path, strerror(errno));
    return ACCEL_ERR_IO;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    accel__why(why, "%s is not a regular file", path);
    return ACCEL_ERR_IO;
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    accel__why(why, "out of memory reading %s (%zu bytes)", path, n);
    return ACCEL_ERR_OUT_OF_MEMORY;
  }
  if (fread(buf, 1, n, f) != n) {
    int e = errno;
    fclose(f);
    free(buf);
    accel__why(why, "cannot read %s: %s", path, strerror(e));
    return ACCEL_ERR_IO;
  }
  fclose(f);
  *data = buf;
  *size = n;
  return ACCEL_OK;
}
