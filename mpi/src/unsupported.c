/* Every MPI function of Open MPI 4.x's libmpi.so.40 that viastack does not
 * implement: a program built for Open MPI still links and loads, and a call
 * stops the job with a message naming the function, never silently doing
 * nothing. The list is unsupported.def; tests/mpi checks that together with
 * the implemented functions it covers everything Open MPI exports. */

/* errors.cpp: logs the refusal and ends the process. */
__attribute__((noreturn)) void viastack_mpi_unsupported(const char* function);

/* Arguments are ignored, so one definition fits every signature. */
#define VIASTACK_UNSUPPORTED(name) \
  __attribute__((visibility("default"))) int name(void) { viastack_mpi_unsupported(#name); }
#include "unsupported.def"
