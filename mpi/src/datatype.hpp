// Datatypes: the predefined ones and the derived ones built from them
// (contiguous, vector, struct). A type is described by the layout of one
// element relative to its start; sending packs its bytes, receiving unpacks them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "abi.hpp"

namespace viastack::mpi {

// The element kinds that reductions understand.
enum class Basic : std::uint8_t {
  none,  // mixed or opaque (MPI_BYTE, MPI_PACKED, structs of several kinds)
  int8, uint8, int16, uint16, int32, uint32, int64, uint64,
  float32, float64, long_double, c_bool, wchar,
  complex_float, complex_double, complex_long_double,
  // MAXLOC / MINLOC pairs
  float_int, double_int, long_int, int_int, short_int, long_double_int,
};

// Where one element's bytes lie, in type-map order: a list of pieces, each
// `count` repetitions `stride` bytes apart, starting at `offset`, of either
// `bytes` contiguous bytes or of another layout. Contiguous and vector types
// of any count, and nests of them, are a piece or two whatever their count.
struct Layout {
  struct Piece {
    std::ptrdiff_t offset = 0;
    std::size_t count = 1;
    std::ptrdiff_t stride = 0;
    std::size_t bytes = 0;                // contiguous bytes a repetition, when `inner` is null
    std::shared_ptr<const Layout> inner;  // else what each repetition lays out (shared with the type it came from)
  };
  std::vector<Piece> pieces;

  // Calls visit(offset, length) for each contiguous run at base + its offset,
  // in type-map order, while visit returns true; false when visit stopped it.
  template <class Visit>
  bool for_each_run(std::ptrdiff_t base, Visit& visit) const {
    for (const Piece& p : pieces)
      for (std::size_t i = 0; i < p.count; ++i) {
        const std::ptrdiff_t at = base + p.offset + std::ptrdiff_t(i) * p.stride;
        if (p.inner ? !p.inner->for_each_run(at, visit) : !visit(at, p.bytes)) return false;
      }
    return true;
  }
};

// One run of `bytes` contiguous bytes at offset 0.
std::shared_ptr<const Layout> contiguous_layout(std::size_t bytes);

class Datatype {
 public:
  struct Block {
    std::ptrdiff_t offset;
    std::size_t length;
  };

  // A predefined type: `size` data bytes within `extent`, laid out as `blocks` (one block when empty).
  Datatype(const char* name, MPI_Datatype public_handle, std::size_t size, Basic basic, std::ptrdiff_t extent = 0,
           std::vector<Block> blocks = {});
  // A derived type from its layout, data bytes, bounds and element kind.
  Datatype(std::shared_ptr<const Layout> layout, std::size_t size, std::ptrdiff_t lb, std::ptrdiff_t extent,
           std::size_t alignment, Basic basic);

  std::size_t size() const { return size_; }  // data bytes in one element
  std::ptrdiff_t lb() const { return lb_; }
  std::ptrdiff_t extent() const { return extent_; }
  std::size_t alignment() const { return alignment_; }
  Basic basic() const { return basic_; }
  bool predefined() const { return predefined_; }
  bool committed() const { return committed_; }
  void commit() { committed_ = true; }
  // One element is one block at offset 0 whose length is the extent: count elements are count*size contiguous bytes.
  bool contiguous() const { return contiguous_; }
  const std::shared_ptr<const Layout>& layout() const { return layout_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Copies count elements at buf into packed bytes, and back.
  void pack(const void* buf, std::size_t count, std::byte* out) const;
  void unpack(const std::byte* in, std::size_t bytes, void* buf) const;  // bytes: packed bytes available

  // What MPI calls return for this type: the exported object for a predefined type, else `handle`.
  MPI_Datatype public_handle() const { return public_handle_ ? public_handle_ : const_cast<ompi_datatype_t*>(&handle); }
  ompi_datatype_t handle{HandleKind::datatype, this};

 private:
  std::shared_ptr<const Layout> layout_;
  std::size_t size_ = 0;
  std::ptrdiff_t lb_ = 0, extent_ = 0;
  std::size_t alignment_ = 1;
  Basic basic_ = Basic::none;
  bool predefined_ = false, committed_ = false, contiguous_ = false;
  std::string name_;
  MPI_Datatype public_handle_ = nullptr;
};

// The size of one element of a reduction kind.
std::size_t basic_size(Basic basic);

// The C++ object behind a handle; throws MPI_ERR_TYPE for a null, foreign or uncommitted one.
const Datatype& datatype_of(MPI_Datatype handle);
// The same, for a type under construction (uncommitted allowed).
Datatype& datatype_for_construction(MPI_Datatype handle);

// Derived type constructors (MPI_Type_contiguous, _vector, _create_hvector, _create_struct). They
// throw MPI_ERR_COUNT for a size or extent that does not fit in an MPI_Aint.
Datatype* make_contiguous(int count, const Datatype& old);
Datatype* make_hvector(int count, int blocklength, std::ptrdiff_t stride_bytes, const Datatype& old);
Datatype* make_struct(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                      std::span<const Datatype* const> types);
Datatype* make_resized(const Datatype& old, std::ptrdiff_t lb, std::ptrdiff_t extent);
void free_datatype(MPI_Datatype handle);

}  // namespace viastack::mpi
