#include "datatype.hpp"

#include <algorithm>
#include <complex>
#include <cstring>
#include <string_view>

#include <via/copy.hpp>

#include "attributes.hpp"
#include "errors.hpp"

namespace viastack::mpi {

namespace {

using Piece = Layout::Piece;

[[noreturn]] void too_large() {
  fail(MPI_ERR_COUNT, "the datatype's size or extent does not fit in an address-sized integer (MPI_Aint)");
}

std::ptrdiff_t checked_product(std::ptrdiff_t a, std::ptrdiff_t b) {
  std::ptrdiff_t product;
  if (__builtin_mul_overflow(a, b, &product)) too_large();
  return product;
}

std::ptrdiff_t checked_sum(std::ptrdiff_t a, std::ptrdiff_t b) {
  std::ptrdiff_t sum;
  if (__builtin_add_overflow(a, b, &sum)) too_large();
  return sum;
}

std::size_t checked_size(std::size_t element_size, std::size_t count) {
  const std::ptrdiff_t size = checked_product(std::ptrdiff_t(element_size), std::ptrdiff_t(count));
  return std::size_t(size);
}

// A run of contiguous bytes repeated `stride` apart is one longer run when
// the repetitions touch; a contiguous run directly after another joins it.
void append(std::vector<Piece>& pieces, Piece piece) {
  if (piece.count == 0 || (!piece.inner && piece.bytes == 0)) return;
  if (!piece.inner && piece.count > 1 && piece.stride == std::ptrdiff_t(piece.bytes)) {
    piece.bytes *= piece.count;
    piece.count = 1;
    piece.stride = 0;
  }
  if (!pieces.empty()) {
    Piece& last = pieces.back();
    if (!piece.inner && !last.inner && piece.count == 1 && last.count == 1 && piece.scalar == last.scalar &&
        last.offset + std::ptrdiff_t(last.bytes) == piece.offset) {
      last.bytes += piece.bytes;
      return;
    }
  }
  pieces.push_back(std::move(piece));
}

// The pieces of `count` copies of `layout`, `stride` bytes apart, shifted by
// `displacement`. A lone piece is repeated in place (its count multiplied when
// the copies continue its own progression), so nests of vectors stay flat where they can.
void append_repeated(std::vector<Piece>& pieces, const std::shared_ptr<const Layout>& layout, std::size_t count,
                     std::ptrdiff_t stride, std::ptrdiff_t displacement) {
  if (count == 0 || layout->pieces.empty()) return;
  if (count == 1) {
    for (Piece piece : layout->pieces) {
      piece.offset += displacement;
      append(pieces, std::move(piece));
    }
    return;
  }
  if (layout->pieces.size() == 1) {
    Piece piece = layout->pieces.front();
    piece.offset += displacement;
    if (piece.count == 1) {
      piece.count = count;
      piece.stride = stride;
      return append(pieces, std::move(piece));
    }
    std::ptrdiff_t progression;
    if (!__builtin_mul_overflow(piece.stride, std::ptrdiff_t(piece.count), &progression) && progression == stride) {
      piece.count = std::size_t(checked_product(std::ptrdiff_t(piece.count), std::ptrdiff_t(count)));
      return append(pieces, std::move(piece));
    }
  }
  append(pieces, Piece{displacement, count, stride, 0, layout});
}

// Sums up a finished list of pieces: where its data lies and its external32 size.
std::shared_ptr<const Layout> finished(std::shared_ptr<Layout> layout) {
  bool any = false;
  for (const Piece& p : layout->pieces) {
    if (p.inner && p.inner->pieces.empty()) continue;
    const std::ptrdiff_t inner_lb = p.inner ? p.inner->true_lb : 0;
    const std::ptrdiff_t inner_ub = p.inner ? p.inner->true_ub : std::ptrdiff_t(p.bytes);
    const std::size_t inner_external =
        p.inner ? p.inner->external_size : p.bytes / native_size(p.scalar) * external_size(p.scalar);
    const std::ptrdiff_t span = checked_product(std::ptrdiff_t(p.count) - 1, p.stride);
    const std::ptrdiff_t lo = checked_sum(checked_sum(p.offset, inner_lb), std::min<std::ptrdiff_t>(0, span));
    const std::ptrdiff_t hi = checked_sum(checked_sum(p.offset, inner_ub), std::max<std::ptrdiff_t>(0, span));
    layout->true_lb = any ? std::min(layout->true_lb, lo) : lo;
    layout->true_ub = any ? std::max(layout->true_ub, hi) : hi;
    layout->external_size = checked_size(inner_external, p.count) + layout->external_size;
    any = true;
  }
  return layout;
}

std::shared_ptr<const Layout> repeated(const std::shared_ptr<const Layout>& layout, std::size_t count,
                                       std::ptrdiff_t stride) {
  auto out = std::make_shared<Layout>();
  append_repeated(out->pieces, layout, count, stride, 0);
  return finished(std::move(out));
}

// One run of `bytes` bytes made of `scalar`s at offset 0.
std::shared_ptr<const Layout> run_layout(std::size_t bytes, Scalar scalar) {
  auto out = std::make_shared<Layout>();
  append(out->pieces, Piece{0, 1, 0, bytes, nullptr, scalar});
  return finished(std::move(out));
}

// One element is runs that follow each other from offset 0 to the extent (or nothing at all).
bool dense(const Layout& layout, std::size_t size, std::ptrdiff_t lb, std::ptrdiff_t extent) {
  if (size == 0) return true;
  if (lb != 0) return false;
  std::ptrdiff_t next = 0;
  for (const Piece& p : layout.pieces) {
    if (p.inner || p.count != 1 || p.offset != next) return false;
    next += std::ptrdiff_t(p.bytes);
  }
  return next == extent;
}

bool is_pair(Basic basic) { return basic >= Basic::float_int; }

// What a predefined type's values are made of in external32 (for a pair: its value part).
Scalar predefined_scalar(std::string_view name, Basic basic, std::size_t size) {
  if (name == "MPI_LONG_DOUBLE" || name == "MPI_C_LONG_DOUBLE_COMPLEX" || name == "MPI_CXX_LONG_DOUBLE_COMPLEX" ||
      name == "MPI_LONG_DOUBLE_INT")
    return Scalar::x87_as_quad;
  if (name == "MPI_LONG" || name == "MPI_LONG_INT") return Scalar::long_as4;
  if (name == "MPI_UNSIGNED_LONG") return Scalar::ulong_as4;
  if (basic == Basic::wchar) return Scalar::wchar_as2;
  std::size_t component = size;
  switch (basic) {
    case Basic::none: break;
    case Basic::complex_float: case Basic::complex_double: case Basic::complex_long_double:
      component = basic_size(basic) / 2;
      break;
    case Basic::float_int: case Basic::int_int: component = 4; break;
    case Basic::double_int: case Basic::long_int: component = 8; break;
    case Basic::short_int: component = 2; break;
    default: component = basic_size(basic);
  }
  switch (component) {
    case 2: return Scalar::swap2;
    case 4: return Scalar::swap4;
    case 8: return Scalar::swap8;
    case 16: return Scalar::swap16;
    default: return Scalar::bytes;
  }
}

// A predefined type's element: one run, or for a value-index pair the value
// at 0 and the int where `blocks` puts it (after the value when they are one block).
std::shared_ptr<const Layout> predefined_layout(std::string_view name, Basic basic, std::size_t size,
                                                const std::vector<Datatype::Block>& blocks) {
  const Scalar scalar = predefined_scalar(name, basic, size);
  if (!is_pair(basic)) return run_layout(size, scalar);
  const std::size_t value_bytes = size - sizeof(int);
  const std::ptrdiff_t int_offset = blocks.size() > 1 ? blocks[1].offset : std::ptrdiff_t(value_bytes);
  auto out = std::make_shared<Layout>();
  append(out->pieces, Piece{0, 1, 0, value_bytes, nullptr, scalar});
  append(out->pieces, Piece{int_offset, 1, 0, sizeof(int), nullptr, Scalar::swap4});
  return finished(std::move(out));
}

// One element of a block list: `length` old types at byte `displacement`.
struct BlockSpec {
  int length;
  std::ptrdiff_t displacement;
  const Datatype* type;
};

// A type made of blocks (hindexed and struct): the typemaps of the blocks one
// after the other. Blocks of length 0 hold nothing and do not move the bounds.
// pad_extent: a struct's extent is padded to its strictest member alignment, like a C struct's.
template <class BlockAt>
Datatype* make_blocks(std::size_t count, BlockAt block_at, bool pad_extent) {
  auto layout = std::make_shared<Layout>();
  std::size_t size = 0;
  std::ptrdiff_t lb = 0, ub = 0;
  bool any = false;
  std::size_t alignment = 1;
  Basic basic = Basic::none;
  for (std::size_t i = 0; i < count; ++i) {
    const BlockSpec b = block_at(i);
    require(b.length >= 0, MPI_ERR_COUNT, "negative block length");
    const Datatype& t = *b.type;
    basic = i == 0 ? t.basic() : (t.basic() == basic ? basic : Basic::none);
    alignment = std::max(alignment, t.alignment());
    if (b.length == 0) continue;
    append_repeated(layout->pieces, t.layout(), std::size_t(b.length), t.extent(), b.displacement);
    size = std::size_t(checked_sum(std::ptrdiff_t(size), std::ptrdiff_t(checked_size(t.size(), std::size_t(b.length)))));
    const std::ptrdiff_t block_lb = checked_sum(b.displacement, t.lb());
    const std::ptrdiff_t block_ub = checked_sum(block_lb, checked_product(t.extent(), b.length));
    lb = any ? std::min(lb, block_lb) : block_lb;
    ub = any ? std::max(ub, block_ub) : block_ub;
    any = true;
  }
  std::ptrdiff_t extent = checked_sum(ub, -lb);
  if (pad_extent) {
    const auto align = std::ptrdiff_t(alignment);
    extent = checked_sum(extent, align - 1) / align * align;
  }
  return new Datatype(finished(std::move(layout)), size, lb, extent, alignment, basic);
}

// Which indices of one dimension of a darray a process holds: `full_blocks`
// blocks of `block` indices, `period` apart from `first`, then `tail` indices.
struct Ownership {
  std::ptrdiff_t first = 0;
  std::ptrdiff_t block = 0;
  std::ptrdiff_t period = 0;
  std::ptrdiff_t full_blocks = 0;
  std::ptrdiff_t tail = 0;
  std::ptrdiff_t count() const { return full_blocks * block + tail; }
};

Ownership owned_indices(int gsize, int distrib, int darg, int psize, int coord) {
  require(gsize >= 1 && psize >= 1, MPI_ERR_ARG, "global sizes and process grid sizes must be at least 1");
  require(darg > 0 || darg == MPI_DISTRIBUTE_DFLT_DARG, MPI_ERR_ARG,
          "a distribution argument must be positive or MPI_DISTRIBUTE_DFLT_DARG");
  Ownership own;
  switch (distrib) {
    case MPI_DISTRIBUTE_NONE:
      require(psize == 1, MPI_ERR_ARG, "a dimension with MPI_DISTRIBUTE_NONE must have 1 process");
      own.block = gsize;
      own.full_blocks = 1;
      return own;
    case MPI_DISTRIBUTE_BLOCK: {
      const std::ptrdiff_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (std::ptrdiff_t(gsize) + psize - 1) / psize : darg;
      require(b * psize >= gsize, MPI_ERR_ARG, "block size times processes must cover the dimension");
      own.first = std::min<std::ptrdiff_t>(b * coord, gsize);
      own.tail = std::min<std::ptrdiff_t>(b, gsize - own.first);
      return own;
    }
    case MPI_DISTRIBUTE_CYCLIC: {
      const std::ptrdiff_t b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
      own.first = b * coord;
      own.block = b;
      own.period = b * psize;
      if (own.first >= gsize) return own;
      const std::ptrdiff_t blocks = (gsize - own.first + own.period - 1) / own.period;
      const std::ptrdiff_t last = gsize - (own.first + (blocks - 1) * own.period);
      own.full_blocks = last >= b ? blocks : blocks - 1;
      own.tail = last >= b ? 0 : last;
      return own;
    }
    default:
      fail(MPI_ERR_ARG, "a distribution must be MPI_DISTRIBUTE_BLOCK, _CYCLIC or _NONE");
  }
}

// The dimension order from the innermost (fastest varying) out.
std::vector<std::size_t> inner_to_outer(std::size_t ndims, int order) {
  require(order == MPI_ORDER_C || order == MPI_ORDER_FORTRAN, MPI_ERR_ARG,
          "the order must be MPI_ORDER_C or MPI_ORDER_FORTRAN");
  std::vector<std::size_t> dims(ndims);
  for (std::size_t i = 0; i < ndims; ++i) dims[i] = order == MPI_ORDER_C ? ndims - 1 - i : i;
  return dims;
}

// `layout` moved by `displacement` bytes.
std::shared_ptr<const Layout> shifted(const std::shared_ptr<const Layout>& layout, std::ptrdiff_t displacement) {
  auto out = std::make_shared<Layout>();
  append_repeated(out->pieces, layout, 1, 0, displacement);
  return finished(std::move(out));
}

// One scalar in external32 at out (big-endian); returns the bytes written.
std::size_t to_external(const std::byte* in, Scalar scalar, std::byte* out) {
  auto reversed = [&](const std::byte* from, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = from[n - 1 - i];
    return n;
  };
  switch (scalar) {
    case Scalar::bytes: *out = *in; return 1;
    case Scalar::swap2: return reversed(in, 2);
    case Scalar::swap4: return reversed(in, 4);
    case Scalar::swap8: return reversed(in, 8);
    case Scalar::swap16: return reversed(in, 16);
    case Scalar::long_as4: {
      long value;
      std::memcpy(&value, in, sizeof value);
      require(value >= INT32_MIN && value <= INT32_MAX, MPI_ERR_CONVERSION,
              "a long does not fit in external32's 4 bytes");
      const auto narrow = std::int32_t(value);
      return reversed(reinterpret_cast<const std::byte*>(&narrow), 4);
    }
    case Scalar::ulong_as4: {
      unsigned long value;
      std::memcpy(&value, in, sizeof value);
      require(value <= UINT32_MAX, MPI_ERR_CONVERSION, "an unsigned long does not fit in external32's 4 bytes");
      const auto narrow = std::uint32_t(value);
      return reversed(reinterpret_cast<const std::byte*>(&narrow), 4);
    }
    case Scalar::wchar_as2: {
      wchar_t value;
      std::memcpy(&value, in, sizeof value);
      require(value >= 0 && value <= 0xffff, MPI_ERR_CONVERSION, "a wchar_t does not fit in external32's 2 bytes");
      const auto narrow = std::uint16_t(value);
      return reversed(reinterpret_cast<const std::byte*>(&narrow), 2);
    }
    case Scalar::x87_as_quad: {
      long double value;
      std::memcpy(&value, in, sizeof value);
      const auto quad = __float128(value);
      return reversed(reinterpret_cast<const std::byte*>(&quad), 16);
    }
  }
  return 0;
}

// One external32 scalar at in, stored natively at out; returns the bytes read.
std::size_t from_external(const std::byte* in, Scalar scalar, std::byte* out) {
  auto reversed = [&](std::byte* to, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) to[i] = in[n - 1 - i];
    return n;
  };
  switch (scalar) {
    case Scalar::bytes: *out = *in; return 1;
    case Scalar::swap2: return reversed(out, 2);
    case Scalar::swap4: return reversed(out, 4);
    case Scalar::swap8: return reversed(out, 8);
    case Scalar::swap16: return reversed(out, 16);
    case Scalar::long_as4: {
      std::int32_t narrow;
      reversed(reinterpret_cast<std::byte*>(&narrow), 4);
      const long value = narrow;
      std::memcpy(out, &value, sizeof value);
      return 4;
    }
    case Scalar::ulong_as4: {
      std::uint32_t narrow;
      reversed(reinterpret_cast<std::byte*>(&narrow), 4);
      const unsigned long value = narrow;
      std::memcpy(out, &value, sizeof value);
      return 4;
    }
    case Scalar::wchar_as2: {
      std::uint16_t narrow;
      reversed(reinterpret_cast<std::byte*>(&narrow), 2);
      const wchar_t value = wchar_t(narrow);
      std::memcpy(out, &value, sizeof value);
      return 2;
    }
    case Scalar::x87_as_quad: {
      __float128 quad;
      reversed(reinterpret_cast<std::byte*>(&quad), 16);
      const auto value = static_cast<long double>(quad);
      std::memcpy(out, &value, sizeof value);
      return 16;
    }
  }
  return 0;
}

}  // namespace

