// examples/cpp/info.cpp - using libaccel from C++ (compiled as C++17 with
// -Wall -Wextra -Werror -Wpedantic in the test suite).
//
// A small RAII wrapper owns the context; errors become exceptions carrying
// libaccel's message.
#include <accel/accel.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct CtxDeleter {
  void operator()(accel_ctx *c) const { accel_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<accel_ctx, CtxDeleter>;

void check(accel_status s, const accel_ctx *ctx) {
  if (s != ACCEL_OK) throw std::runtime_error(std::string(accel_status_string(s)) + ": " + accel_last_error(ctx));
}

Ctx make_context() {
  accel_ctx_options o;
  check(accel_ctx_options_init(&o, sizeof o), nullptr);
  o.backend = ACCEL_BACKEND_AUTO;
  accel_ctx *raw = nullptr;
  check(accel_ctx_create(&o, &raw), nullptr);
  return Ctx(raw);
}

} // namespace

int main() {
  try {
    if (accel_version_number() / 10000 != ACCEL_VERSION_MAJOR) {
      std::cerr << "header/library major version mismatch\n";
      return 1;
    }
    std::cout << "libaccel " << accel_version_string() << " (" << accel_build_info() << ")\n";
    Ctx ctx = make_context();
    accel_ctx_info info;
    check(accel_ctx_info_init(&info, sizeof info), nullptr);
    check(accel_ctx_query(ctx.get(), &info), ctx.get());
    std::cout << "backend: " << accel_backend_name(info.backend) << ", threads: " << info.cpu_threads << "\n";

    // A 2x2 RGB image to gray.
    std::vector<std::uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};
    std::vector<std::uint8_t> gray(4);
    const std::int64_t src_shape[3] = {2, 2, 3}, dst_shape[2] = {2, 2};
    accel_array src, dst;
    check(accel_array_init(&src, rgb.data(), ACCEL_DTYPE_U8, 3, src_shape), nullptr);
    check(accel_array_init(&dst, gray.data(), ACCEL_DTYPE_U8, 2, dst_shape), nullptr);
    check(accel_image_to_gray(ctx.get(), &src, &dst), ctx.get());
    const std::vector<std::uint8_t> pillow = {76, 150, 29, 255}; // Pillow's convert('L')
    if (gray != pillow) {
      std::cerr << "unexpected gray values\n";
      return 1;
    }
    std::cout << "gray: " << int(gray[0]) << " " << int(gray[1]) << " " << int(gray[2]) << " " << int(gray[3]) << "\n";
    // Errors come back as statuses with a message.
    accel_status s = accel_image_to_gray(ctx.get(), &dst, &src);
    std::cout << "swapped arguments: " << accel_status_string(s) << ": " << accel_last_error(ctx.get()) << "\n";
    return s == ACCEL_ERR_INVALID_ARG ? 0 : 1;
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
