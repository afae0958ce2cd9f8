// viastack.h: the version comes from the build (CMake's project version).
#include "viastack.h"

extern "C" const char* viastack_version(void) { return VIASTACK_VERSION_STRING; }

extern "C" const char* viastack_providers(void) { return "shm tcp mixed"; }
