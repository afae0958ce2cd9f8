/*
 * viastack.h — what this build of viastack is, for C and C++ programs.
 *
 *   printf("viastack %s (providers: %s)\n", viastack_version(), viastack_providers());
 */
#ifndef VIASTACK_VIASTACK_H
#define VIASTACK_VIASTACK_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (the CMake package's version). */
const char *viastack_version(void);
/* The VIA providers compiled in, separated by spaces: "shm tcp mixed". */
const char *viastack_providers(void);

#ifdef __cplusplus
}
#endif

#endif