std::size_t native_size(Scalar scalar) {
  switch (scalar) {
    case Scalar::bytes: return 1;
    case Scalar::swap2: return 2;
    case Scalar::swap4: case Scalar::wchar_as2: return 4;
    case Scalar::swap8: case Scalar::long_as4: case Scalar::ulong_as4: return 8;
    case Scalar::swap16: case Scalar::x87_as_quad: return 16;
  }
  return 1;
}

std::size_t external_size(Scalar scalar) {
  switch (scalar) {
    case Scalar::long_as4: case Scalar::ulong_as4: return 4;
    case Scalar::wchar_as2: return 2;
    default: return native_size(scalar);
  }
}

std::shared_ptr<const Layout> contiguous_layout(std::size_t bytes) { return run_layout(bytes, Scalar::bytes); }

Datatype::Datatype(const char* name, MPI_Datatype public_handle, std::size_t size, Basic basic, std::ptrdiff_t extent,
                   std::vector<Block> blocks)
    : layout_(predefined_layout(name, basic, size, blocks)),
      size_(size),
      extent_(extent ? extent : std::ptrdiff_t(size)),
      alignment_(std::max<std::size_t>(1, std::min<std::size_t>(size, 16))),
      basic_(basic),
      predefined_(true),
      committed_(true),
      name_(name),
      public_handle_(public_handle) {
  if (extent) alignment_ = std::min<std::size_t>(std::size_t(extent), 16);
  contiguous_ = dense(*layout_, size_, lb_, extent_);
}

