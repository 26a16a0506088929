/*
 * accel.hpp - a header-only C++17 wrapper over libaccel's C ABI.
 *
 *   #include <accel/accel.hpp>      // links like the C API: accel::accel (CMake), `pkg-config accel`
 *
 *   accel::context ctx;                                   // ACCEL_BACKEND_AUTO
 *   auto h = accel::hash_files(ctx, {"a.jpg", "b.png"}, {ACCEL_HASH_DHASH, ACCEL_HASH_PHASH});
 *   std::string hex = h.hex(0, 1);                        // a.jpg's phash, as imagehash's str()
 *   accel::index ix(ctx, 64, 2);
 *   ix.add(ids, codes);                                   // codes: ids.size() * nfields words
 *   for (const auto &group : ix.groups({5, 5})) ...       // near-duplicate groups of ids
 *
 * Every failure throws accel::error, which carries the library's status and
 * message (status(), message(); what() is "ACCEL_ERR_...: message"). Handles
 * are owned: context, index, and the unique_handle aliases (buffer_ptr,
 * pairs_ptr, groups_ptr, geo_ptr, ct_network_ptr, ct_pipeline_ptr,
 * reg_transform_ptr) release them when they go out of scope; they move and
 * never copy. The wrapper adds no state of its own: get() gives the C handle
 * for any function of the C API, whose thread-safety rules apply unchanged.
 */
#ifndef ACCEL_ACCEL_HPP
#define ACCEL_ACCEL_HPP

#include "accel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace accel {

/* A failed libaccel call: its status and the library's message. */
class error : public std::runtime_error {
 public:
  error(accel_status status, const std::string &message)
      : std::runtime_error(std::string(accel_status_string(status)) + ": " + message),
        status_(status),
        message_(message) {}
  accel_status status() const noexcept { return status_; }
  const std::string &message() const noexcept { return message_; }

 private:
  accel_status status_;
  std::string message_;
};

/* Throw accel::error unless status is ACCEL_OK. `ctx` is the context the call
 * was made with (nullptr for calls without one), whose last error message
 * the exception carries (the status's description when there is none). */
inline void check(accel_status status, const accel_ctx *ctx = nullptr) {
  if (status == ACCEL_OK) return;
  const char *message = accel_last_error(ctx);
  throw error(status, (message != nullptr && *message != '\0') ? message : accel_status_describe(status));
}

namespace detail {
template <class T, void (*Destroy)(T *)> struct destroyer {
  void operator()(T *p) const noexcept { Destroy(p); }
};
} // namespace detail

/* An owned C handle, released by its accel_*_destroy. */
template <class T, void (*Destroy)(T *)> using unique_handle = std::unique_ptr<T, detail::destroyer<T, Destroy>>;

using buffer_ptr = unique_handle<accel_buffer, accel_buffer_destroy>;
using pairs_ptr = unique_handle<accel_pairs, accel_pairs_destroy>;
using groups_ptr = unique_handle<accel_groups, accel_groups_destroy>;
using geo_ptr = unique_handle<accel_geo, accel_geo_destroy>;
using ct_network_ptr = unique_handle<accel_ct_network, accel_ct_network_destroy>;
using ct_pipeline_ptr = unique_handle<accel_ct_pipeline, accel_ct_pipeline_destroy>;
using reg_transform_ptr = unique_handle<accel_reg_transform, accel_reg_transform_destroy>;

/* A C-contiguous view of caller memory (accel_array_init). */
inline accel_array array_view(void *data, accel_dtype dtype, const std::vector<std::int64_t> &shape) {
  accel_array a;
  check(accel_array_init(&a, data, dtype, static_cast<std::int32_t>(shape.size()), shape.data()));
  return a;
}

/* A library context (accel_ctx). */
class context {
 public:
  /* The defaults with this backend. */
  explicit context(accel_backend_kind backend = ACCEL_BACKEND_AUTO) {
    accel_ctx_options o;
    check(accel_ctx_options_init(&o, sizeof o));
    o.backend = backend;
    create(o);
  }
  /* Options from accel_ctx_options_init, then changed by the caller. */
  explicit context(const accel_ctx_options &options) { create(options); }

  accel_ctx *get() const noexcept { return ctx_.get(); }

  /* check() with this context's message. */
  void check(accel_status status) const { accel::check(status, ctx_.get()); }

  accel_ctx_info info() const {
    accel_ctx_info i;
    accel::check(accel_ctx_info_init(&i, sizeof i));
    check(accel_ctx_query(ctx_.get(), &i));
    return i;
  }

  /* A stage's statistics (accel_ctx_stats_find); error ACCEL_ERR_NOT_FOUND if it never ran. */
  accel_stage_stats stats(const std::string &stage) const {
    accel_stage_stats s;
    accel::check(accel_stage_stats_init(&s, sizeof s));
    check(accel_ctx_stats_find(ctx_.get(), stage.c_str(), &s));
    return s;
  }

