#include "ops.hpp"

#include <complex>
#include <cstring>

#include <via/copy.hpp>

#include "datatype.hpp"
#include "errors.hpp"
#include "fortran_handles.hpp"

namespace viastack::mpi {

namespace {

// Calls visit(T{}) with the C++ type of an element kind, if it is in the family.
template <class Visit>
bool visit_integer(Basic basic, Visit&& visit) {
  switch (basic) {
    case Basic::int8: visit(std::int8_t{}); return true;
    case Basic::uint8: visit(std::uint8_t{}); return true;
    case Basic::int16: visit(std::int16_t{}); return true;
    case Basic::uint16: visit(std::uint16_t{}); return true;
    case Basic::int32: visit(std::int32_t{}); return true;
    case Basic::uint32: visit(std::uint32_t{}); return true;
    case Basic::int64: visit(std::int64_t{}); return true;
    case Basic::uint64: visit(std::uint64_t{}); return true;
    default: return false;
  }
}

template <class Visit>
bool visit_floating(Basic basic, Visit&& visit) {
  switch (basic) {
    case Basic::float32: visit(float{}); return true;
    case Basic::float64: visit(double{}); return true;
    case Basic::long_double: visit((long double){}); return true;
    default: return false;
  }
}

template <class Visit>
bool visit_complex(Basic basic, Visit&& visit) {
  switch (basic) {
    case Basic::complex_float: visit(std::complex<float>{}); return true;
    case Basic::complex_double: visit(std::complex<double>{}); return true;
    case Basic::complex_long_double: visit(std::complex<long double>{}); return true;
    default: return false;
  }
}

template <class Visit>
bool visit_logical(Basic basic, Visit&& visit) {
  if (basic == Basic::c_bool) {
    visit(bool{});
    return true;
  }
  return visit_integer(basic, visit);
}

template <class V, class I>
struct Pair {
  V value;
  I index;
};

template <class Visit>
bool visit_pair(Basic basic, Visit&& visit) {
  switch (basic) {
    case Basic::float_int: visit(Pair<float, int>{}); return true;
    case Basic::double_int: visit(Pair<double, int>{}); return true;
    case Basic::long_int: visit(Pair<long, int>{}); return true;
    case Basic::int_int: visit(Pair<int, int>{}); return true;
    case Basic::short_int: visit(Pair<short, int>{}); return true;
    case Basic::long_double_int: visit(Pair<long double, int>{}); return true;
    default: return false;
  }
}

// inout[i] = f(in[i], inout[i]); elements are copied, so buffers need no alignment.
template <class T, class F>
void combine(const void* in, void* inout, std::size_t n, F f) {
  const auto* a = static_cast<const std::byte*>(in);
  auto* b = static_cast<std::byte*>(inout);
  for (std::size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    y = f(x, y);
    std::memcpy(b + i * sizeof(T), &y, sizeof(T));
  }
}

// Runs `body` for the element type of the op's family; false when the type is outside it.
template <class Body>
bool for_family(Builtin op, Basic basic, Body&& body) {
  switch (op) {
    case Builtin::max:
    case Builtin::min: return visit_integer(basic, body) || visit_floating(basic, body);
    case Builtin::sum:
    case Builtin::prod: return visit_integer(basic, body) || visit_floating(basic, body) || visit_complex(basic, body);
    case Builtin::land:
    case Builtin::lor:
    case Builtin::lxor: return visit_logical(basic, body);
    case Builtin::band:
    case Builtin::bor:
    case Builtin::bxor: return visit_integer(basic, body);
    case Builtin::maxloc:
    case Builtin::minloc: return visit_pair(basic, body);
    default: return false;
  }
}

template <class T>
void apply_builtin(Builtin op, const void* in, void* inout, std::size_t n) {
  if constexpr (requires(T t) { t.index; }) {
    const bool want_max = op == Builtin::maxloc;
    combine<T>(in, inout, n, [want_max](T a, T b) {
      if (a.value == b.value) return a.index < b.index ? a : b;
      return (want_max ? a.value > b.value : a.value < b.value) ? a : b;
    });
  } else if constexpr (requires(T t) { t.real(); }) {
    if (op == Builtin::sum) combine<T>(in, inout, n, [](T a, T b) { return a + b; });
    if (op == Builtin::prod) combine<T>(in, inout, n, [](T a, T b) { return a * b; });
  } else {
    switch (op) {
      case Builtin::max: return combine<T>(in, inout, n, [](T a, T b) { return a > b ? a : b; });
      case Builtin::min: return combine<T>(in, inout, n, [](T a, T b) { return a < b ? a : b; });
      case Builtin::sum: return combine<T>(in, inout, n, [](T a, T b) { return T(a + b); });
      case Builtin::prod: return combine<T>(in, inout, n, [](T a, T b) { return T(a * b); });
      case Builtin::land: return combine<T>(in, inout, n, [](T a, T b) { return T(a && b); });
      case Builtin::lor: return combine<T>(in, inout, n, [](T a, T b) { return T(a || b); });
      case Builtin::lxor: return combine<T>(in, inout, n, [](T a, T b) { return T(!a != !b); });
      default: break;
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (op == Builtin::band) combine<T>(in, inout, n, [](T a, T b) { return T(a & b); });
      if (op == Builtin::bor) combine<T>(in, inout, n, [](T a, T b) { return T(a | b); });
      if (op == Builtin::bxor) combine<T>(in, inout, n, [](T a, T b) { return T(a ^ b); });
    }
  }
}

}  // namespace

void Op::check_applies_to(const Datatype& type) const {
  if (builtin_ == Builtin::user || builtin_ == Builtin::replace || builtin_ == Builtin::no_op) return;
  const bool pair = for_family(Builtin::maxloc, type.basic(), [](auto) {});
  const bool laid_out = pair || type.contiguous();
  require(laid_out && for_family(builtin_, type.basic(), [](auto) {}), MPI_ERR_OP,
          "the reduction operation is not defined for this datatype");
}

void Op::apply(const void* in, void* inout, std::size_t count, const Datatype& type) const {
  switch (builtin_) {
    case Builtin::user: {
      int len = int(count);
      MPI_Datatype handle = type.public_handle();
      if (this->handle.open_mpi_flags & kOpenMpiOpFortranFunction) {
        using FortranFunction = void(void*, void*, MPI_Fint*, MPI_Fint*);
        MPI_Fint fortran_type = fortran_handle(handle);
        reinterpret_cast<FortranFunction*>(reinterpret_cast<void (*)()>(function_))(const_cast<void*>(in), inout, &len, &fortran_type);
      } else if (cxx_user_function_) {
        using CxxIntercept = void(void*, void*, int*, MPI_Datatype*, MPI_User_function*);
        reinterpret_cast<CxxIntercept*>(reinterpret_cast<void (*)()>(function_))(const_cast<void*>(in), inout, &len, &handle, cxx_user_function_);
      } else {
        function_(const_cast<void*>(in), inout, &len, &handle);
      }
      return;
    }
    case Builtin::no_op: return;
    case Builtin::replace:
      via::copy_memory(inout, in, count * std::size_t(type.extent()));
      return;
    default: break;
  }
  // A pair type is one element per count; others are count * size / element size elements.
  const bool pair = for_family(Builtin::maxloc, type.basic(), [](auto) {});
  const std::size_t n = pair ? count : count * type.size() / basic_size(type.basic());
  for_family(builtin_, type.basic(), [&](auto t) { apply_builtin<decltype(t)>(builtin_, in, inout, n); });
}

const Op& op_of(MPI_Op handle) {
  if (handle == nullptr || handle->kind != HandleKind::op || handle->impl == nullptr)
    fail(MPI_ERR_OP, "invalid reduction operation (null, freed or not an op)");
  return *handle->impl;
}

void free_op(MPI_Op* handle) {
  const Op& op = op_of(*handle);
  require(!op.predefined(), MPI_ERR_OP, "a predefined operation cannot be freed");
  Op* owned = const_cast<Op*>(&op);
  owned->handle.kind = HandleKind{};
  delete owned;
  *handle = MPI_OP_NULL;
}

}  // namespace viastack::mpi