Datatype::Datatype(std::shared_ptr<const Layout> layout, std::size_t size, std::ptrdiff_t lb, std::ptrdiff_t extent,
                   std::size_t alignment, Basic basic)
    : layout_(std::move(layout)), size_(size), lb_(lb), extent_(extent), alignment_(alignment), basic_(basic) {
  contiguous_ = dense(*layout_, size_, lb_, extent_);
}

Datatype::Datatype(const Datatype& other)
    : layout_(other.layout_),
      size_(other.size_),
      lb_(other.lb_),
      extent_(other.extent_),
      alignment_(other.alignment_),
      basic_(other.basic_),
      committed_(other.committed_),
      contiguous_(other.contiguous_),
      contents_(other.contents_) {}

Datatype::Datatype(const Datatype& base, std::string name, int combiner, std::vector<int> integers)
    : Datatype(base) {
  predefined_ = true;
  name_ = std::move(name);
  set_contents(combiner, std::move(integers), {}, {});
}

void Datatype::set_contents(int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                            std::span<const Datatype* const> types) {
  contents_.combiner = combiner;
  contents_.integers = std::move(integers);
  contents_.addresses = std::move(addresses);
  contents_.types.clear();
  // A predefined type lives as long as the library; a derived one is copied,
  // as the program may free it while this type lives.
  for (const Datatype* t : types)
    contents_.types.push_back(t->predefined() ? std::shared_ptr<const Datatype>(t, [](const Datatype*) {})
                                              : std::make_shared<const Datatype>(*t));
}