  /* Pillow's convert('L'): U8 (H, W, 3|4) into U8 (H, W). */
  void to_gray(const accel_array &src, accel_array &dst) const { check(accel_image_to_gray(ctx_.get(), &src, &dst)); }

 private:
  void create(const accel_ctx_options &options) {
    accel_ctx *raw = nullptr;
    accel::check(accel_ctx_create(&options, &raw)); // messages of a failed creation belong to no context
    ctx_.reset(raw);
  }
  unique_handle<accel_ctx, accel_ctx_destroy> ctx_;
};

/* The hashes of a batch: input i, kind k (in the order asked for). */
class hashes {
 public:
  hashes(std::vector<accel_hash_kind> kinds, const accel_hash_options &options, std::size_t n)
      : kinds_(std::move(kinds)) {
    accel::check(accel_hash_slot_bytes(&options, &slot_));
    for (accel_hash_kind k : kinds_) {
      std::uint32_t b = 0;
      accel::check(accel_hash_bits(k, options.hash_size, options.color_binbits, &b));
      bits_.push_back(b);
    }
    data_.assign(n * kinds_.size() * slot_, 0);
    statuses_.assign(n, ACCEL_OK);
    messages_.assign(n, std::string());
  }

  std::size_t size() const noexcept { return statuses_.size(); }
  const std::vector<accel_hash_kind> &kinds() const noexcept { return kinds_; }
  /* ACCEL_OK, or why input i failed (its message: message(i)). */
  accel_status status(std::size_t i) const { return statuses_.at(i); }
  bool ok(std::size_t i) const { return status(i) == ACCEL_OK; }
  const std::string &message(std::size_t i) const { return messages_.at(i); }
  std::uint32_t bits(std::size_t k) const { return bits_.at(k); }
  /* The hash's bytes (ceil(bits / 8) of them), as imagehash orders its bits. */
  const std::uint8_t *bytes(std::size_t i, std::size_t k) const {
    if (i >= size() || k >= kinds_.size()) throw std::out_of_range("accel::hashes: input or kind out of range");
    return data_.data() + (i * kinds_.size() + k) * slot_;
  }
  /* imagehash's str(hash); throws accel::error for a failed input. */
  std::string hex(std::size_t i, std::size_t k) const {
    if (!ok(i)) throw error(status(i), message(i));
    std::string out(bits(k) / 4 + 2, '\0');
    accel::check(accel_hash_to_hex(bytes(i, k), bits(k), &out[0], out.size()));
    out.resize(out.find('\0'));
    return out;
  }
  /* A hash of at most 64 bits as the integer int(str(hash), 16). */
  std::uint64_t u64(std::size_t i, std::size_t k) const {
    if (bits(k) > 64) throw error(ACCEL_ERR_INVALID_ARG, "accel::hashes::u64: the hash has more than 64 bits");
    return std::stoull(hex(i, k), nullptr, 16);
  }

  /* For the hash functions below. */
  std::uint8_t *data() noexcept { return data_.data(); }
  std::size_t slot_bytes() const noexcept { return slot_; }
  accel_status *statuses() noexcept { return statuses_.data(); }
  static void on_error(void *user, std::size_t i, accel_status, const char *message) {
    static_cast<hashes *>(user)->messages_.at(i) = message;
  }

 private:
  std::vector<accel_hash_kind> kinds_;
  std::vector<std::uint32_t> bits_;
  std::size_t slot_ = 0;
  std::vector<std::uint8_t> data_;
  std::vector<accel_status> statuses_;
  std::vector<std::string> messages_;
};

/* Hash image files (JPEG, PNG) as imagehash does. A file that cannot be
 * hashed has its status and message in the result; the call throws only
 * when the batch cannot run (bad options, cancellation, ...). */
inline hashes hash_files(const context &ctx, const std::vector<std::string> &paths,
                         const std::vector<accel_hash_kind> &kinds = {ACCEL_HASH_AHASH, ACCEL_HASH_DHASH,
                                                                      ACCEL_HASH_PHASH, ACCEL_HASH_WHASH},
                         int hash_size = 8) {
  accel_hash_options o;
  check(accel_hash_options_init(&o, sizeof o));
  if (kinds.empty() || kinds.size() > ACCEL_HASH_KIND_COUNT)
    throw error(ACCEL_ERR_INVALID_ARG, "accel::hash_files: between 1 and 6 hash kinds");
  o.nkinds = static_cast<std::uint32_t>(kinds.size());
  for (std::size_t k = 0; k < kinds.size(); k++) o.kinds[k] = kinds[k];
  o.hash_size = hash_size;
  hashes h(kinds, o, paths.size());
  o.on_error = &hashes::on_error;
  o.error_user = &h;
  std::vector<const char *> c_paths;
  for (const std::string &p : paths) c_paths.push_back(p.c_str());
  ctx.check(accel_hash_files(ctx.get(), c_paths.data(), c_paths.size(), &o, h.data(), h.slot_bytes(), h.statuses()));
  return h;
}

