// Linked into ssd-bench and the test programs of a sanitizer build (SSD_SANITIZE), nowhere else:
// a dlclose that leaves the library mapped.
//
// Why: Open MPI dlcloses its components (mca_*.so) in MPI_Finalize, and their start-up
// allocations, which Open MPI never frees, are still there when LeakSanitizer checks at exit.
// Their return addresses then lie in no loaded module, so tests/lsan.supp cannot match them
// by library name, and LeakSanitizer re-reads /proc/self/maps for each such address: about
// 1.2 s of every launch of ssd-bench in the Python tests, on these 2-core machines more than
// the run itself. Left mapped, each is named (mca_*.so, libopen-pal.so, ...) and suppressed.
// What stays mapped besides: the components Open MPI opens and closes unselected at start-up,
// a few megabytes of address space.
extern "C" int dlclose(void* /*handle*/) {
  return 0;
}
