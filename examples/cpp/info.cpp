// examples/cpp/info.cpp - using libaccel from C++ through <accel/accel.hpp>
// (compiled as C++17 with -Wall -Wextra -Werror -Wpedantic in the test suite).
//
// The wrapper owns the context (released at the end of its scope) and turns
// every failed call into an accel::error carrying the status and the
// library's message.
#include <accel/accel.hpp>

#include <cstdint>
#include <iostream>
#include <vector>

int main() {
  try {
    if (accel_version_number() / 10000 != ACCEL_VERSION_MAJOR) {
      std::cerr << "header/library major version mismatch\n";
      return 1;
    }
    std::cout << "libaccel " << accel_version_string() << " (" << accel_build_info() << ")\n";
    accel::context ctx;
    accel_ctx_info info = ctx.info();
    std::cout << "backend: " << accel_backend_name(info.backend) << ", threads: " << info.cpu_threads << "\n";

    // A 2x2 RGB image to gray.
    std::vector<std::uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};
    std::vector<std::uint8_t> gray(4);
    accel_array src = accel::array_view(rgb.data(), ACCEL_DTYPE_U8, {2, 2, 3});
    accel_array dst = accel::array_view(gray.data(), ACCEL_DTYPE_U8, {2, 2});
    ctx.to_gray(src, dst);
    const std::vector<std::uint8_t> pillow = {76, 150, 29, 255}; // Pillow's convert('L')
    if (gray != pillow) {
      std::cerr << "unexpected gray values\n";
      return 1;
    }
    std::cout << "gray: " << int(gray[0]) << " " << int(gray[1]) << " " << int(gray[2]) << " " << int(gray[3]) << "\n";

    // A failed call throws accel::error with the status and the message.
    try {
      ctx.to_gray(dst, src); // swapped arguments
      std::cerr << "swapped arguments were accepted\n";
      return 1;
    } catch (const accel::error &e) {
      std::cout << "swapped arguments: " << e.what() << "\n";
      if (e.status() != ACCEL_ERR_INVALID_ARG || e.message().empty()) return 1;
    }
    // A bad backend name: an error without a context.
    try {
      accel_backend_kind kind;
      accel::check(accel_backend_from_string("quantum", &kind));
      return 1;
    } catch (const accel::error &e) {
      std::cout << "bad backend name: " << e.what() << "\n";
      if (e.status() != ACCEL_ERR_INVALID_ARG) return 1;
    }
    return 0;
  } catch (const accel::error &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
