// Package crashtest holds tests that run the real clankie binary as a child
// process and check the memory service's durability promises from outside:
//
//   - crash_test.go: concurrent writers, kill -9 at a random instant, restart,
//     and every acknowledged write must be there exactly once, every file
//     whole, no temp file left, permissions kept (CLANKIE_CRASH_CYCLES cycles,
//     30 by default; CLANKIE_CRASH_SEED repeats a run's choices);
//   - ordering_test.go: under strace, each acknowledged write is a temp file
//     write, its fsync, the rename, the directory fsync, and only then the
//     answer on the socket;
//   - lanes_test.go: a kill between the two lane files of one episode write
//     (strace holds the renames) must not lose an acknowledged episode;
//   - retry_test.go: a byte-identical episode retry after a restart is
//     replayed, also when its retain was refused at the ceiling.
//
// Everything here is skipped with -short; the strace tests skip when strace
// is missing or cannot trace. The package has no non-test code.
package crashtest
