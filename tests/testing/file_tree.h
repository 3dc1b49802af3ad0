// A snapshot of a directory tree, for tests that check a command left it exactly as it was.
#ifndef PREWARM_TESTS_TESTING_FILE_TREE_H_
#define PREWARM_TESTS_TESTING_FILE_TREE_H_

#include <map>
#include <string>
#include <string_view>

namespace prewarm::testing {

// Every path under `root` (relative to it; directories, links and other kinds included, links
// not followed) mapped to its mode, owner and size and, for a regular file, its bytes. Two
// snapshots compare equal when nothing was added, removed, rewritten with other bytes, chown'ed
// or chmod'ed; mtimes are left out. With `only_ending_in` (".co": the cache's entries), only the
// paths ending so.
std::map<std::string, std::string> FileTree(const std::string& root,
                                            std::string_view only_ending_in = "");

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_FILE_TREE_H_
