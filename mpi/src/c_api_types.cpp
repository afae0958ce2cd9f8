// C entry points: datatypes.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "c_api.hpp"

using namespace viastack::mpi;

namespace {

// Hands a new type to the program, with the arguments it was made from.
void publish(Datatype* type, MPI_Datatype* newtype, int combiner, std::vector<int> integers,
             std::vector<MPI_Aint> addresses, std::span<const Datatype* const> olds) {
  std::unique_ptr<Datatype> owned(type);
  owned->set_contents(combiner, std::move(integers), std::move(addresses), olds);
  *newtype = &owned.release()->handle;
}

// An argument array of n entries; null is allowed only when n is 0.
template <class T>
std::span<const T> array_of(const T* array, int n) {
  require(array != nullptr || n == 0, MPI_ERR_ARG, "null argument array");
  return {array, std::size_t(n)};
}

// integers followed by the entries of each array.
template <class... Arrays>
std::vector<int> concatenated(std::initializer_list<int> integers, const Arrays&... arrays) {
  std::vector<int> out(integers);
  (out.insert(out.end(), arrays.begin(), arrays.end()), ...);
  return out;
}

std::vector<MPI_Aint> byte_displacements(std::span<const int> displacements, const Datatype& old) {
  std::vector<MPI_Aint> bytes(displacements.size());
  for (std::size_t i = 0; i < bytes.size(); ++i)
    require(!__builtin_mul_overflow(MPI_Aint(displacements[i]), old.extent(), &bytes[i]), MPI_ERR_COUNT,
            "a displacement in bytes does not fit in an MPI_Aint");
  return bytes;
}

// The data representation of MPI_Pack_external and friends: external32 is the only one.
void check_datarep(const char* datarep) {
  require(datarep != nullptr && std::strcmp(datarep, "external32") == 0, MPI_ERR_ARG,
          "the data representation must be \"external32\"");
}

// Room check for packing and unpacking: position + bytes within size.
void check_room(MPI_Aint position, std::size_t bytes, MPI_Aint size) {
  require(position >= 0, MPI_ERR_ARG, "negative position");
  require(size >= position && std::size_t(size - position) >= bytes, MPI_ERR_TRUNCATE,
          "the buffer is too small for the packed data");
}

std::size_t packed_bytes(int count, std::size_t element) {
  check_count(count);
  std::size_t bytes;
  require(!__builtin_mul_overflow(std::size_t(count), element, &bytes) && bytes <= std::size_t(PTRDIFF_MAX),
          MPI_ERR_COUNT, "the packed size does not fit in an MPI_Aint");
  return bytes;
}

}  // namespace

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_contiguous", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    const Datatype* olds[] = {&old};
    publish(make_contiguous(count, old), newtype, MPI_COMBINER_CONTIGUOUS, {count}, {}, olds);
  });
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_vector", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    const Datatype* olds[] = {&old};
    publish(make_hvector(count, blocklength, std::ptrdiff_t(stride) * old.extent(), old), newtype,
            MPI_COMBINER_VECTOR, {count, blocklength, stride}, {}, olds);
  });
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_hvector", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    const Datatype* olds[] = {&old};
    publish(make_hvector(count, blocklength, stride, old), newtype, MPI_COMBINER_HVECTOR, {count, blocklength},
            {stride}, olds);
  });
}

int MPI_Type_indexed(int count, const int blocklengths[], const int displacements[], MPI_Datatype oldtype,
                     MPI_Datatype* newtype) {
  return guarded("MPI_Type_indexed", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    const Datatype& old = datatype_for_construction(oldtype);
    const auto lengths = array_of(blocklengths, count);
    const auto displs = array_of(displacements, count);
    const Datatype* olds[] = {&old};
    publish(make_hindexed(lengths, byte_displacements(displs, old), old), newtype, MPI_COMBINER_INDEXED,
            concatenated({count}, lengths, displs), {}, olds);
  });
}

int MPI_Type_create_hindexed(int count, const int blocklengths[], const MPI_Aint displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_hindexed", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    const Datatype& old = datatype_for_construction(oldtype);
    const auto lengths = array_of(blocklengths, count);
    const auto displs = array_of(displacements, count);
    const Datatype* olds[] = {&old};
    publish(make_hindexed(lengths, displs, old), newtype, MPI_COMBINER_HINDEXED, concatenated({count}, lengths),
            {displs.begin(), displs.end()}, olds);
  });
}

