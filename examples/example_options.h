/*
 * example_options.h: the command line the examples share. Each example
 * sets `usage_text` (how to run it, what it shows, its options and exit
 * statuses) and parses its arguments with these: --help prints the text and
 * exits 0, --version prints viastack's version and exits 0; an unknown option, a missing value or a number out of range
 * prints what is wrong and the text on stderr and exits 2. C and C++.
 */
#ifndef EXAMPLE_OPTIONS_H
#define EXAMPLE_OPTIONS_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <viastack.h>

/* Exit statuses every example documents. */
enum { EXAMPLE_OK = 0, EXAMPLE_FAILED = 1, EXAMPLE_USAGE = 2 };

static const char *usage_text;

static inline void usage_error(const char *what, const char *arg) {
  fprintf(stderr, "%s '%s'\n\n%s", what, arg, usage_text);
  exit(EXAMPLE_USAGE);
}

/* --help (or -h): the usage on stdout, exit 0; --version: the library's. */
static inline void help_option(const char *arg) {
  if (strcmp(arg, "--version") == 0) {
    printf("viastack %s (providers: %s)\n", viastack_version(), viastack_providers());
    exit(EXAMPLE_OK);
  }
  if (strcmp(arg, "--help") != 0 && strcmp(arg, "-h") != 0) return;
  fputs(usage_text, stdout);
  exit(EXAMPLE_OK);
}

/* If argv[*i] is `name`, reads the whole decimal number after it into *out
 * (it must lie in [min, max]), moves *i past it and returns 1; else 0. */
static inline int number_option(int argc, char **argv, int *i, const char *name, long min, long max, long *out) {
  if (strcmp(argv[*i], name) != 0) return 0;
  if (*i + 1 >= argc) usage_error("a value is missing after", name);
  const char *text = argv[++*i];
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < min || value > max) {
    fprintf(stderr, "%s takes a whole number from %ld to %ld, not '%s'\n\n%s", name, min, max, text, usage_text);
    exit(EXAMPLE_USAGE);
  }
  *out = value;
  return 1;
}

/* argv[index] as a whole decimal number in [min, max], or `fallback` when
 * there are fewer arguments; anything else is a usage error. */
static inline long positional_number(int argc, char **argv, int index, const char *name, long fallback, long min, long max) {
  if (index >= argc) return fallback;
  const char *text = argv[index];
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || value < min || value > max) {
    fprintf(stderr, "%s is a whole number from %ld to %ld, not '%s'\n\n%s", name, min, max, text, usage_text);
    exit(EXAMPLE_USAGE);
  }
  return value;
}

#endif
