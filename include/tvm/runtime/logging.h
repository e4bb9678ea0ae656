/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Errors and logging: tvm::Error (== tvm::runtime::Error), LOG(INFO|WARNING|ERROR|FATAL|DEBUG),
 * CHECK*, ICHECK*. LOG(FATAL) and failed checks throw tvm::Error. Requires C++17.
 */
#ifndef TVM_RUNTIME_LOGGING_H_
#define TVM_RUNTIME_LOGGING_H_

#if __cplusplus < 201703L && !(defined(_MSVC_LANG) && _MSVC_LANG >= 201703L)
#error "tvm-runtime-rs C++ headers need C++17 (-std=c++17)"
#endif

#include <tvm/runtime/c_runtime_api.h>

#include <cstdint>
#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

/*! \brief Defined by tvm-runtime-rs' C++ headers (absent with TVM's own). */
#define TVMRT_CPP_API 1

namespace tvm {
namespace runtime {

/*! \brief The exception every failure of this API throws. */
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/*! \brief A failed internal check (ICHECK); an Error too. */
class InternalError : public Error {
 public:
  InternalError(const std::string& file, int lineno, const std::string& message)
      : Error(file + ":" + std::to_string(lineno) + ": " + message) {}
};

namespace detail {

/*! \brief Throws the runtime's last error when a C API call returned non-zero. */
inline void ThrowLastError(int ret, const char* call) {
  if (ret == 0) return;
  const char* msg = TVMGetLastError();
  if (msg == nullptr || *msg == '\0') throw Error(std::string(call) + " failed");
  throw Error(msg);
}

/*! \brief Collects a log line; prints it to stderr when destroyed. */
class LogMessage {
 public:
  LogMessage(const char* file, int lineno, const char* level) {
    std::time_t t = std::time(nullptr);
    char buf[16];
    std::tm tm_buf;
#if defined(_WIN32)
    localtime_s(&tm_buf, &t);
#else
    localtime_r(&t, &tm_buf);
#endif
    std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm_buf);
    stream_ << "[" << buf << "] " << file << ":" << lineno << ": " << level;
  }
  ~LogMessage() { std::cerr << stream_.str() << std::endl; }
  std::ostringstream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

/*! \brief Collects a message; throws it as an Error when destroyed. */
class LogFatal {
 public:
  LogFatal(const char* file, int lineno) : file_(file), lineno_(lineno) {}
  ~LogFatal() noexcept(false) { throw InternalError(file_, lineno_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  std::string file_;
  int lineno_;
  std::ostringstream stream_;
};

/*! \brief Swallows a log line (LOG(DEBUG) when TVM_LOG_DEBUG is not set). */
class LogVoid {
 public:
  template <typename T>
  LogVoid& operator<<(const T&) {
    return *this;
  }
  LogVoid& stream() { return *this; }
};

/*! \brief Streams a checked value; byte-sized integers as numbers (a 0 byte would end the
 * message when it crosses the C ABI as a string). */
template <typename T>
inline void PrintCheckValue(std::ostream& os, const T& v) {
  if constexpr (std::is_integral<T>::value && sizeof(T) == 1 && !std::is_same<T, bool>::value) {
    os << static_cast<int>(v);
  } else {
    os << v;
  }
}

#define TVMRT_DEFINE_CHECK_OP(name, op)                                             \
  template <typename X, typename Y>                                                 \
  inline std::unique_ptr<std::string> LogCheck##name(const X& x, const Y& y) {      \
    if (x op y) return nullptr;                                                     \
    std::ostringstream os;                                                          \
    os << " (";                                                                     \
    PrintCheckValue(os, x);                                                         \
    os << " vs. ";                                                                  \
    PrintCheckValue(os, y);                                                         \
    os << ") ";                                                                     \
    return std::make_unique<std::string>(os.str());                                 \
  }
TVMRT_DEFINE_CHECK_OP(_LT, <)
TVMRT_DEFINE_CHECK_OP(_GT, >)
TVMRT_DEFINE_CHECK_OP(_LE, <=)
TVMRT_DEFINE_CHECK_OP(_GE, >=)
TVMRT_DEFINE_CHECK_OP(_EQ, ==)
TVMRT_DEFINE_CHECK_OP(_NE, !=)
#undef TVMRT_DEFINE_CHECK_OP

}  // namespace detail
}  // namespace runtime

using runtime::Error;
using runtime::InternalError;

}  // namespace tvm

#define LOG(level) LOG_##level
#define LOG_INFO ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, "").stream()
#define LOG_WARNING ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, "Warning: ").stream()
#define LOG_ERROR ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, "Error: ").stream()
#define LOG_FATAL ::tvm::runtime::detail::LogFatal(__FILE__, __LINE__).stream()
#ifdef TVM_LOG_DEBUG
#define LOG_DEBUG ::tvm::runtime::detail::LogMessage(__FILE__, __LINE__, "Debug: ").stream()
#else
#define LOG_DEBUG ::tvm::runtime::detail::LogVoid().stream()
#endif
#define LOG_DFATAL LOG_FATAL
#define LOG_IF(level, cond) \
  if (!(cond)) {            \
  } else                    \
    LOG(level)

#define TVMRT_CHECK(cond, prefix) \
  if (cond) {                     \
  } else                          \
    LOG_FATAL << prefix "Check failed: (" #cond ") is false: "

#define TVMRT_CHECK_OP(name, op, x, y, prefix)                                          \
  if (auto tvmrt_check_msg_ = ::tvm::runtime::detail::LogCheck##name((x), (y))) \
  LOG_FATAL << prefix "Check failed: " #x " " #op " " #y << *tvmrt_check_msg_ << ": "

#define CHECK(x) TVMRT_CHECK(x, "")
#define CHECK_LT(x, y) TVMRT_CHECK_OP(_LT, <, x, y, "")
#define CHECK_GT(x, y) TVMRT_CHECK_OP(_GT, >, x, y, "")
#define CHECK_LE(x, y) TVMRT_CHECK_OP(_LE, <=, x, y, "")
#define CHECK_GE(x, y) TVMRT_CHECK_OP(_GE, >=, x, y, "")
#define CHECK_EQ(x, y) TVMRT_CHECK_OP(_EQ, ==, x, y, "")
#define CHECK_NE(x, y) TVMRT_CHECK_OP(_NE, !=, x, y, "")
#define CHECK_NOTNULL(x) \
  ((x) == nullptr ? (LOG_FATAL << "Check not null: " #x << ' ', (x)) : (x))

#define ICHECK(x) TVMRT_CHECK(x, "InternalError: ")
#define ICHECK_LT(x, y) TVMRT_CHECK_OP(_LT, <, x, y, "InternalError: ")
#define ICHECK_GT(x, y) TVMRT_CHECK_OP(_GT, >, x, y, "InternalError: ")
#define ICHECK_LE(x, y) TVMRT_CHECK_OP(_LE, <=, x, y, "InternalError: ")
#define ICHECK_GE(x, y) TVMRT_CHECK_OP(_GE, >=, x, y, "InternalError: ")
#define ICHECK_EQ(x, y) TVMRT_CHECK_OP(_EQ, ==, x, y, "InternalError: ")
#define ICHECK_NE(x, y) TVMRT_CHECK_OP(_NE, !=, x, y, "InternalError: ")
#define ICHECK_NOTNULL(x) \
  ((x) == nullptr ? (LOG_FATAL << "InternalError: Check not null: " #x << ' ', (x)) : (x))

#endif  // TVM_RUNTIME_LOGGING_H_