int MPI_Type_create_indexed_block(int count, int blocklength, const int displacements[], MPI_Datatype oldtype,
                                  MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_indexed_block", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    const Datatype& old = datatype_for_construction(oldtype);
    const auto displs = array_of(displacements, count);
    const std::vector<int> lengths(std::size_t(count), blocklength);
    const Datatype* olds[] = {&old};
    publish(make_hindexed(lengths, byte_displacements(displs, old), old), newtype, MPI_COMBINER_INDEXED_BLOCK,
            concatenated({count, blocklength}, displs), {}, olds);
  });
}

int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displacements[], MPI_Datatype oldtype,
                                   MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_hindexed_block", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    const Datatype& old = datatype_for_construction(oldtype);
    const auto displs = array_of(displacements, count);
    const std::vector<int> lengths(std::size_t(count), blocklength);
    const Datatype* olds[] = {&old};
    publish(make_hindexed(lengths, displs, old), newtype, MPI_COMBINER_HINDEXED_BLOCK, {count, blocklength},
            {displs.begin(), displs.end()}, olds);
  });
}

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_struct", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    const auto lengths = array_of(blocklengths, count);
    const auto displs = array_of(displacements, count);
    std::vector<const Datatype*> olds;
    for (MPI_Datatype t : array_of(types, count)) olds.push_back(&datatype_for_construction(t));
    publish(make_struct(lengths, displs, olds), newtype, MPI_COMBINER_STRUCT, concatenated({count}, lengths),
            {displs.begin(), displs.end()}, olds);
  });
}

int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[], int order,
                             MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_subarray", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    require(ndims >= 1, MPI_ERR_ARG, "a subarray needs at least one dimension");
    const Datatype& old = datatype_for_construction(oldtype);
    const auto sz = array_of(sizes, ndims), sub = array_of(subsizes, ndims), st = array_of(starts, ndims);
    const Datatype* olds[] = {&old};
    publish(make_subarray(sz, sub, st, order, old), newtype, MPI_COMBINER_SUBARRAY,
            concatenated({ndims}, sz, sub, st, std::array{order}), {}, olds);
  });
}

int MPI_Type_create_darray(int size, int rank, int ndims, const int gsizes[], const int distribs[], const int dargs[],
                           const int psizes[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_darray", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    require(ndims >= 1, MPI_ERR_ARG, "a distributed array needs at least one dimension");
    const Datatype& old = datatype_for_construction(oldtype);
    const auto g = array_of(gsizes, ndims), dist = array_of(distribs, ndims), da = array_of(dargs, ndims),
               p = array_of(psizes, ndims);
    const Datatype* olds[] = {&old};
    publish(make_darray(size, rank, g, dist, da, p, order, old), newtype, MPI_COMBINER_DARRAY,
            concatenated({size, rank, ndims}, g, dist, da, p, std::array{order}), {}, olds);
  });
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_resized", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    const Datatype* olds[] = {&old};
    publish(make_resized(old, lb, extent), newtype, MPI_COMBINER_RESIZED, {}, {lb, extent}, olds);
  });
}

// The copy has the original's layout, bounds and committed state.
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_dup", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    const Datatype* olds[] = {&old};
    publish(new Datatype(old), newtype, MPI_COMBINER_DUP, {}, {}, olds);
  });
}

int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                          int* combiner) {
  return guarded("MPI_Type_get_envelope", MPI_COMM_WORLD, [&] {
    check_pointer(num_integers, "null output pointer");
    check_pointer(num_addresses, "null output pointer");
    check_pointer(num_datatypes, "null output pointer");
    check_pointer(combiner, "null output pointer");
    const Contents& c = datatype_for_construction(datatype).contents();
    *num_integers = int(c.integers.size());
    *num_addresses = int(c.addresses.size());
    *num_datatypes = int(c.types.size());
    *combiner = c.combiner;
  });
}

// The old types come back as the predefined handles, or as new copies the program frees.
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                          int integers[], MPI_Aint addresses[], MPI_Datatype datatypes[]) {
  return guarded("MPI_Type_get_contents", MPI_COMM_WORLD, [&] {
    const Contents& c = datatype_for_construction(datatype).contents();
    require(c.combiner != MPI_COMBINER_NAMED, MPI_ERR_TYPE, "a predefined datatype has no contents");
    require(max_integers >= int(c.integers.size()) && max_addresses >= int(c.addresses.size()) &&
                max_datatypes >= int(c.types.size()),
            MPI_ERR_ARG, "the arrays are shorter than MPI_Type_get_envelope says they must be");
    require((integers || c.integers.empty()) && (addresses || c.addresses.empty()) && (datatypes || c.types.empty()),
            MPI_ERR_ARG, "null output array");
    std::copy(c.integers.begin(), c.integers.end(), integers);
    std::copy(c.addresses.begin(), c.addresses.end(), addresses);
    for (std::size_t i = 0; i < c.types.size(); ++i)
      datatypes[i] = c.types[i]->predefined() ? c.types[i]->public_handle() : &(new Datatype(*c.types[i]))->handle;
  });
}

