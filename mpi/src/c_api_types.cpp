// C entry points: datatypes.
#include <climits>
#include <cstring>
#include <vector>

#include "c_api.hpp"

using namespace viastack::mpi;

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_contiguous", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    *newtype = &make_contiguous(count, datatype_for_construction(oldtype))->handle;
  });
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_vector", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    const Datatype& old = datatype_for_construction(oldtype);
    *newtype = &make_hvector(count, blocklength, std::ptrdiff_t(stride) * old.extent(), old)->handle;
  });
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_hvector", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    *newtype = &make_hvector(count, blocklength, stride, datatype_for_construction(oldtype))->handle;
  });
}

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_struct", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    check_count(count);
    std::vector<const Datatype*> olds;
    for (int i = 0; i < count; ++i) olds.push_back(&datatype_for_construction(types[i]));
    const auto n = std::size_t(count);
    *newtype = &make_struct({blocklengths, n}, {displacements, n}, olds)->handle;
  });
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  return guarded("MPI_Type_create_resized", MPI_COMM_WORLD, [&] {
    check_pointer(newtype, "null output pointer");
    *newtype = &make_resized(datatype_for_construction(oldtype), lb, extent)->handle;
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

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return guarded("MPI_Type_get_extent", MPI_COMM_WORLD, [&] {
    check_pointer(lb, "null output pointer");
    check_pointer(extent, "null output pointer");
    const Datatype& type = datatype_for_construction(datatype);
    *lb = type.lb();
    *extent = type.extent();
  });
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return guarded("MPI_Type_get_extent_x", MPI_COMM_WORLD, [&] {
    check_pointer(lb, "null output pointer");
    check_pointer(extent, "null output pointer");
    const Datatype& type = datatype_for_construction(datatype);
    *lb = type.lb();
    *extent = type.extent();
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
    const std::size_t bytes = std::size_t(incount) * datatype_of(datatype).size();
    require(bytes <= std::size_t(INT_MAX), MPI_ERR_COUNT, "the packed size does not fit in an int");
    *size = int(bytes);
  });
}
