// Linked into every executable of a sanitizer build (SSD_SANITIZE), nowhere else: a dlclose
// that leaves the library mapped.
//
// Why: Open MPI dlcloses its components (mca_*.so) in MPI_Finalize, and their start-up
// allocations, which Open MPI never frees, are still there when LeakSanitizer checks at exit.
// Their return addresses then lie in no loaded module, so tests/lsan.supp cannot match them
// by library name, and LeakSanitizer re-reads /proc/self/maps for each such address: about
// 1.2 s of every launch of ssd-bench in the Python tests, on these 2-core machines more than
// the run itself. Left mapped, each is named (mca_*.so, libopen-pal.so, ...) and suppressed.
// A process of ours dlcloses only at exit, so keeping the mappings costs nothing.
extern "C" int dlclose(void* /*handle*/) {
  return 0;
}