void Datatype::pack(const void* buf, std::size_t count, std::byte* out) const {
  const auto* base = static_cast<const std::byte*>(buf);
  auto copy_out = [&](std::ptrdiff_t offset, std::size_t length, Scalar) {
    via::copy_memory(out, base + offset, length);
    out += length;
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, copy_out);
}

void Datatype::unpack(const std::byte* in, std::size_t bytes, void* buf) const {
  auto* base = static_cast<std::byte*>(buf);
  auto copy_in = [&](std::ptrdiff_t offset, std::size_t length, Scalar) {
    const std::size_t n = std::min(length, bytes);
    via::copy_memory(base + offset, in, n);
    in += n;
    bytes -= n;
    return bytes > 0;
  };
  for (std::size_t i = 0; bytes > 0 && size_ > 0; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, copy_in);
}

void Datatype::pack_external(const void* buf, std::size_t count, std::byte* out) const {
  const auto* base = static_cast<const std::byte*>(buf);
  auto convert_out = [&](std::ptrdiff_t offset, std::size_t length, Scalar scalar) {
    for (std::size_t at = 0; at < length; at += native_size(scalar)) out += to_external(base + offset + at, scalar, out);
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, convert_out);
}

void Datatype::unpack_external(const std::byte* in, std::size_t count, void* buf) const {
  auto* base = static_cast<std::byte*>(buf);
  auto convert_in = [&](std::ptrdiff_t offset, std::size_t length, Scalar scalar) {
    for (std::size_t at = 0; at < length; at += native_size(scalar)) in += from_external(in, scalar, base + offset + at);
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, convert_in);
}

