// Helpers shared by the C++ API tests. The tests use only TVM's C++ deployment API, so the
// same sources build against TVM's own headers (reference runtime) and against ours.
#ifndef TVMRT_CPP_TESTS_COMMON_H_
#define TVMRT_CPP_TESTS_COMMON_H_

#include <tvm/runtime/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Fails the test (exit 1) with a message when `cond` is false.
#define EXPECT(cond)                                                                   \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// Runs `body` and expects it to throw tvm::Error whose message contains `needle`.
#define EXPECT_ERROR(body, needle)                                                          \
  do {                                                                                      \
    bool tvmrt_thrown = false;                                                              \
    try {                                                                                   \
      body;                                                                                 \
    } catch (const tvm::Error& e) {                                                         \
      tvmrt_thrown = true;                                                                  \
      if (std::string(e.what()).find(needle) == std::string::npos) {                        \
        std::fprintf(stderr, "%s:%d: error message lacks '%s':\n%s\n", __FILE__, __LINE__, \
                     needle, e.what());                                                     \
        std::exit(1);                                                                       \
      }                                                                                     \
    }                                                                                       \
    if (!tvmrt_thrown) {                                                                    \
      std::fprintf(stderr, "%s:%d: no tvm::Error from %s\n", __FILE__, __LINE__, #body);   \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// The fixtures directory: argv[1], else $TVMRT_FIXTURES.
inline std::string FixtureDir(int argc, char** argv) {
  if (argc > 1) return argv[1];
  const char* env = std::getenv("TVMRT_FIXTURES");
  if (env == nullptr) {
    std::fprintf(stderr, "usage: %s FIXTURES_DIR (or set TVMRT_FIXTURES)\n", argv[0]);
    std::exit(2);
  }
  return env;
}

#endif  // TVMRT_CPP_TESTS_COMMON_H_
