// Reduction operations: the predefined ones over the predefined types, and
// user functions made by MPI_Op_create.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi.hpp"

namespace viastack::mpi {

class Datatype;

enum class Builtin : std::uint8_t { max, min, sum, prod, land, band, lor, bor, lxor, bxor, maxloc, minloc, replace, no_op, user };

class Op {
 public:
  constexpr Op(Builtin builtin, MPI_Op public_handle) : builtin_(builtin), public_handle_(public_handle) {}
  Op(MPI_User_function* function, bool commutative) : builtin_(Builtin::user), function_(function), commutative_(commutative) {}

  Builtin builtin() const { return builtin_; }
  bool commutative() const { return commutative_; }
  bool predefined() const { return builtin_ != Builtin::user; }
  // inout[i] = in[i] op inout[i] for count elements of type laid out in memory.
  void apply(const void* in, void* inout, std::size_t count, const class Datatype& type) const;
  // Throws MPI_ERR_OP when the op is not defined on the type.
  void check_applies_to(const Datatype& type) const;

  // MPI::Op::Init (the C++ bindings): the function given to MPI_Op_create is
  // their intercept, which calls `user` with C++ datatype objects.
  void set_cxx_function(MPI_User_function* user) { cxx_user_function_ = user; }

  ompi_op_t handle{HandleKind::op, this};
  MPI_Op public_handle() const { return public_handle_ ? public_handle_ : const_cast<ompi_op_t*>(&handle); }

 private:
  Builtin builtin_;
  MPI_User_function* function_ = nullptr;
  bool commutative_ = true;
  MPI_Op public_handle_ = nullptr;
  MPI_User_function* cxx_user_function_ = nullptr;
};

// handle.open_mpi_flags: MPI_OP_CREATE from Fortran (Open MPI's
// libmpi_mpifh) sets this after the op is made; the function then takes the
// datatype as a Fortran handle.
inline constexpr std::uint32_t kOpenMpiOpFortranFunction = 0x2;

// Throws MPI_ERR_OP for a null, freed or foreign handle.
const Op& op_of(MPI_Op handle);
void free_op(MPI_Op* handle);

}  // namespace viastack::mpi