std::size_t basic_size(Basic basic) {
  switch (basic) {
    case Basic::none: return 1;
    case Basic::int8: case Basic::uint8: case Basic::c_bool: return 1;
    case Basic::int16: case Basic::uint16: return 2;
    case Basic::int32: case Basic::uint32: case Basic::float32: return 4;
    case Basic::wchar: return sizeof(wchar_t);
    case Basic::int64: case Basic::uint64: case Basic::float64: return 8;
    case Basic::long_double: return sizeof(long double);
    case Basic::complex_float: return sizeof(std::complex<float>);
    case Basic::complex_double: return sizeof(std::complex<double>);
    case Basic::complex_long_double: return sizeof(std::complex<long double>);
    case Basic::float_int: return 8;
    case Basic::double_int: case Basic::long_int: return 16;
    case Basic::int_int: return 8;
    case Basic::short_int: return 8;
    case Basic::long_double_int: return 32;
  }
  return 1;
}

Datatype& datatype_for_construction(MPI_Datatype handle) {
  if (handle == nullptr || handle->kind != HandleKind::datatype || handle->impl == nullptr)
    fail(MPI_ERR_TYPE, "invalid datatype (null, freed or not a datatype)");
  return *handle->impl;
}

void fail_invalid_datatype(MPI_Datatype handle) {
  datatype_for_construction(handle);  // throws for a null, foreign or freed handle
  fail(MPI_ERR_TYPE, "the datatype is not committed (call MPI_Type_commit)");
}