int MPI_Type_commit(MPI_Datatype* datatype) {
  return guarded("MPI_Type_commit", MPI_COMM_WORLD, [&] {
    check_pointer(datatype, "null handle pointer");
    datatype_for_construction(*datatype).commit();
  });
}

int MPI_Type_free(MPI_Datatype* datatype) {
  return guarded("MPI_Type_free", MPI_COMM_WORLD, [&] {
    check_pointer(datatype, "null handle pointer");
    free_datatype(*datatype);
    *datatype = MPI_DATATYPE_NULL;
  });
}

// A size beyond an int is MPI_UNDEFINED (MPI 3.1, 4.1.5); MPI_Type_size_x gives it.
int MPI_Type_size(MPI_Datatype datatype, int* size) {
  return guarded("MPI_Type_size", MPI_COMM_WORLD, [&] {
    check_pointer(size, "null output pointer");
    const std::size_t bytes = datatype_for_construction(datatype).size();
    *size = bytes > std::size_t(INT_MAX) ? MPI_UNDEFINED : int(bytes);
  });
}

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return guarded("MPI_Type_size_x", MPI_COMM_WORLD, [&] {
    check_pointer(size, "null output pointer");
    *size = MPI_Count(datatype_for_construction(datatype).size());
  });
}

namespace {

// The four extent queries: the bounds (or true bounds) of `datatype`, in MPI_Aint or MPI_Count.
template <class T>
int get_extent(const char* function, MPI_Datatype datatype, T* lb, T* extent, bool true_bounds) {
  return guarded(function, MPI_COMM_WORLD, [&] {
    check_pointer(lb, "null output pointer");
    check_pointer(extent, "null output pointer");
    const Datatype& type = datatype_for_construction(datatype);
    *lb = T(true_bounds ? type.true_lb() : type.lb());
    *extent = T(true_bounds ? type.true_extent() : type.extent());
  });
}

}  // namespace

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return get_extent("MPI_Type_get_extent", datatype, lb, extent, false);
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return get_extent("MPI_Type_get_extent_x", datatype, lb, extent, false);
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return get_extent("MPI_Type_get_true_extent", datatype, true_lb, true_extent, true);
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return get_extent("MPI_Type_get_true_extent_x", datatype, true_lb, true_extent, true);
}

// The predefined Fortran type of a class and size (MPI_INTEGERn, MPI_REALn, MPI_COMPLEXn; Open MPI's
// mpi.h names no MPI_INTEGER16 or MPI_REAL2 here).
int MPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype) {
  return guarded("MPI_Type_match_size", MPI_COMM_WORLD, [&] {
    check_pointer(datatype, "null output pointer");
    struct Match {
      int typeclass, size;
      MPI_Datatype type;
    };
    const Match matches[] = {
        {MPI_TYPECLASS_INTEGER, 1, MPI_INTEGER1}, {MPI_TYPECLASS_INTEGER, 2, MPI_INTEGER2},
        {MPI_TYPECLASS_INTEGER, 4, MPI_INTEGER4}, {MPI_TYPECLASS_INTEGER, 8, MPI_INTEGER8},
        {MPI_TYPECLASS_REAL, 4, MPI_REAL4},         {MPI_TYPECLASS_REAL, 8, MPI_REAL8},
        {MPI_TYPECLASS_REAL, 16, MPI_REAL16},       {MPI_TYPECLASS_COMPLEX, 8, MPI_COMPLEX8},
        {MPI_TYPECLASS_COMPLEX, 16, MPI_COMPLEX16}, {MPI_TYPECLASS_COMPLEX, 32, MPI_COMPLEX32},
    };
    require(typeclass == MPI_TYPECLASS_INTEGER || typeclass == MPI_TYPECLASS_REAL || typeclass == MPI_TYPECLASS_COMPLEX,
            MPI_ERR_ARG, "the type class must be MPI_TYPECLASS_INTEGER, _REAL or _COMPLEX");
    for (const Match& m : matches)
      if (m.typeclass == typeclass && m.size == size) {
        *datatype = m.type;
        return;
      }
    fail(MPI_ERR_ARG, "no predefined type of that class has that size");
  });
}

