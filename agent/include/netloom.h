/* Netloom: mark phases of an MPI application ("regions") so that the agent
 * reports time, MPI time and traffic per phase.
 *
 *   #include <netloom.h>
 *   NETLOOM_REGION_BEGIN("solve");
 *   ...
 *   NETLOOM_REGION_END("solve");
 *
 * The functions live in the agent library (libnetloom-ompi.so or
 * libnetloom-mpich.so, loaded with LD_PRELOAD or linked). They are declared
 * weak, so a program using the macros also runs without the agent: the macros
 * then do nothing. MPI_Pcontrol(level) marks regions too (see agent/README.md).
 *
 * Regions are per process, by name; a region may be entered again (entries
 * counts the times) and nested in itself (only the outermost counts). At most
 * 64 names; names are cut to 63 bytes. */
#ifndef NETLOOM_H
#define NETLOOM_H

#ifdef __cplusplus
extern "C" {
#endif

void netloom_region_begin(const char *name) __attribute__((weak));
void netloom_region_end(const char *name) __attribute__((weak));

#define NETLOOM_REGION_BEGIN(name) do { if (netloom_region_begin) netloom_region_begin(name); } while (0)
#define NETLOOM_REGION_END(name) do { if (netloom_region_end) netloom_region_end(name); } while (0)

#ifdef __cplusplus
}
#endif
#endif
