/* Every MPI function of Open MPI 4.x's libmpi.so.40 that viastack does not
 * implement: a program built for Open MPI still links and loads, and a call
 * stops the job with a message naming the function, never silently doing
 * nothing. The list is unsupported.def; tests/mpi checks that together with
 * the implemented functions it covers everything Open MPI exports. */
#include <stdio.h>
#include <unistd.h>

void viastack_mpi_before_exit(void); /* errors.cpp: what _exit would skip */
__attribute__((noreturn)) static void unsupported(const char* function) {
  fprintf(stderr, "viastack MPI: %s is not supported by viastack's MPI subset; stopping the job\n", function);
  fflush(stderr);
  viastack_mpi_before_exit();
  _exit(1);
}

/* Arguments are ignored, so one definition fits every signature. */
#define VIASTACK_UNSUPPORTED(name) \
  __attribute__((visibility("default"))) int name(void) { unsupported(#name); }
#include "unsupported.def"
