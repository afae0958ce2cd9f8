// Datatypes: the predefined ones and the derived ones built from them
// (contiguous, vector, indexed, struct, subarray, darray, resized, dup). A
// type is described by the layout of one element relative to its start;
// sending packs its bytes, receiving unpacks them. Each derived type also
// keeps the arguments it was built from, for MPI_Type_get_contents.
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

// What the bytes of a run are made of, for the "external32" representation
// (MPI 3.1, 13.5.2: big-endian, IEEE formats, some sizes not the native ones).
enum class Scalar : std::uint8_t {
  bytes,           // 1-byte items: copied as they are
  swap2, swap4, swap8, swap16,  // integers and IEEE floats of that size: byte order reversed
  long_as4,        // C long (8 bytes here): 4 bytes in external32
  ulong_as4,       // C unsigned long: 4 bytes in external32
  wchar_as2,       // wchar_t (4 bytes here): 2 bytes in external32
  x87_as_quad,     // C long double (x87 80-bit in 16 bytes): IEEE binary128 in external32
};
std::size_t native_size(Scalar scalar);
std::size_t external_size(Scalar scalar);

// Where one element's bytes lie, in type-map order: a list of pieces, each
// `count` repetitions `stride` bytes apart, starting at `offset`, of either
// `bytes` contiguous bytes or of another layout. Contiguous and vector types
// of any count, and nests of them, are a piece or two whatever their count;
// indexed types a piece per block.
struct Layout {
  struct Piece {
    std::ptrdiff_t offset = 0;
    std::size_t count = 1;
    std::ptrdiff_t stride = 0;
    std::size_t bytes = 0;                // contiguous bytes a repetition, when `inner` is null
    std::shared_ptr<const Layout> inner;  // else what each repetition lays out (shared with the type it came from)
    Scalar scalar = Scalar::bytes;        // what `bytes` are made of, when `inner` is null
  };
  std::vector<Piece> pieces;
  // Where the data lies (the true lower bound and upper bound: MPI_Type_get_true_extent),
  // and its size in external32; summed up from the pieces when the layout is made.
  std::ptrdiff_t true_lb = 0, true_ub = 0;
  std::size_t external_size = 0;

  // Calls visit(offset, length, scalar) for each contiguous run at base + its
  // offset, in type-map order, while visit returns true; false when visit stopped it.
  template <class Visit>
  bool for_each_run(std::ptrdiff_t base, Visit& visit) const {
    for (const Piece& p : pieces)
      for (std::size_t i = 0; i < p.count; ++i) {
        const std::ptrdiff_t at = base + p.offset + std::ptrdiff_t(i) * p.stride;
        if (p.inner ? !p.inner->for_each_run(at, visit) : !visit(at, p.bytes, p.scalar)) return false;
      }
    return true;
  }
};

// One run of `bytes` contiguous bytes at offset 0.
std::shared_ptr<const Layout> contiguous_layout(std::size_t bytes);

class Datatype;

// The arguments a derived type was made from (MPI_Type_get_envelope / _get_contents).
// The old types are kept alive here, whatever the program frees.
struct Contents {
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> integers;
  std::vector<MPI_Aint> addresses;
  std::vector<std::shared_ptr<const Datatype>> types;
};

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
  // A derived copy with its own handle (what MPI_Type_dup and MPI_Type_get_contents hand out).
  Datatype(const Datatype& other);
  // A copy of a predefined type under a name of its own, itself predefined (it cannot be freed),
  // with the contents that chose it: what MPI_Type_create_f90_integer/real/complex return.
  Datatype(const Datatype& base, std::string name, int combiner, std::vector<int> integers);
  Datatype& operator=(const Datatype&) = delete;

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
  std::ptrdiff_t true_lb() const { return layout_->true_lb; }
  std::ptrdiff_t true_extent() const { return layout_->true_ub - layout_->true_lb; }
  std::size_t external_size() const { return layout_->external_size; }
  const Contents& contents() const { return contents_; }
  // Records what the type was made from: combiner, integer and address arguments, old types.
  void set_contents(int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                    std::span<const Datatype* const> types);
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Copies count elements at buf into packed bytes, and back.
  void pack(const void* buf, std::size_t count, std::byte* out) const;
  void unpack(const std::byte* in, std::size_t bytes, void* buf) const;  // bytes: packed bytes available
  // The same in "external32": count * external_size() bytes. Unpacking a value
  // that does not fit the native type (a long of more than 32 bits) throws MPI_ERR_CONVERSION.
  void pack_external(const void* buf, std::size_t count, std::byte* out) const;
  void unpack_external(const std::byte* in, std::size_t count, void* buf) const;

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
  Contents contents_;
};

// The size of one element of a reduction kind.
std::size_t basic_size(Basic basic);

// The C++ object behind a handle; throws MPI_ERR_TYPE for a null, foreign or uncommitted one.
// Inline: every send and receive asks.
[[noreturn]] void fail_invalid_datatype(MPI_Datatype handle);
inline const Datatype& datatype_of(MPI_Datatype handle) {
  if (handle == nullptr || handle->kind != HandleKind::datatype || handle->impl == nullptr ||
      !handle->impl->committed())
    fail_invalid_datatype(handle);
  return *handle->impl;
}
// The same, for a type under construction (uncommitted allowed).
Datatype& datatype_for_construction(MPI_Datatype handle);

// Derived type constructors (MPI_Type_contiguous, _vector, _create_hvector, _create_hindexed,
// _create_struct, _create_subarray, _create_darray, _create_resized). They throw MPI_ERR_COUNT for
// a negative count or block length and for a size or extent that does not fit in an MPI_Aint. The
// caller records the type's contents.
Datatype* make_contiguous(int count, const Datatype& old);
Datatype* make_hvector(int count, int blocklength, std::ptrdiff_t stride_bytes, const Datatype& old);
// Blocks of one old type at byte displacements (indexed, hindexed and their _block forms).
Datatype* make_hindexed(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements, const Datatype& old);
Datatype* make_struct(std::span<const int> blocklengths, std::span<const MPI_Aint> displacements,
                      std::span<const Datatype* const> types);
// order: MPI_ORDER_C or MPI_ORDER_FORTRAN; arguments checked (MPI_ERR_ARG).
Datatype* make_subarray(std::span<const int> sizes, std::span<const int> subsizes, std::span<const int> starts,
                        int order, const Datatype& old);
// The part of a global array that process `rank` of a `psizes` grid (row-major) holds.
Datatype* make_darray(int size, int rank, std::span<const int> gsizes, std::span<const int> distribs,
                      std::span<const int> dargs, std::span<const int> psizes, int order, const Datatype& old);
Datatype* make_resized(const Datatype& old, std::ptrdiff_t lb, std::ptrdiff_t extent);
void free_datatype(MPI_Datatype handle);

}  // namespace viastack::mpi