namespace {

// A predefined type with the decimal precision and exponent range (Fortran's PRECISION and RANGE:
// digits every value keeps, powers of ten representable both ways) its values have.
struct Candidate {
  int precision, range;
  MPI_Datatype type;
};

template <class T>
constexpr int decimal_range() {
  return std::numeric_limits<T>::is_integer ? std::numeric_limits<T>::digits10
                                            : std::min(std::numeric_limits<T>::max_exponent10,
                                                       -std::numeric_limits<T>::min_exponent10);
}

template <class T>
Candidate candidate(MPI_Datatype type) {
  return {std::numeric_limits<T>::digits10, decimal_range<T>(), type};
}

// The smallest candidate that covers precision p and range r, or MPI_ERR_ARG.
const Candidate& smallest_covering(std::span<const Candidate> candidates, int p, int r) {
  for (const Candidate& c : candidates)
    if (p <= c.precision && r <= c.range) return c;
  fail(MPI_ERR_ARG, "no predefined type has that precision and range");
}

// MPI_Type_create_f90_*'s result for these arguments (MPI-3.1 17.1.9), as Open MPI 4 makes it: a
// copy of the selected type named "COMBINER <its name>", made the first time and kept for the
// library's life, so the same arguments give the same handle.
MPI_Datatype selected_type(int combiner, std::vector<int> arguments, MPI_Datatype selected) {
  static std::map<std::pair<int, std::vector<int>>, std::unique_ptr<Datatype>> made;
  std::unique_ptr<Datatype>& type = made[{combiner, arguments}];
  if (!type) {
    const Datatype& base = datatype_of(selected);
    type = std::make_unique<Datatype>(base, "COMBINER " + base.name(), combiner, std::move(arguments));
  }
  return &type->handle;
}

// _real and _complex: MPI_UNDEFINED for one of p and r leaves it free (selecting as 0); not both.
MPI_Datatype selected_floating(int combiner, int p, int r, bool complex) {
  require(p != MPI_UNDEFINED || r != MPI_UNDEFINED, MPI_ERR_ARG, "p and r cannot both be MPI_UNDEFINED");
  const Candidate reals[] = {candidate<float>(MPI_FLOAT), candidate<double>(MPI_DOUBLE),
                             candidate<long double>(MPI_LONG_DOUBLE)};
  const MPI_Datatype complexes[] = {MPI_COMPLEX, MPI_DOUBLE_COMPLEX,
                                    OMPI_PREDEFINED_GLOBAL(MPI_Datatype, ompi_mpi_ldblcplex)};
  const Candidate& chosen = smallest_covering(reals, p == MPI_UNDEFINED ? 0 : p, r == MPI_UNDEFINED ? 0 : r);
  return selected_type(combiner, {p, r}, complex ? complexes[&chosen - reals] : chosen.type);
}

}  // namespace

// Integers: MPI_BYTE, MPI_SHORT, MPI_INT or MPI_LONG (Open MPI's choices; a Fortran INTEGER(KIND)
// of that size has the same values).
int MPI_Type_create_f90_integer(int r, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_f90_integer", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Candidate integers[] = {candidate<signed char>(MPI_BYTE), candidate<short>(MPI_SHORT),
                                  candidate<int>(MPI_INT), candidate<long>(MPI_LONG)};
    // An integer's precision is its range; r alone selects.
    *newtype = selected_type(MPI_COMBINER_F90_INTEGER, {r}, smallest_covering(integers, 0, r).type);
  });
}

// MPI_FLOAT, MPI_DOUBLE or MPI_LONG_DOUBLE.
int MPI_Type_create_f90_real(int p, int r, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_f90_real", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    *newtype = selected_floating(MPI_COMBINER_F90_REAL, p, r, false);
  });
}

// MPI_COMPLEX, MPI_DOUBLE_COMPLEX or MPI_LONG_DOUBLE_COMPLEX: pairs of the real type of p and r.
int MPI_Type_create_f90_complex(int p, int r, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_f90_complex", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    *newtype = selected_floating(MPI_COMBINER_F90_COMPLEX, p, r, true);
  });
}

