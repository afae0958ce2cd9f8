#include "datatype.hpp"

#include <algorithm>
#include <complex>
#include <cstring>

#include "errors.hpp"

namespace viastack::mpi {

namespace {

// Adjacent blocks become one, so contiguous layouts are recognised as such.
std::vector<Datatype::Block> merged(std::vector<Datatype::Block> blocks) {
  std::vector<Datatype::Block> out;
  for (const Datatype::Block& b : blocks) {
    if (b.length == 0) continue;
    if (!out.empty() && out.back().offset + std::ptrdiff_t(out.back().length) == b.offset)
      out.back().length += b.length;
    else
      out.push_back(b);
  }
  return out;
}

// The blocks of `count` elements of `type` placed at `base`, `stride` bytes apart.
void append_elements(std::vector<Datatype::Block>& out, const Datatype& type, std::size_t count, std::ptrdiff_t base,
                     std::ptrdiff_t stride) {
  for (std::size_t i = 0; i < count; ++i)
    for (const Datatype::Block& b : type.blocks()) out.push_back({base + std::ptrdiff_t(i) * stride + b.offset, b.length});
}

}  // namespace

Datatype::Datatype(const char* name, MPI_Datatype public_handle, std::size_t size, Basic basic, std::ptrdiff_t extent,
                   std::vector<Block> blocks)
    : blocks_(blocks.empty() ? std::vector<Block>{{0, size}} : std::move(blocks)),
      size_(size),
      extent_(extent ? extent : std::ptrdiff_t(size)),
      alignment_(std::max<std::size_t>(1, std::min<std::size_t>(size, 16))),
      basic_(basic),
      predefined_(true),
      committed_(true),
      name_(name),
      public_handle_(public_handle) {
  if (extent) alignment_ = std::min<std::size_t>(std::size_t(extent), 16);
  contiguous_ = blocks_.size() == 1 && blocks_[0].offset == 0 && std::ptrdiff_t(blocks_[0].length) == extent_;
}

Datatype::Datatype(std::vector<Block> blocks, std::ptrdiff_t lb, std::ptrdiff_t extent, std::size_t alignment, Basic basic)
    : blocks_(merged(std::move(blocks))), lb_(lb), extent_(extent), alignment_(alignment), basic_(basic) {
  for (const Block& b : blocks_) size_ += b.length;
  contiguous_ = blocks_.empty() || (blocks_.size() == 1 && blocks_[0].offset == 0 && lb_ == 0 &&
                                    std::ptrdiff_t(blocks_[0].length) == extent_);
}

void Datatype::pack(const void* buf, std::size_t count, std::byte* out) const {
  const auto* base = static_cast<const std::byte*>(buf);
  for (std::size_t i = 0; i < count; ++i)
    for (const Block& b : blocks_) {
      std::memcpy(out, base + std::ptrdiff_t(i) * extent_ + b.offset, b.length);
      out += b.length;
    }
}

void Datatype::unpack(const std::byte* in, std::size_t bytes, void* buf) const {
  auto* base = static_cast<std::byte*>(buf);
  for (std::size_t i = 0; bytes > 0; ++i)
    for (const Block& b : blocks_) {
      const std::size_t n = std::min(b.length, bytes);
      std::memcpy(base + std::ptrdiff_t(i) * extent_ + b.offset, in, n);
      in += n;
      bytes -= n;
      if (bytes == 0) return;
    }
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
  std::vector<Datatype::Block> blocks;
  append_elements(blocks, old, std::size_t(count), 0, old.extent());
  return new Datatype(std::move(blocks), old.lb(), old.extent() * count, old.alignment(), old.basic());
}

Datatype* make_hvector(int count, int blocklength, std::ptrdiff_t stride_bytes, const Datatype& old) {
  require(count >= 0 && blocklength >= 0, MPI_ERR_COUNT, "negative count or block length");
  std::vector<Datatype::Block> blocks;
  for (int i = 0; i < count; ++i)
    append_elements(blocks, old, std::size_t(blocklength), std::ptrdiff_t(i) * stride_bytes, old.extent());
  std::ptrdiff_t lb = 0, ub = 0;
  if (count > 0 && blocklength > 0) {
    const std::ptrdiff_t last = std::ptrdiff_t(count - 1) * stride_bytes;
    lb = std::min<std::ptrdiff_t>(0, last) + old.lb();
    ub = std::max<std::ptrdiff_t>(0, last) + old.lb() + old.extent() * blocklength;
  }
  return new Datatype(std::move(blocks), lb, ub - lb, old.alignment(), old.basic());
}

Datatype* make_struct(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                      std::span<const Datatype* const> types) {
  std::vector<Datatype::Block> blocks;
  std::ptrdiff_t lb = 0, ub = 0;
  bool first = true;
  std::size_t alignment = 1;
  Basic basic = types.empty() ? Basic::none : types[0]->basic();
  for (std::size_t i = 0; i < types.size(); ++i) {
    require(blocklengths[i] >= 0, MPI_ERR_COUNT, "negative block length");
    const Datatype& t = *types[i];
    append_elements(blocks, t, std::size_t(blocklengths[i]), displacements[i], t.extent());
    const std::ptrdiff_t block_lb = displacements[i] + t.lb();
    const std::ptrdiff_t block_ub = block_lb + t.extent() * blocklengths[i];
    lb = first ? block_lb : std::min(lb, block_lb);
    ub = first ? block_ub : std::max(ub, block_ub);
    first = false;
    alignment = std::max(alignment, t.alignment());
    if (t.basic() != basic) basic = Basic::none;
  }
  // Like C structs, the extent is padded to the strictest member alignment.
  std::ptrdiff_t extent = ub - lb;
  extent = (extent + std::ptrdiff_t(alignment) - 1) / std::ptrdiff_t(alignment) * std::ptrdiff_t(alignment);
  return new Datatype(std::move(blocks), lb, extent, alignment, basic);
}

Datatype* make_resized(const Datatype& old, std::ptrdiff_t lb, std::ptrdiff_t extent) {
  return new Datatype(old.blocks(), lb, extent, old.alignment(), old.basic());
}

void free_datatype(MPI_Datatype handle) {
  Datatype& type = datatype_for_construction(handle);
  require(!type.predefined(), MPI_ERR_TYPE, "a predefined datatype cannot be freed");
  type.handle.kind = HandleKind{};  // a stale handle is then recognised as invalid
  delete &type;
}

}  // namespace viastack::mpi