Datatype* make_contiguous(int count, const Datatype& old) {
  require(count >= 0, MPI_ERR_COUNT, "negative count");
  const std::ptrdiff_t extent = checked_product(old.extent(), count);
  return new Datatype(repeated(old.layout(), std::size_t(count), old.extent()), checked_size(old.size(), std::size_t(count)),
                      old.lb(), extent, old.alignment(), old.basic());
}

Datatype* make_hvector(int count, int blocklength, std::ptrdiff_t stride_bytes, const Datatype& old) {
  require(count >= 0 && blocklength >= 0, MPI_ERR_COUNT, "negative count or block length");
  const std::ptrdiff_t block_extent = checked_product(old.extent(), blocklength);
  const std::size_t size = checked_size(checked_size(old.size(), std::size_t(blocklength)), std::size_t(count));
  std::ptrdiff_t lb = 0, ub = 0;
  if (count > 0 && blocklength > 0) {
    const std::ptrdiff_t last = checked_product(count - 1, stride_bytes);
    lb = checked_sum(std::min<std::ptrdiff_t>(0, last), old.lb());
    ub = checked_sum(checked_sum(std::max<std::ptrdiff_t>(0, last), old.lb()), block_extent);
  }
  const auto block = repeated(old.layout(), std::size_t(blocklength), old.extent());
  return new Datatype(repeated(block, std::size_t(count), stride_bytes), size, lb, checked_sum(ub, -lb),
                      old.alignment(), old.basic());
}

Datatype* make_hindexed(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                        const Datatype& old) {
  return make_blocks(
      blocklengths.size(), [&](std::size_t i) { return BlockSpec{blocklengths[i], displacements[i], &old}; }, false);
}