/* A pair found by a search: the ids and each field's distance. */
struct pair {
  std::uint64_t first, second;
  std::vector<std::uint32_t> distances;
};

/* An exact Hamming index (accel_index) of entries with nfields codes of
 * `bits` bits each. The context must outlive it. */
class index {
 public:
  index(const context &ctx, std::uint32_t bits = 64, std::uint32_t nfields = 1) : ctx_(ctx.get()) {
    accel_index_options o;
    check(accel_index_options_init(&o, sizeof o));
    o.bits = bits;
    o.nfields = nfields;
    accel_index *raw = nullptr;
    check(accel_index_create(ctx_, &o, &raw), ctx_);
    ix_.reset(raw);
  }
  /* A saved index (accel_index_load). */
  static index load(const context &ctx, const std::string &path) {
    accel_index *raw = nullptr;
    check(accel_index_load(ctx.get(), path.c_str(), &raw), ctx.get());
    return index(ctx.get(), raw);
  }

  accel_index *get() const noexcept { return ix_.get(); }
  std::uint32_t bits() const { return info().bits; }
  std::uint32_t nfields() const { return info().nfields; }
  std::size_t size() const { return info().count; }

  /* Entries ids[i] with codes codes[i * words .. (i + 1) * words), words =
   * nfields * bits / 64. All or nothing. */
  void add(const std::vector<std::uint64_t> &ids, const std::vector<std::uint64_t> &codes) {
    const std::size_t words = std::size_t{nfields()} * bits() / 64;
    if (codes.size() != ids.size() * words)
      throw error(ACCEL_ERR_INVALID_ARG, "accel::index::add: codes must hold ids.size() * nfields * bits / 64 words");
    check(accel_index_add(ix_.get(), ids.size(), ids.data(), codes.data(), nullptr, nullptr), ctx_);
  }
  void save(const std::string &path) const { check(accel_index_save(ix_.get(), path.c_str()), ctx_); }

  /* Every pair within the thresholds (one per field) by the rule. */
  std::vector<pair> self_join(const std::vector<std::uint32_t> &thresholds,
                              accel_index_rule rule = ACCEL_INDEX_ALL) const {
    accel_search_options o = search_options(thresholds, rule);
    accel_pairs *raw = nullptr;
    check(accel_index_self_join(ix_.get(), &o, &raw), ctx_);
    pairs_ptr owned(raw);
    std::size_t n = 0;
    const std::uint64_t *first = nullptr, *second = nullptr;
    const std::uint32_t *dist = nullptr;
    std::uint32_t nf = 0;
    check(accel_pairs_view(owned.get(), &n, &first, &second, &dist, &nf), ctx_);
    std::vector<pair> out(n);
    for (std::size_t i = 0; i < n; i++) out[i] = pair{first[i], second[i], {dist + i * nf, dist + (i + 1) * nf}};
    return out;
  }

  /* The groups of near-duplicates (connected components of the self-join):
   * each group's ids sorted, groups sorted by their first id. */
  std::vector<std::vector<std::uint64_t>> groups(const std::vector<std::uint32_t> &thresholds,
                                                 accel_index_rule rule = ACCEL_INDEX_ALL) const {
    accel_search_options o = search_options(thresholds, rule);
    accel_groups *raw = nullptr;
    check(accel_index_group(ix_.get(), &o, &raw), ctx_);
    groups_ptr owned(raw);
    std::size_t n = 0;
    const std::uint64_t *offsets = nullptr, *members = nullptr;
    check(accel_groups_view(owned.get(), &n, &offsets, &members), ctx_);
    std::vector<std::vector<std::uint64_t>> out(n);
    for (std::size_t g = 0; g < n; g++) out[g].assign(members + offsets[g], members + offsets[g + 1]);
    return out;
  }

 private:
  index(accel_ctx *ctx, accel_index *raw) : ctx_(ctx), ix_(raw) {}
  struct info_t {
    std::uint32_t bits = 0, nfields = 0;
    std::size_t count = 0;
  };
  info_t info() const {
    info_t i;
    check(accel_index_info(ix_.get(), &i.bits, &i.nfields, &i.count), ctx_);
    return i;
  }
  accel_search_options search_options(const std::vector<std::uint32_t> &thresholds, accel_index_rule rule) const {
    accel_search_options o;
    check(accel_search_options_init(&o, sizeof o));
    if (thresholds.size() != nfields())
      throw error(ACCEL_ERR_INVALID_ARG, "accel::index: one threshold per field is needed");
    for (std::size_t f = 0; f < thresholds.size(); f++) o.thresholds[f] = thresholds[f];
    o.rule = rule;
    return o;
  }
  accel_ctx *ctx_;
  unique_handle<accel_index, accel_index_destroy> ix_;
};

} // namespace accel

#endif
