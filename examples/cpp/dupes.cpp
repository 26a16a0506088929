// examples/cpp/dupes.cpp - groups of near-duplicate images with <accel/accel.hpp>.
//
//   dupes IMAGE...
//
// Hashes the images (dhash and phash, as imagehash computes them), puts the
// hashes in an exact Hamming index and prints each group of images whose
// dhash and phash both lie within 10 bits of another member's:
// `group<TAB>path`, groups numbered from 1. A file that cannot be read is
// reported on stderr with its status and message; the others are grouped.
#include <accel/accel.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: dupes IMAGE...\n";
    return 2;
  }
  try {
    const std::vector<std::string> paths(argv + 1, argv + argc);
    accel::context ctx;
    accel::hashes h = accel::hash_files(ctx, paths, {ACCEL_HASH_DHASH, ACCEL_HASH_PHASH});
    std::vector<std::uint64_t> ids, codes;
    int failed = 0;
    for (std::size_t i = 0; i < h.size(); i++) {
      if (!h.ok(i)) {
        std::cerr << paths[i] << ": " << accel_status_string(h.status(i)) << ": " << h.message(i) << "\n";
        failed = 1;
        continue;
      }
      ids.push_back(i);
      codes.push_back(h.u64(i, 0));
      codes.push_back(h.u64(i, 1));
    }
    accel::index ix(ctx, 64, 2);
    ix.add(ids, codes);
    const auto groups = ix.groups({10, 10});
    for (std::size_t g = 0; g < groups.size(); g++)
      for (std::uint64_t id : groups[g]) std::cout << g + 1 << "\t" << paths[id] << "\n";
    return failed;
  } catch (const accel::error &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
