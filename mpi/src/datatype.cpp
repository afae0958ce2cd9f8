#include "datatype.hpp"

#include <algorithm>
#include <complex>
#include <cstring>

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
    if (!piece.inner && !last.inner && piece.count == 1 && last.count == 1 &&
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

std::shared_ptr<const Layout> repeated(const std::shared_ptr<const Layout>& layout, std::size_t count,
                                       std::ptrdiff_t stride) {
  auto out = std::make_shared<Layout>();
  append_repeated(out->pieces, layout, count, stride, 0);
  return out;
}

std::shared_ptr<const Layout> layout_of_blocks(const std::vector<Datatype::Block>& blocks) {
  auto out = std::make_shared<Layout>();
  for (const Datatype::Block& b : blocks) append(out->pieces, Piece{b.offset, 1, 0, b.length, nullptr});
  return out;
}

// One element is one run at offset 0 as long as the extent (or nothing at all).
bool dense(const Layout& layout, std::size_t size, std::ptrdiff_t lb, std::ptrdiff_t extent) {
  if (size == 0) return true;
  if (layout.pieces.size() != 1 || lb != 0) return false;
  const Piece& p = layout.pieces.front();
  return !p.inner && p.count == 1 && p.offset == 0 && std::ptrdiff_t(p.bytes) == extent;
}

}  // namespace

std::shared_ptr<const Layout> contiguous_layout(std::size_t bytes) {
  return layout_of_blocks({{0, bytes}});
}

Datatype::Datatype(const char* name, MPI_Datatype public_handle, std::size_t size, Basic basic, std::ptrdiff_t extent,
                   std::vector<Block> blocks)
    : layout_(blocks.empty() ? contiguous_layout(size) : layout_of_blocks(blocks)),
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

void Datatype::pack(const void* buf, std::size_t count, std::byte* out) const {
  const auto* base = static_cast<const std::byte*>(buf);
  auto copy_out = [&](std::ptrdiff_t offset, std::size_t length) {
    std::memcpy(out, base + offset, length);
    out += length;
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, copy_out);
}

void Datatype::unpack(const std::byte* in, std::size_t bytes, void* buf) const {
  auto* base = static_cast<std::byte*>(buf);
  auto copy_in = [&](std::ptrdiff_t offset, std::size_t length) {
    const std::size_t n = std::min(length, bytes);
    std::memcpy(base + offset, in, n);
    in += n;
    bytes -= n;
    return bytes > 0;
  };
  for (std::size_t i = 0; bytes > 0 && size_ > 0; ++i) layout_->for_each_run(std::ptrdiff_t(i) * extent_, copy_in);
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

const Datatype& datatype_of(MPI_Datatype handle) {
  const Datatype& type = datatype_for_construction(handle);
  require(type.committed(), MPI_ERR_TYPE, "the datatype is not committed (call MPI_Type_commit)");
  return type;
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

Datatype* make_struct(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                      std::span<const Datatype* const> types) {
  auto layout = std::make_shared<Layout>();
  std::size_t size = 0;
  std::ptrdiff_t lb = 0, ub = 0;
  bool first = true;
  std::size_t alignment = 1;
  Basic basic = types.empty() ? Basic::none : types[0]->basic();
  for (std::size_t i = 0; i < types.size(); ++i) {
    require(blocklengths[i] >= 0, MPI_ERR_COUNT, "negative block length");
    const Datatype& t = *types[i];
    append_repeated(layout->pieces, t.layout(), std::size_t(blocklengths[i]), t.extent(), displacements[i]);
    size = std::size_t(checked_sum(std::ptrdiff_t(size), std::ptrdiff_t(checked_size(t.size(), std::size_t(blocklengths[i])))));
    const std::ptrdiff_t block_lb = checked_sum(displacements[i], t.lb());
    const std::ptrdiff_t block_ub = checked_sum(block_lb, checked_product(t.extent(), blocklengths[i]));
    lb = first ? block_lb : std::min(lb, block_lb);
    ub = first ? block_ub : std::max(ub, block_ub);
    first = false;
    alignment = std::max(alignment, t.alignment());
    if (t.basic() != basic) basic = Basic::none;
  }
  // Like C structs, the extent is padded to the strictest member alignment.
  const auto align = std::ptrdiff_t(alignment);
  const std::ptrdiff_t extent = checked_sum(checked_sum(ub, -lb), align - 1) / align * align;
  return new Datatype(std::move(layout), size, lb, extent, alignment, basic);
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