int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  return guarded("MPI_Type_get_name", MPI_COMM_WORLD, [&] {
    check_pointer(type_name, "null name buffer");
    check_pointer(resultlen, "null length pointer");
    const std::string& name = datatype_for_construction(datatype).name();
    std::memcpy(type_name, name.c_str(), name.size() + 1);
    *resultlen = int(name.size());
  });
}

int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  return guarded("MPI_Type_set_name", MPI_COMM_WORLD, [&] {
    check_pointer(type_name, "null name");
    datatype_for_construction(datatype).set_name(std::string(type_name).substr(0, MPI_MAX_OBJECT_NAME - 1));
  });
}

int MPI_Get_address(const void* location, MPI_Aint* address) {
  return guarded("MPI_Get_address", MPI_COMM_WORLD, [&] {
    check_pointer(address, "null output pointer");
    *address = reinterpret_cast<MPI_Aint>(location);
  });
}

// Packed data is the type's bytes without gaps (what MPI_Bsend puts in the attached buffer).
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  return guarded("MPI_Pack_size", comm, [&] {
    communicator_of(comm);
    check_count(incount);
    check_pointer(size, "null output pointer");
    const std::size_t bytes = packed_bytes(incount, datatype_of(datatype).size());
    require(bytes <= std::size_t(INT_MAX), MPI_ERR_COUNT, "the packed size does not fit in an int");
    *size = int(bytes);
  });
}

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
             MPI_Comm comm) {
  return guarded("MPI_Pack", comm, [&] {
    communicator_of(comm);
    check_pointer(position, "null position pointer");
    const Datatype& type = datatype_of(datatype);
    const std::size_t bytes = packed_bytes(incount, type.size());
    check_buffer(inbuf, incount, type);
    check_room(*position, bytes, outsize);
    require(outbuf != nullptr || bytes == 0, MPI_ERR_BUFFER, "null output buffer");
    if (bytes > 0) type.pack(inbuf, std::size_t(incount), static_cast<std::byte*>(outbuf) + *position);
    *position += int(bytes);
  });
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm) {
  return guarded("MPI_Unpack", comm, [&] {
    communicator_of(comm);
    check_pointer(position, "null position pointer");
    const Datatype& type = datatype_of(datatype);
    const std::size_t bytes = packed_bytes(outcount, type.size());
    check_buffer(outbuf, outcount, type);
    check_room(*position, bytes, insize);
    require(inbuf != nullptr || bytes == 0, MPI_ERR_BUFFER, "null input buffer");
    if (bytes > 0) type.unpack(static_cast<const std::byte*>(inbuf) + *position, bytes, outbuf);
    *position += int(bytes);
  });
}

int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint* size) {
  return guarded("MPI_Pack_external_size", MPI_COMM_WORLD, [&] {
    check_datarep(datarep);
    check_pointer(size, "null output pointer");
    *size = MPI_Aint(packed_bytes(incount, datatype_of(datatype).external_size()));
  });
}

int MPI_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                      MPI_Aint outsize, MPI_Aint* position) {
  return guarded("MPI_Pack_external", MPI_COMM_WORLD, [&] {
    check_datarep(datarep);
    check_pointer(position, "null position pointer");
    const Datatype& type = datatype_of(datatype);
    const std::size_t bytes = packed_bytes(incount, type.external_size());
    check_buffer(inbuf, incount, type);
    check_room(*position, bytes, outsize);
    require(outbuf != nullptr || bytes == 0, MPI_ERR_BUFFER, "null output buffer");
    if (bytes > 0) type.pack_external(inbuf, std::size_t(incount), static_cast<std::byte*>(outbuf) + *position);
    *position += MPI_Aint(bytes);
  });
}

int MPI_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize, MPI_Aint* position, void* outbuf,
                        int outcount, MPI_Datatype datatype) {
  return guarded("MPI_Unpack_external", MPI_COMM_WORLD, [&] {
    check_datarep(datarep);
    check_pointer(position, "null position pointer");
    const Datatype& type = datatype_of(datatype);
    const std::size_t bytes = packed_bytes(outcount, type.external_size());
    check_buffer(outbuf, outcount, type);
    check_room(*position, bytes, insize);
    require(inbuf != nullptr || bytes == 0, MPI_ERR_BUFFER, "null input buffer");
    if (bytes > 0)
      type.unpack_external(static_cast<const std::byte*>(inbuf) + *position, std::size_t(outcount), outbuf);
    *position += MPI_Aint(bytes);
  });
}