Datatype* make_struct(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                      std::span<const Datatype* const> types) {
  return make_blocks(
      types.size(), [&](std::size_t i) { return BlockSpec{blocklengths[i], displacements[i], types[i]}; }, true);
}

Datatype* make_subarray(std::span<const int> sizes, std::span<const int> subsizes, std::span<const int> starts,
                        int order, const Datatype& old) {
  require(!sizes.empty(), MPI_ERR_ARG, "a subarray needs at least one dimension");
  std::shared_ptr<const Layout> layout = old.layout();
  std::ptrdiff_t stride = old.extent();  // bytes between neighbours in the current dimension
  std::ptrdiff_t displacement = 0;
  std::size_t size = old.size();
  for (std::size_t d : inner_to_outer(sizes.size(), order)) {
    require(sizes[d] >= 1, MPI_ERR_ARG, "subarray sizes must be at least 1");
    require(subsizes[d] >= 0 && subsizes[d] <= sizes[d], MPI_ERR_ARG, "a subarray size must be from 0 to the size");
    require(starts[d] >= 0 && starts[d] <= sizes[d] - subsizes[d], MPI_ERR_ARG,
            "a subarray must start inside the array and end by its end");
    layout = repeated(layout, std::size_t(subsizes[d]), stride);
    displacement = checked_sum(displacement, checked_product(starts[d], stride));
    size = checked_size(size, std::size_t(subsizes[d]));
    stride = checked_product(stride, sizes[d]);
  }
  return new Datatype(shifted(layout, displacement), size, 0, stride, old.alignment(), old.basic());
}

Datatype* make_darray(int size, int rank, std::span<const int> gsizes, std::span<const int> distribs,
                      std::span<const int> dargs, std::span<const int> psizes, int order, const Datatype& old) {
  require(!gsizes.empty(), MPI_ERR_ARG, "a distributed array needs at least one dimension");
  require(size >= 1 && rank >= 0 && rank < size, MPI_ERR_ARG, "the rank must be from 0 to the group size - 1");
  // The process grid is row-major whatever the array's order.
  std::vector<int> coords(gsizes.size());
  std::ptrdiff_t processes = 1;
  for (std::size_t d = gsizes.size(); d-- > 0;) {
    require(psizes[d] >= 1, MPI_ERR_ARG, "process grid sizes must be at least 1");
    processes = checked_product(processes, psizes[d]);
    coords[d] = int(rank / (processes / psizes[d]) % psizes[d]);
  }
  require(processes == size, MPI_ERR_ARG, "the process grid's sizes must multiply to the group size");
  std::shared_ptr<const Layout> layout = old.layout();
  std::ptrdiff_t stride = old.extent();
  std::size_t bytes = old.size();
  for (std::size_t d : inner_to_outer(gsizes.size(), order)) {
    const Ownership own = owned_indices(gsizes[d], distribs[d], dargs[d], psizes[d], coords[d]);
    auto dimension = std::make_shared<Layout>();
    if (own.full_blocks > 0)
      append_repeated(dimension->pieces, repeated(layout, std::size_t(own.block), stride), std::size_t(own.full_blocks),
                      checked_product(own.period, stride), checked_product(own.first, stride));
    append_repeated(dimension->pieces, layout, std::size_t(own.tail), stride,
                    checked_product(own.first + own.full_blocks * own.period, stride));
    layout = finished(std::move(dimension));
    bytes = checked_size(bytes, std::size_t(own.count()));
    stride = checked_product(stride, gsizes[d]);
  }
  return new Datatype(std::move(layout), bytes, 0, stride, old.alignment(), old.basic());
}

Datatype* make_resized(const Datatype& old, std::ptrdiff_t lb, std::ptrdiff_t extent) {
  return new Datatype(old.layout(), old.size(), lb, extent, old.alignment(), old.basic());
}

void free_datatype(MPI_Datatype handle) {
  Datatype& type = datatype_for_construction(handle);
  require(!type.predefined(), MPI_ERR_TYPE, "a predefined datatype cannot be freed");
  attribute_cache().remove_all(AttributeHolder::datatype, handle);
  type.handle.kind = HandleKind{};  // a stale handle is then recognised as invalid
  delete &type;
}

}  // namespace viastack::mpi
